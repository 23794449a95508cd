"""Each error class as the stack answers it, connection failures, and a retry through a gateway restart."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest

from agent_task_service import (
    AgentTaskService,
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    NotFoundError,
    Run,
    UnprocessableEntityError,
)

pytestmark = pytest.mark.stack


def test_a_bad_key_is_an_authentication_error_that_never_prints_the_key(stack) -> None:
    secret = "ats_not_a_real_key_0123456789"
    with AgentTaskService(api_key=secret) as bad:
        with pytest.raises(AuthenticationError) as caught:
            bad.agents.list()
    err = caught.value
    assert err.status == 401
    assert err.detail == "Invalid or missing API key"
    assert err.request_id
    text = str(err)
    assert "401" in text and err.detail in text and err.request_id in text and "GET /api/v1/agents" in text
    assert secret not in text and secret not in repr(err)


def test_another_projects_run_and_an_unknown_id_are_not_found(stack, heading_run: Run, client: AgentTaskService) -> None:
    with AgentTaskService(api_key=stack.other_key) as other:
        with pytest.raises(NotFoundError) as caught:
            other.runs.get(heading_run.id)
    assert caught.value.status == 404 and caught.value.detail == "Run not found"
    with pytest.raises(NotFoundError) as unknown:
        client.browsers.get("brw_doesnotexist000000000000")
    assert unknown.value.detail == "Browser not found"
    assert unknown.value.request_id and unknown.value.request_id in str(unknown.value)


def test_stopping_an_ended_run_is_a_conflict(client: AgentTaskService, heading_run: Run) -> None:
    with pytest.raises(ConflictError) as caught:
        client.runs.stop(heading_run)
    assert caught.value.status == 409
    assert caught.value.detail == "Run already completed"


def test_a_bad_body_is_unprocessable_with_the_items(client: AgentTaskService) -> None:
    with pytest.raises(UnprocessableEntityError) as caught:
        client.runs.create("Read the heading.", browser={"profile": "prf_x", "screen_width": 100, "screen_height": 100})
    err = caught.value
    assert err.status == 422
    by_loc = {tuple(item.loc): item for item in err.errors}
    extra = by_loc[("body", "browser", "profile")]
    assert (extra.type, extra.msg, extra.input) == ("extra_forbidden", "Extra inputs are not permitted", "prf_x")
    assert ("body", "browser", "screen_width") in by_loc
    assert "body.browser.profile: Extra inputs are not permitted" in str(err)


def test_workspace_id_on_browser_agent_is_a_bad_request(client: AgentTaskService) -> None:
    with pytest.raises(BadRequestError) as caught:
        client.runs.create("Read the heading.", workspace_id="wsp_whatever")
    assert caught.value.detail == "workspace_id is only supported by the browsercode agent"
    assert isinstance(caught.value, APIStatusError)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_closed_port_is_a_connection_error(stack) -> None:
    with AgentTaskService(base_url=f"http://127.0.0.1:{free_port()}", max_retries=1) as closed:
        with pytest.raises(APIConnectionError) as caught:
            closed.agents.list()
    assert caught.value.status is None
    assert "Connection refused" in str(caught.value)
    assert stack.api_key not in str(caught.value)


def test_a_server_that_does_not_answer_in_time_is_a_timeout_error(stack) -> None:
    # A listening socket that never answers: the connection is made, the reply never comes.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        with AgentTaskService(base_url=f"http://127.0.0.1:{port}", timeout=0.2, max_retries=1) as hasty:
            with pytest.raises(APITimeoutError) as slow:
                hasty.agents.list()
    assert "timed out" in str(slow.value) and isinstance(slow.value, APIConnectionError)
    assert stack.api_key not in str(slow.value)


class WatchingTransport(httpx.BaseTransport):
    """Passes requests on and reports each connection failure to `on_error` as it happens."""

    def __init__(self, on_error) -> None:
        self.inner = httpx.HTTPTransport()
        self.on_error = on_error
        self.requests = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        try:
            return self.inner.handle_request(request)
        except httpx.TransportError as exc:
            self.on_error(exc)
            raise

    def close(self) -> None:
        self.inner.close()


@pytest.mark.disruptive
def test_an_idempotent_call_is_retried_through_a_stopped_then_restarted_gateway(stack, heading_run: Run) -> None:
    failures: list[httpx.TransportError] = []
    restart = threading.Thread(target=stack.control, args=("gateway/start",))

    def on_error(exc: httpx.TransportError) -> None:
        failures.append(exc)
        if len(failures) == 1:
            restart.start()  # the client has met the stopped gateway: bring it back while it retries

    transport = WatchingTransport(on_error)
    stack.control("gateway/stop")
    try:
        with AgentTaskService(max_retries=12, http_client=httpx.Client(transport=transport)) as c:
            run = c.runs.get(heading_run.id)
    finally:
        if restart.ident is None:
            stack.control("gateway/start")
        else:
            restart.join()
    assert run == heading_run
    assert failures, "the call never met the stopped gateway"
    assert transport.requests >= len(failures) + 1
