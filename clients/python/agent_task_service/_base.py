"""What the sync and the async client share: settings, the retry policy, error mapping and argument shaping."""

from __future__ import annotations

import json
import os
import random
import uuid
from dataclasses import asdict
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import httpx

from ._errors import (
    AgentTaskServiceError,
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    RateLimitError,
    UnprocessableEntityError,
)
from ._models import BrowserOptions, Event, Run, RunCreated, ValidationErrorItem, _Binding, build
from ._version import __version__

DEFAULT_BASE_URL = "http://localhost:8080"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_AGENT = "browser-agent"
API_PREFIX = "/api/v1"
KEY_HEADER = "X-Service-API-Key"
USER_AGENT = f"agent-task-service-python/{__version__}"

#: What a file to upload may be: a path, raw bytes, or a (name, path-or-bytes) pair.
FileInput = Union[str, "os.PathLike[str]", bytes, Tuple[str, Union[str, "os.PathLike[str]", bytes]]]
#: A run named by its id, or by a run object (whose agent is then used).
RunRef = Union[str, Run, RunCreated]
Timeout = Union[float, httpx.Timeout, None]


def resolve_api_key(api_key: Optional[str]) -> str:
    key = api_key if api_key is not None else os.environ.get("ATS_API_KEY")
    if not key:
        raise AgentTaskServiceError("No API key: pass api_key=… or set ATS_API_KEY")
    return key


def resolve_base_url(base_url: Optional[str]) -> str:
    """The server root: a trailing slash or /api/v1 given by the user is dropped (the SDK adds it)."""
    url = (base_url if base_url is not None else os.environ.get("ATS_BASE_URL") or DEFAULT_BASE_URL).strip().rstrip("/")
    if url.endswith(API_PREFIX):
        url = url[: -len(API_PREFIX)].rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise AgentTaskServiceError(f"ATS base URL must start with http:// or https://, not {url!r}")
    return url


def make_timeout(timeout: Timeout) -> httpx.Timeout:
    return timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)


def retry_delay(attempt: int, retry_after: Optional[float] = None) -> float:
    """Exponential backoff with jitter (0.5 s, 1 s, 2 s … up to 8 s, each scaled by 0.5–1); a server's hint wins when longer."""
    base = min(8.0, 0.5 * 2**attempt) * (0.5 + random.random() / 2)
    if retry_after is not None:
        return min(max(base, retry_after), 60.0)
    return base


def retry_after_seconds(response: httpx.Response) -> Optional[float]:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from datetime import datetime, timezone

        return max(0.0, (parsedate_to_datetime(value) - datetime.now(timezone.utc)).total_seconds())
    except (TypeError, ValueError):
        return None


def new_idempotency_key() -> str:
    """A fresh `Idempotency-Key` for a POST that came without one, sent on each of its attempts: the
    API answers a repeat with the first response, so the SDK's own retries never create twice."""
    return str(uuid.uuid4())


def is_retryable_status(status: int) -> bool:
    # 503: the route's service is down or restarting; 502 and 504: a service it needs failed or was
    # late. The same idempotent request is likely to work a moment later.
    return status in (502, 503, 504)


