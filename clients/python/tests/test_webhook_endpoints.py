"""client.webhooks against the stack: a receiver here gets the pings the SDK asks for, signed with the secret it returned."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Iterator, List, Tuple

import pytest

from agent_task_service import AgentTaskService, AsyncAgentTaskService, NotFoundError, verify_webhook

pytestmark = pytest.mark.stack

Hook = Tuple[Dict[str, str], str]


class Receiver:
    """An HTTP endpoint on loopback (the harness sets WEBHOOK_ALLOW_LOOPBACK) that queues what it receives."""

    def __init__(self) -> None:
        self.hooks: List[Hook] = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
                with receiver.arrived:
                    receiver.hooks.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    receiver.arrived.notify_all()
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self, event_id: str) -> Hook:
        """The first delivery of `event_id` not taken yet (the examples' runs send their own events here too)."""
        with self.arrived:
            if not self.arrived.wait_for(lambda: any(h[0].get("webhook-id") == event_id for h in self.hooks), timeout=30):
                raise AssertionError(f"no delivery of {event_id} within 30 s")
            hook = next(h for h in self.hooks if h[0].get("webhook-id") == event_id)
            self.hooks.remove(hook)
            return hook


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


def test_when_a_webhook_is_pinged_redelivered_and_rotated_then_the_receiver_verifies_each_with_the_secret_the_sdk_returned(client: AgentTaskService, receiver: Receiver) -> None:
    hook = client.webhooks.create(receiver.url, event_types=["run.completed"], description="sdk ping")
    try:
        assert hook.secret.startswith("whsec_") and hook.event_types == ["run.completed"] and hook.enabled
        assert hook.secret not in repr(hook)

        ping = client.webhooks.test(hook.id)
        headers, body = receiver.take(ping.event_id)
        event = verify_webhook(hook.secret, body, headers)
        assert (event["type"], event["id"], event["data"]["webhookId"]) == ("webhook.test", ping.event_id, hook.id)
        assert ping.event_type == "webhook.test" and ping.webhook_id == hook.id

        again = client.webhooks.redeliver(hook.id, ping.id)
        headers, body = receiver.take(ping.event_id)
        assert again.id != ping.id and again.event_id == ping.event_id and verify_webhook(hook.secret, body, headers)["id"] == ping.event_id
        assert {d.id for d in client.webhooks.deliveries(hook.id, limit=1)} >= {ping.id, again.id}

        rotated = client.webhooks.rotate_secret(hook.id, overlap_seconds=600)
        assert rotated.secret != hook.secret and rotated.previous_secret_expires_at is not None
        headers, body = receiver.take(client.webhooks.test(hook.id).event_id)
        # During the overlap both secrets sign: a receiver with either one accepts the delivery.
        assert verify_webhook(rotated.secret, body, headers)["type"] == verify_webhook(hook.secret, body, headers)["type"] == "webhook.test"
    finally:
        client.webhooks.delete(hook.id)
    with pytest.raises(NotFoundError):
        client.webhooks.get(hook.id)


def test_when_webhooks_are_listed_and_updated_then_every_page_is_read_and_a_change_reads_back(client: AgentTaskService, receiver: Receiver) -> None:
    made = [client.webhooks.create(receiver.url, description=f"page {i}") for i in range(3)]
    try:
        listed = [w.id for w in client.webhooks.list(limit=2)]
        assert {w.id for w in made} <= set(listed) and len(listed) == len(set(listed))
        changed = client.webhooks.update(made[0].id, enabled=False, event_types=["run.failed", "run.stopped"])
        assert (changed.enabled, changed.event_types) == (False, ["run.failed", "run.stopped"])
        assert client.webhooks.get(made[0].id).enabled is False
    finally:
        for w in made:
            client.webhooks.delete(w.id)


def test_when_the_async_client_manages_a_webhook_then_it_reads_the_same_as_the_sync_one(stack, receiver: Receiver) -> None:
    async def main() -> None:
        async with AsyncAgentTaskService(timeout=60) as c:
            hook = await c.webhooks.create(receiver.url, description="async")
            try:
                assert (await c.webhooks.get(hook.id)).description == "async"
                assert hook.id in [w.id async for w in c.webhooks.list(limit=1)]
                ping = await c.webhooks.test(hook.id)
                headers, body = await asyncio.get_running_loop().run_in_executor(None, receiver.take, ping.event_id)
                assert json.loads(body)["id"] == ping.event_id and verify_webhook(hook.secret, body, headers)["type"] == "webhook.test"
                assert ping.id in [d.id async for d in c.webhooks.deliveries(hook.id)]
                rotated = await c.webhooks.rotate_secret(hook.id)
                assert rotated.secret != hook.secret
                assert (await c.webhooks.update(hook.id, description="renamed")).description == "renamed"
            finally:
                await c.webhooks.delete(hook.id)

    asyncio.run(main())
