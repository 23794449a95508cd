"""Verifying a webhook delivery (Standard Webhooks).

The HMAC-SHA256, keyed with the secret's base64 bytes, of ``{webhook-id}.{webhook-timestamp}.{body}``
must match one of the ``v1,`` signatures in ``webhook-signature``, and the timestamp must be recent
(a replayed delivery is refused).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any, Mapping, Optional, Union

from ._errors import AgentTaskServiceError


class WebhookVerificationError(AgentTaskServiceError):
    """A delivery that is not signed by the secret, or not recently."""


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    if not value:
        raise WebhookVerificationError(f"missing {name} header")
    return value


def verify_webhook(
    secret: str,
    body: Union[str, bytes],
    headers: Mapping[str, str],
    *,
    tolerance_seconds: int = 300,
    now: Optional[float] = None,
) -> Any:
    """Checks a delivery with the endpoint's ``whsec_…`` secret and returns the parsed event
    (``{"id", "type", "createdAt", "data"}``); raises WebhookVerificationError otherwise. Pass the
    raw body, exactly as received."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    msg_id = _header(headers, "webhook-id")
    ts = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if not ts.isdigit() or abs((time.time() if now is None else now) - int(ts)) > tolerance_seconds:
        raise WebhookVerificationError("webhook-timestamp is not recent")
    key = base64.b64decode(secret[len("whsec_"):] if secret.startswith("whsec_") else secret)
    expected = base64.b64encode(hmac.new(key, msg_id.encode() + b"." + ts.encode() + b"." + raw, hashlib.sha256).digest()).decode()
    if not any(s.startswith("v1,") and hmac.compare_digest(s[3:], expected) for s in signatures.split(" ")):
        raise WebhookVerificationError("no webhook-signature matches the secret")
    return json.loads(raw)
