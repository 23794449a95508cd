"""verify_webhook, without a stack: the Standard Webhooks test vector, rotation, tampering, replays."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os

import pytest

from agent_task_service import AgentTaskServiceError, WebhookVerificationError, verify_webhook

# The test vector of the Standard Webhooks libraries (standard-webhooks/libraries, the JavaScript tests).
VECTOR = {
    "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "body": '{"test": 2432232314}',
    "headers": {"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330", "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
}


def _signed(secret: str, body: str, ts: int) -> dict:
    key = base64.b64decode(secret[len("whsec_"):])
    sig = base64.b64encode(hmac.new(key, f"evt_1.{ts}.{body}".encode(), hashlib.sha256).digest()).decode()
    return {"webhook-id": "evt_1", "webhook-timestamp": str(ts), "webhook-signature": f"v1,{sig}"}


def test_when_the_standard_webhooks_vector_is_verified_then_it_passes_at_its_time_and_is_refused_later() -> None:
    assert verify_webhook(VECTOR["secret"], VECTOR["body"], VECTOR["headers"], now=1614265330) == {"test": 2432232314}
    with pytest.raises(WebhookVerificationError, match="not recent"):
        verify_webhook(VECTOR["secret"], VECTOR["body"], VECTOR["headers"], now=1614265330 + 301)


def test_when_two_secrets_sign_during_a_rotation_then_either_verifies_and_a_changed_body_does_not() -> None:
    old, new = ("whsec_" + base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    body = json.dumps({"id": "evt_1", "type": "run.completed", "createdAt": "2026-01-01T00:00:00Z", "data": {"id": "run_1"}})
    a, b = _signed(old, body, 1_700_000_000), _signed(new, body, 1_700_000_000)
    headers = {**a, "webhook-signature": f"{a['webhook-signature']} {b['webhook-signature']}"}
    assert verify_webhook(old, body, headers, now=1_700_000_000)["data"] == {"id": "run_1"}
    assert verify_webhook(new, body.encode(), headers, now=1_700_000_000)["type"] == "run.completed"
    with pytest.raises(WebhookVerificationError, match="no webhook-signature"):
        verify_webhook(old, body.replace("run_1", "run_2"), headers, now=1_700_000_000)
    with pytest.raises(AgentTaskServiceError, match="missing webhook-id"):
        verify_webhook(old, body, {"webhook-timestamp": "1700000000", "webhook-signature": "v1,x"}, now=1_700_000_000)