_STATUS_CLASSES: Dict[int, type] = {
    400: BadRequestError,
    401: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def status_error(response: httpx.Response, method: Optional[str], path: Optional[str]) -> APIStatusError:
    """The exception for an error reply, carrying the service's `detail` and the request id."""
    status = response.status_code
    request_id = response.headers.get("x-request-id")
    try:
        body: Any = response.json()
    except (ValueError, json.JSONDecodeError):
        body = None
    raw = body.get("detail") if isinstance(body, dict) else None
    common: Dict[str, Any] = {"status": status, "request_id": request_id, "method": method, "path": path, "body": body}
    if status == 422 and isinstance(raw, list):
        items = [build(ValidationErrorItem, item) for item in raw if isinstance(item, Mapping)]
        detail = "; ".join(f"{'.'.join(str(p) for p in item.loc)}: {item.msg}" for item in items) or "Validation error"
        return UnprocessableEntityError(detail, errors=items, **common)
    if isinstance(raw, str):
        detail = raw
    else:
        detail = response.reason_phrase or f"HTTP {status}"
    if status == 422:
        return UnprocessableEntityError(detail, errors=[], **common)
    if status == 429:
        return RateLimitError(detail, retry_after=retry_after_seconds(response), **common)
    cls = _STATUS_CLASSES.get(status) or (InternalServerError if status >= 500 else APIStatusError)
    return cls(detail, **common)  # type: ignore[no-any-return]


def transport_error(exc: httpx.TransportError, method: Optional[str], path: Optional[str]) -> APIConnectionError:
    # httpx's message names the failure (refused, reset, timed out); it never holds headers.
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(f"Request timed out {_TIMEOUT_PHASE.get(type(exc), '')}".rstrip(), method=method, path=path)
    return APIConnectionError(f"Connection error ({str(exc) or type(exc).__name__})", method=method, path=path)


_TIMEOUT_PHASE = {
    httpx.ConnectTimeout: "while connecting",
    httpx.WriteTimeout: "while sending",
    httpx.ReadTimeout: "while waiting for the answer",
    httpx.PoolTimeout: "while waiting for a free connection",
}


def run_ref(run: RunRef, agent: Optional[str]) -> Tuple[str, str]:
    """The id and agent of a run given by id or object; an explicit agent wins, then the object's."""
    if isinstance(run, (Run, RunCreated)):
        return run.id, agent or run.agent
    return run, agent or DEFAULT_AGENT


def compact(**values: Any) -> Dict[str, Any]:
    """The given values without the None ones (left out of a body or a query)."""
    return {k: v for k, v in values.items() if v is not None}


def browser_body(browser: Union[BrowserOptions, Mapping[str, Any], None]) -> Optional[Dict[str, Any]]:
    if browser is None:
        return None
    values: Dict[str, Any] = asdict(browser) if isinstance(browser, BrowserOptions) else dict(browser)
    return compact(**values)


def read_upload(source: FileInput, name: Optional[str] = None, index: int = 1) -> Tuple[str, bytes]:
    """A file to upload as (name, bytes); bytes without a name are called `file-<n>`."""
    if isinstance(source, tuple):
        given, inner = source
        return read_upload(inner, name or given, index)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return name or f"file-{index}", bytes(source)
    path = Path(source)
    return name or path.name, path.read_bytes()


def read_uploads(files: Sequence[FileInput]) -> List[Tuple[str, bytes]]:
    if isinstance(files, (str, bytes, os.PathLike, tuple)):
        raise TypeError("files= takes a list of paths, bytes or (name, data) pairs")
    return [read_upload(f, index=i) for i, f in enumerate(files, 1)]


def download_target(to: Union[str, "os.PathLike[str]"], name: str) -> Path:
    """Where a download goes: into `to` when it is a folder, else to `to` itself."""
    target = Path(to)
    if target.is_dir():
        target = target / Path(name).name
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def download_source(file_or_url: Any) -> Tuple[str, str]:
    """The (url, name) of a File, a Download or a bare URL."""
    if isinstance(file_or_url, str):
        name = httpx.URL(file_or_url).path.rsplit("/", 1)[-1] or "download"
        return file_or_url, name
    url = getattr(file_or_url, "download_url", None)
    if not isinstance(url, str):
        raise TypeError("files.download takes a File, a Download or a URL")
    return url, str(getattr(file_or_url, "name", "download"))


def api_path(*parts: str) -> str:
    """A path under /api/v1 with each id percent-encoded (an id never changes the route)."""
    from urllib.parse import quote

    return API_PREFIX + "".join("/" + quote(p, safe="") for p in parts)


def base_headers() -> Dict[str, str]:
    return {"User-Agent": USER_AGENT, "Accept": "application/json"}


def sse_event(data: str, sse_id: Optional[str], binding: _Binding) -> Optional[Event]:
    """An Event from one SSE message; a message that is not an event object (none today) is skipped."""
    try:
        payload = json.loads(data)
    except ValueError:
        return None
    if not isinstance(payload, dict):
        return None
    if "id" not in payload and sse_id is not None and sse_id.isdigit():
        payload["id"] = int(sse_id)
    return build(Event, payload, binding)
