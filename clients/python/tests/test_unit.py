"""Unit tests without a stack: status mapping (429, 500, 503 …), retries, the SSE parser, parsing, settings."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from typing import Callable, List

import httpx
import pytest

import agent_task_service._async_client as async_module
import agent_task_service._client as sync_module
from agent_task_service import (
    AgentTaskService,
    AgentTaskServiceError,
    APIConnectionError,
    APIStatusError,
    AsyncAgentTaskService,
    ConflictError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
    Run,
    UnprocessableEntityError,
)
from agent_task_service._base import resolve_base_url, retry_delay
from agent_task_service._models import build
from agent_task_service._sse import SSEDecoder

KEY = "ats_unit_secret_key"
RUN = {
    "id": "run_1",
    "agent": "browser-agent",
    "status": "completed",
    "sessionId": "ses_1",
    "browserId": None,
    "workspaceId": None,
    "model": "builtin",
    "task": "t",
    "result": "42",
    "output": None,
    "error": None,
    "totalCostUsd": "0",
    "totalInputTokens": 0,
    "totalOutputTokens": 0,
    "missingFileIds": [],
    "createdAt": "2026-01-02T03:04:05.678Z",
    "startedAt": None,
    "finishedAt": "2026-01-02T03:04:06Z",
    "updatedAt": "2026-01-02T03:04:06Z",
}


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> List[float]:
    """Retries without waiting; the delays asked for are recorded."""
    asked: List[float] = []

    def delay(attempt: int, retry_after: float | None = None) -> float:
        asked.append(retry_delay(attempt, retry_after))
        return 0.0

    monkeypatch.setattr(sync_module, "retry_delay", delay)
    monkeypatch.setattr(async_module, "retry_delay", delay)
    return asked


def mock(replies: List[Callable[[httpx.Request], httpx.Response]], seen: List[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return replies[min(len(seen), len(replies)) - 1](request)

    return httpx.MockTransport(handler)


def reply(status: int, body: object = None, headers: dict | None = None) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(status, json=body, headers={"x-request-id": "req_abc", **(headers or {})})


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno 111] Connection refused", request=request)


def sync_client(replies, seen, **options) -> AgentTaskService:
    return AgentTaskService(api_key=KEY, base_url="http://ats.test", http_client=httpx.Client(transport=mock(replies, seen)), **options)


def test_429_is_a_rate_limit_error_with_retry_after_and_is_not_retried() -> None:
    seen: List[httpx.Request] = []
    client = sync_client([reply(429, {"detail": "Too many active browsers"}, {"retry-after": "3"})], seen)
    with pytest.raises(RateLimitError) as caught:
        client.browsers.create()
    assert caught.value.retry_after == 3.0
    assert caught.value.status == 429 and caught.value.detail == "Too many active browsers"
    assert str(caught.value) == "POST /api/v1/browsers: 429 Too many active browsers (request id req_abc)"
    assert len(seen) == 1


CREATED = {"id": "run_1", "status": "queued", "agent": "browser-agent", "sessionId": "ses_1", "workspaceId": None, "stepsUrl": "/s", "eventsUrl": "/e", "missingFileIds": []}


def test_a_create_with_an_idempotency_key_is_retried_with_the_same_key(no_backoff: List[float]) -> None:
    seen: List[httpx.Request] = []
    client = sync_client([refuse, reply(503, {"detail": "Service unavailable, try again shortly"}), reply(202, CREATED)], seen)
    created = client.runs.create("Find the price", idempotency_key="order-4711")
    assert created.id == "run_1"
    assert [r.headers.get("idempotency-key") for r in seen] == ["order-4711"] * 3, "every attempt carries the key"

    async def run_async() -> List[httpx.Request]:
        got: List[httpx.Request] = []
        transport = httpx.AsyncClient(transport=mock([refuse, reply(202, CREATED)], got))
        async with AsyncAgentTaskService(api_key=KEY, base_url="http://ats.test", http_client=transport) as aclient:
            assert (await aclient.runs.create("Find the price", idempotency_key="order-4712")).id == "run_1"
        return got

    assert [r.headers.get("idempotency-key") for r in asyncio.run(run_async())] == ["order-4712"] * 2


def test_a_create_without_a_key_gets_one_of_its_own_kept_across_its_retries_and_new_for_the_next_create(no_backoff: List[float]) -> None:
    seen: List[httpx.Request] = []
    client = sync_client([refuse, reply(503, {"detail": "Service unavailable, try again shortly"}), reply(202, CREATED), reply(201, {"id": "wsp_1", "name": "w", "createdAt": "2026-01-02T03:04:05Z", "updatedAt": "2026-01-02T03:04:05Z"})], seen)
    assert client.runs.create("Find the price").id == "run_1"
    keys = [r.headers.get("idempotency-key") for r in seen]
    assert len(keys) == 3 and keys[0] and len(set(keys)) == 1, f"one key on every attempt: {keys}"
    client.workspaces.create(name="w")
    assert seen[3].url.path == "/api/v1/agent-workspaces"
    assert seen[3].headers.get("idempotency-key") not in (None, keys[0]), "each create its own key"
    reads: List[httpx.Request] = []
    sync_client([reply(200, RUN)], reads).runs.get("run_1")
    assert "idempotency-key" not in reads[0].headers, "a read carries none"

    async def run_async() -> List[httpx.Request]:
        got: List[httpx.Request] = []
        transport = httpx.AsyncClient(transport=mock([refuse, reply(429, {"detail": "Too many active browsers"}, {"retry-after": "1"})], got))
        async with AsyncAgentTaskService(api_key=KEY, base_url="http://ats.test", http_client=transport) as aclient:
            with pytest.raises(RateLimitError):
                await aclient.browsers.create()
        return got

    got = asyncio.run(run_async())
    assert len(got) == 2 and got[0].headers.get("idempotency-key") and got[0].headers.get("idempotency-key") == got[1].headers.get("idempotency-key")


def test_500_is_an_internal_server_error_carrying_the_request_id() -> None:
    seen: List[httpx.Request] = []
    client = sync_client([reply(500, {"detail": "Internal error"})], seen)
    with pytest.raises(InternalServerError) as caught:
        client.runs.get("run_1")
    assert caught.value.request_id == "req_abc" and "req_abc" in str(caught.value)
    assert len(seen) == 1, "a 500 is not retried"


def test_a_503_on_an_idempotent_call_is_retried_with_growing_backoff(no_backoff: List[float]) -> None:
    seen: List[httpx.Request] = []
    client = sync_client([reply(503, {"detail": "run unavailable"}), reply(503, {"detail": "x"}), reply(200, RUN)], seen, max_retries=2)
    assert client.runs.get("run_1").result == "42"
    assert len(seen) == 3
    assert 0.25 <= no_backoff[0] <= 0.5 and 0.5 <= no_backoff[1] <= 1.0


def test_a_503_past_max_retries_is_raised_and_a_create_is_retried_as_often_under_one_idempotency_key() -> None:
    seen: List[httpx.Request] = []
    client = sync_client([reply(503, {"detail": "run unavailable"})], seen, max_retries=3)
    with pytest.raises(InternalServerError) as caught:
        client.runs.status("run_1")
    assert caught.value.status == 503 and len(seen) == 4
    seen.clear()
    with pytest.raises(InternalServerError):
        client.runs.create("task")
    assert len(seen) == 4, "the key makes creating again safe: retried like a read"
    assert len({r.headers["idempotency-key"] for r in seen}) == 1


def test_connection_errors_are_retried_then_raised_without_the_key() -> None:
    seen: List[httpx.Request] = []
    client = sync_client([refuse], seen, max_retries=2)
    with pytest.raises(APIConnectionError) as caught:
        next(iter(client.profiles.list()))
    assert len(seen) == 3
    assert caught.value.status is None and "Connection refused" in str(caught.value)
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)


def test_a_stop_and_a_browser_create_are_retried_after_a_connection_error() -> None:
    seen: List[httpx.Request] = []
    client = sync_client([refuse, reply(200, RUN)], seen)
    assert client.runs.stop("run_1").id == "run_1" and len(seen) == 2
    seen.clear()
    with pytest.raises(APIConnectionError):
        sync_client([refuse], seen).browsers.create()
    assert len(seen) == 3 and len({r.headers["idempotency-key"] for r in seen}) == 1


def test_other_statuses_map_to_their_classes() -> None:
    cases = [
        (404, {"detail": "Run not found"}, NotFoundError),
        (409, {"detail": "Run already completed"}, ConflictError),
        (418, {"detail": "teapot"}, APIStatusError),
        (502, None, InternalServerError),
    ]
    for status, body, cls in cases:
        with pytest.raises(cls) as caught:
            sync_client([reply(status, body)], []).runs.get("run_1")
        assert type(caught.value) is cls and caught.value.status == status
    with pytest.raises(UnprocessableEntityError) as invalid:
        sync_client([reply(422, {"detail": [{"type": "missing", "loc": ["body", "task"], "msg": "Field required", "input": {}}]})], []).runs.create("")
    assert invalid.value.errors[0].loc == ["body", "task"] and str(invalid.value).endswith("422 body.task: Field required (request id req_abc)")


def test_the_key_goes_on_api_calls_and_never_on_presigned_links() -> None:
    seen: List[httpx.Request] = []
    upload = {"items": [{"id": "file_1", "name": "a.txt", "upload_url": "http://storage.test/u/blob?sig=s3cret"}]}
    client = sync_client([reply(201, upload), reply(200, None)], seen)
    uploaded = client.files.upload(b"hello", name="a.txt")
    assert (uploaded.id, uploaded.name) == ("file_1", "a.txt")
    add, put = seen
    assert add.headers["x-service-api-key"] == KEY and json.loads(add.content) == {"files": [{"name": "a.txt"}]}
    assert put.method == "PUT" and str(put.url) == "http://storage.test/u/blob?sig=s3cret" and put.content == b"hello"
    assert "x-service-api-key" not in put.headers

    seen.clear()
    failing = sync_client([reply(403, {"detail": "Link expired"})], seen)
    with pytest.raises(APIStatusError) as caught:
        failing.files.download("http://storage.test/d/blob?sig=s3cret")
    assert "x-service-api-key" not in seen[0].headers
    assert "s3cret" not in str(caught.value), "a presigned link's signature is not printed"


def test_a_stream_that_breaks_resumes_with_last_event_id_and_ends_at_the_terminal_event() -> None:
    seen: List[httpx.Request] = []

    def sse(*events: dict) -> Callable[[httpx.Request], httpx.Response]:
        text = "".join(f"id: {e['id']}\nevent: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return lambda request: httpx.Response(200, content=text.encode() + b"id: 9\ndata: {\"partial", headers={"content-type": "text/event-stream"})

    ev = lambda i, t: {"id": i, "runId": "run_1", "ts": "2026-01-02T03:04:05Z", "type": t, "data": {}}
    client = sync_client([sse(ev(1, "run.queued"), ev(2, "run.started")), sse(ev(3, "step"), ev(4, "run.completed"), ev(5, "late"))], seen)
    got = list(client.runs.stream("run_1"))
    assert [(e.id, e.type) for e in got] == [(1, "run.queued"), (2, "run.started"), (3, "step"), (4, "run.completed")]
    assert "last-event-id" not in seen[0].headers and seen[1].headers["last-event-id"] == "2"
    assert seen[0].headers["accept"] == "text/event-stream"


def test_settings_come_from_the_environment_and_the_base_url_is_the_server_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATS_API_KEY", "ats_from_env")
    monkeypatch.setenv("ATS_BASE_URL", "https://ats.example/api/v1/")
    client = AgentTaskService()
    assert client.base_url == "https://ats.example" and client._api_key == "ats_from_env"
    assert "ats_from_env" not in repr(client)
    assert resolve_base_url("http://h:8080/") == "http://h:8080"
    monkeypatch.delenv("ATS_API_KEY")
    with pytest.raises(AgentTaskServiceError, match="ATS_API_KEY"):
        AgentTaskService()


def test_models_take_camel_case_json_ignore_unknown_fields_and_parse_times() -> None:
    run = build(Run, {**RUN, "someFutureField": {"x": 1}})
    assert run.session_id == "ses_1" and run.total_cost_usd == "0" and run.ended
    assert run.created_at == datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=timezone.utc)
    assert run.started_at is None and run.browser_id is None


def test_the_sse_decoder_takes_any_chunking_crlf_comments_and_multi_line_data() -> None:
    stream = b": keep-alive\r\n\r\nid: 7\r\nevent: step\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nid: 8\ndata: x\n\n"
    for size in (1, 2, 3, 5, len(stream)):
        decoder = SSEDecoder()
        got = [e for i in range(0, len(stream), size) for e in decoder.feed(stream[i : i + size])]
        assert [(e.id, e.event, e.data) for e in got] == [("7", "step", '{"a":\n1}'), ("8", "message", "x")], size
    decoder = SSEDecoder()
    assert list(decoder.feed("data: caf\u00e9\n\n".encode()[:-3])) == []
    assert [e.data for e in decoder.feed("data: caf\u00e9\n\n".encode()[-3:])] == ["caf\u00e9"]


def test_retry_delay_grows_exponentially_with_jitter_and_honours_retry_after() -> None:
    for attempt, (low, high) in enumerate([(0.25, 0.5), (0.5, 1), (1, 2), (2, 4), (4, 8), (4, 8)]):
        assert all(low <= retry_delay(attempt) <= high for _ in range(50))
    assert retry_delay(0, retry_after=5) == 5


def test_the_async_client_maps_and_retries_the_same_way() -> None:
    seen: List[httpx.Request] = []

    async def main() -> None:
        client = AsyncAgentTaskService(api_key=KEY, base_url="http://ats.test", http_client=httpx.AsyncClient(transport=mock([refuse, reply(503, {"detail": "d"}), reply(200, RUN)], seen)))
        assert (await client.runs.get("run_1")).result == "42"
        assert len(seen) == 3
        seen.clear()
        limited = AsyncAgentTaskService(api_key=KEY, base_url="http://ats.test", http_client=httpx.AsyncClient(transport=mock([reply(429, {"detail": "busy"}, {"retry-after": "2"})], seen)))
        with pytest.raises(RateLimitError) as caught:
            await limited.browsers.create()
        assert caught.value.retry_after == 2.0 and len(seen) == 1

    asyncio.run(main())
