"""Typed models of the API's replies: dataclasses with snake_case fields, built from the camelCase JSON.

Parsing is driven by the type hints: a key the SDK does not know is ignored (a newer server
does not break an older client); the drift test keeps the fields true to /openapi.json.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, TypeVar, Union, get_args, get_origin, get_type_hints, overload

__all__ = [
    "Agent",
    "AgentSession",
    "Model",
    "ModelList",
    "AgentList",
    "RunCreated",
    "Run",
    "RunStatus",
    "RunList",
    "Step",
    "StepList",
    "Event",
    "EventList",
    "Session",
    "SessionList",
    "FileUpload",
    "FileUploadList",
    "UploadedFile",
    "File",
    "AsyncFile",
    "FileList",
    "WorkspaceFileList",
    "Workspace",
    "WorkspaceList",
    "Browser",
    "AsyncBrowser",
    "BrowserList",
    "BrowserOptions",
    "Recording",
    "LiveViewLink",
    "Download",
    "DownloadList",
    "Profile",
    "ProfileList",
    "ValidationErrorItem",
    "Health",
    "TERMINAL_STATUSES",
    "TERMINAL_EVENTS",
]

#: Run statuses after which a run does not change any more.
TERMINAL_STATUSES = frozenset({"completed", "stopped", "failed"})
#: The event types that end a run's event stream.
TERMINAL_EVENTS = frozenset({"run.completed", "run.failed", "run.stopped"})


# ---------- agents ----------


@dataclass
class AgentSession:
    """How an agent's sessions live: `disposable` (browser-agent) or `durable` (browsercode)."""

    kind: str


@dataclass
class Agent:
    """An agent of the registry and the watch verb (steps or events) it is built around."""

    name: str
    capabilities: List[str]
    session: AgentSession
    watch: str
    run: str
    best_for: List[str]
    not_for: List[str]
    example_tasks: List[str]


@dataclass
class AgentList:
    """The reply of `GET /agents`."""

    agents: List[Agent]


@dataclass
class Model:
    """A model a run may name (`model=`)."""

    name: str
    provider: str
    vision: bool
    default: bool


@dataclass
class ModelList:
    """The reply of `GET /models`: the models on offer, the default, and which other names a run may give."""

    models: List[Model]
    default: str
    other_names: Optional[str]


# ---------- runs ----------


@dataclass
class RunCreated:
    """The reply of creating a run (status `queued`); the run goes on in the background."""

    id: str
    status: str
    agent: str
    session_id: str
    workspace_id: Optional[str]
    steps_url: str
    events_url: str
    missing_file_ids: List[str]


@dataclass
class Run:
    """The full run object; `result` holds the answer once the run completed."""

    id: str
    agent: str
    status: str
    session_id: str
    browser_id: Optional[str]
    workspace_id: Optional[str]
    model: str
    task: str
    result: Optional[str]
    output: Optional[Any]
    error: Optional[str]
    total_cost_usd: str
    total_input_tokens: int
    total_output_tokens: int
    missing_file_ids: List[str]
    created_at: datetime
    started_at: Optional[datetime]
    finished_at: Optional[datetime]
    updated_at: datetime

    @property
    def ended(self) -> bool:
        """True once the run is completed, stopped or failed."""
        return self.status in TERMINAL_STATUSES


@dataclass
class RunStatus:
    """The cheap poll of a run: status, result, output and cost."""

    status: str
    result: Optional[str]
    output: Optional[Any]
    total_cost_usd: str

    @property
    def ended(self) -> bool:
        """True once the run is completed, stopped or failed."""
        return self.status in TERMINAL_STATUSES


@dataclass
class RunList:
    """One page of runs."""

    items: List[Run]
    next_cursor: Optional[str]
    has_more: bool


@dataclass
class Step:
    """One browser action of a run (navigation, click, extraction), with a screenshot link."""

    number: int
    url: Optional[str]
    action: str
    thought: Optional[str]
    screenshot_url: Optional[str]
    ts: datetime
    duration_ms: int


@dataclass
class StepList:
    """One page of steps; the next page starts after `next_after`."""

    steps: List[Step]
    next_after: int
    has_more: bool


@dataclass
class Event:
    """One event of a run (`run.started`, `step`, `terminal.output`, `file.written`, `run.completed`, …)."""

    id: int
    run_id: str
    ts: datetime
    type: str
    data: Dict[str, Any]


@dataclass
class EventList:
    """One page of events; the next page starts after `next_after`."""

    events: List[Event]
    next_after: int
    has_more: bool


# ---------- sessions ----------


@dataclass
class Session:
    """A conversation: the thread of runs that share a browser (browser-agent) or a disk."""

    id: str
    agent: str
    status: str
    busy: bool
    latest_run_id: Optional[str]
    browser_id: Optional[str]
    workspace_id: Optional[str]
    closed_reason: Optional[str]
    created_at: datetime
    updated_at: datetime


@dataclass
class SessionList:
    """One page of sessions."""

    items: List[Session]
    next_cursor: Optional[str]
    has_more: bool


# ---------- files and workspaces ----------


@dataclass
class FileUpload:
    """A file added for upload: PUT its bytes to `upload_url` (presigned; no key), then attach `id`."""

    id: str
    name: str
    upload_url: str = field(repr=False)


@dataclass
class FileUploadList:
    """The reply of adding files."""

    items: List[FileUpload]


@dataclass
class UploadedFile:
    """A file whose bytes are uploaded: attach it to a run by `id`."""

    id: str
    name: str


@dataclass
class _FileFields:
    id: str
    name: str
    kind: str
    download_url: str = field(repr=False)
    size_bytes: int
    content_type: str
    created_at: datetime


@dataclass
class File(_FileFields):
    """A run's input or output file (or a workspace's); `download()` fetches its bytes."""

    _client: Any = field(default=None, init=False, repr=False, compare=False)

    @overload
    def download(self, to: None = None) -> bytes: ...
    @overload
    def download(self, to: Union[str, "os.PathLike[str]"]) -> Path: ...

    def download(self, to: Union[str, "os.PathLike[str]", None] = None) -> Union[bytes, Path]:
        """The file's bytes, or with `to` (a file or a folder) the path it was written to."""
        if self._client is None:
            raise RuntimeError("this File is not bound to a client; use client.files.download(file)")
        return self._client.files.download(self, to=to)


@dataclass
class AsyncFile(_FileFields):
    """A run's input or output file of the async client; `await download()` fetches its bytes."""

    _client: Any = field(default=None, init=False, repr=False, compare=False)

    @overload
    async def download(self, to: None = None) -> bytes: ...
    @overload
    async def download(self, to: Union[str, "os.PathLike[str]"]) -> Path: ...

    async def download(self, to: Union[str, "os.PathLike[str]", None] = None) -> Union[bytes, Path]:
        """The file's bytes, or with `to` (a file or a folder) the path it was written to."""
        if self._client is None:
            raise RuntimeError("this AsyncFile is not bound to a client; use client.files.download(file)")
        return await self._client.files.download(self, to=to)


@dataclass
class FileList:
    """One page of a run's files."""

    items: List[File]
    next_cursor: Optional[str]
    has_more: bool


@dataclass
class WorkspaceFileList:
    """One page of a workspace's files."""

    items: List[File]
    next_cursor: Optional[str]
    has_more: bool


@dataclass
class Workspace:
    """A named disk shared across conversations (browsercode)."""

    id: str
    name: str
    created_at: datetime
    updated_at: datetime


@dataclass
class WorkspaceList:
    """One page of workspaces."""

    items: List[Workspace]
    next_cursor: Optional[str]
    has_more: bool


# ---------- browsers and profiles ----------


@dataclass
class _BrowserFields:
    id: str
    status: str
    cdp_url: Optional[str] = field(repr=False)
    live_view_url: Optional[str] = field(repr=False)
    profile_id: Optional[str]
    session_id: Optional[str]
    run_id: Optional[str]
    proxy_country_code: Optional[str]
    stealth: bool
    locale: Optional[str]
    timezone: Optional[str]
    allowed_domains: List[str]
    block_ads: bool
    screen_width: int
    screen_height: int
    created_at: datetime
    timeout_at: Optional[datetime]
    stopped_at: Optional[datetime]
    stop_reason: Optional[str]
    recording_url: Optional[str] = field(repr=False)


@dataclass
class Browser(_BrowserFields):
    """A browser: drive it over CDP at `cdp_url`, watch it at `live_view_url`; `with` stops it on exit."""

    _client: Any = field(default=None, init=False, repr=False, compare=False)

    def stop(self) -> "Browser":
        """Stops the browser (idempotent) and returns its record."""
        if self._client is None:
            raise RuntimeError("this Browser is not bound to a client; use client.browsers.stop(id)")
        return self._client.browsers.stop(self.id)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class AsyncBrowser(_BrowserFields):
    """A browser of the async client; `async with` stops it on exit."""

    _client: Any = field(default=None, init=False, repr=False, compare=False)

    async def stop(self) -> "AsyncBrowser":
        """Stops the browser (idempotent) and returns its record."""
        if self._client is None:
            raise RuntimeError("this AsyncBrowser is not bound to a client; use client.browsers.stop(id)")
        return await self._client.browsers.stop(self.id)

    async def __aenter__(self) -> "AsyncBrowser":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


@dataclass
class BrowserList:
    """One page of browsers."""

    items: List[Browser]
    next_cursor: Optional[str]
    has_more: bool


@dataclass
class BrowserOptions:
    """The browser a run provisions (`runs.create(browser=…)`); a plain dict with these keys works too."""

    proxy_country_code: Optional[str] = None
    screen_width: Optional[int] = None
    screen_height: Optional[int] = None
    profile_id: Optional[str] = None
    stealth: Optional[bool] = None
    locale: Optional[str] = None
    timezone: Optional[str] = None
    allowed_domains: Optional[List[str]] = None
    block_ads: Optional[bool] = None


@dataclass
class Recording:
    """A fresh presigned link to a browser's MP4 recording (valid one hour)."""

    url: str = field(repr=False)
    expires_at: datetime


@dataclass
class LiveViewLink:
    """A live view link of an active browser, view-only or interactive."""

    url: str = field(repr=False)
    expires_at: datetime


@dataclass
class Download:
    """A file the browser downloaded from the web."""

    name: str
    size_bytes: int
    last_modified: datetime
    download_url: str = field(repr=False)


@dataclass
class DownloadList:
    """A browser's downloads."""

    items: List[Download]


@dataclass
class Profile:
    """A browser profile: saved cookies, localStorage and logins."""

    id: str
    name: str
    user_id: Optional[str]
    last_used_at: Optional[datetime]
    cookie_domains: List[str]
    created_at: datetime
    updated_at: datetime


@dataclass
class ProfileList:
    """One page of profiles."""

    items: List[Profile]
    next_cursor: Optional[str]
    has_more: bool


# ---------- API keys ----------


@dataclass
class ApiKey:
    """An API key of the project as listed: never the key itself."""

    id: str
    name: str
    prefix: str
    scope: str
    created_at: datetime
    last_used_at: Optional[datetime]


@dataclass
class ApiKeyCreated(ApiKey):
    """A key just issued: `key` is in this reply only, store it now."""

    key: str


@dataclass
class ApiKeyList:
    """The project's keys that are not revoked."""

    items: List[ApiKey]


# ---------- webhooks ----------


@dataclass
class Webhook:
    """An endpoint that receives the project's events, signed (Standard Webhooks); never its secret."""

    id: str
    url: str
    event_types: List[str]
    enabled: bool
    description: str
    disabled_reason: Optional[str]
    disabled_at: Optional[datetime]
    previous_secret_expires_at: Optional[datetime]
    created_at: datetime
    updated_at: datetime


@dataclass
class WebhookWithSecret(Webhook):
    """A webhook just created or rotated: `secret` (whsec_…) is in this reply only, store it now."""

    secret: str = field(repr=False)


@dataclass
class WebhookList:
    """One page of webhooks, newest first."""

    items: List[Webhook]
    next_cursor: Optional[str]
    has_more: bool


@dataclass
class WebhookDelivery:
    """One event sent to a webhook: its status, attempts and the last attempt's code, latency and error."""

    id: str
    webhook_id: str
    event_id: str
    event_type: str
    status: str
    attempts: int
    last_status_code: Optional[int]
    last_error: Optional[str]
    last_latency_ms: Optional[int]
    last_attempt_at: Optional[datetime]
    next_attempt_at: Optional[datetime]
    created_at: datetime
    delivered_at: Optional[datetime]


@dataclass
class WebhookDeliveryList:
    """One page of a webhook's deliveries, newest first."""

    items: List[WebhookDelivery]
    next_cursor: Optional[str]
    has_more: bool


# The bodies a webhook endpoint receives: `data` is the resource as the REST API returns it.


@dataclass
class RunEventPayload:
    """run.queued, run.started, run.completed, run.failed or run.stopped."""

    id: str
    type: str
    created_at: datetime
    data: Run


@dataclass
class BrowserEventPayload:
    """browser.created, browser.stopped or recording.ready."""

    id: str
    type: str
    created_at: datetime
    data: Browser


@dataclass
class FileEventPayload:
    """file.created: a run wrote an output file."""

    id: str
    type: str
    created_at: datetime
    data: File


@dataclass
class TestEventData:
    """What a test ping carries."""

    webhook_id: str
    message: str


@dataclass
class TestEventPayload:
    """webhook.test: sent by webhooks.test(webhook_id)."""

    id: str
    type: str
    created_at: datetime
    data: TestEventData


# ---------- errors and health ----------


@dataclass
class ValidationErrorItem:
    """One reason a request failed validation: `loc` names the field, e.g. ["body", "browser", "profile_id"]."""

    type: str
    loc: List[Union[str, int]]
    msg: str
    input: Optional[Any] = None
    ctx: Optional[Dict[str, Any]] = None


@dataclass
class Health:
    """Each downstream service's health as the gateway sees it."""

    status: str
    services: Dict[str, str]


# ---------- parsing ----------

T = TypeVar("T")

_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    """`sessionId` → `session_id`; a name already in snake_case (`upload_url`) stays."""
    return _CAMEL.sub(r"_\1", name).lower()


_HINTS: Dict[type, Dict[str, Any]] = {}


def model_fields(cls: type) -> Dict[str, Any]:
    """The public fields of a model class and their types (private ones, like `_client`, left out)."""
    hints = _HINTS.get(cls)
    if hints is None:
        all_hints = get_type_hints(cls)
        hints = {f.name: all_hints[f.name] for f in dataclasses.fields(cls) if not f.name.startswith("_")}
        _HINTS[cls] = hints
    return hints


def _datetime(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        # Python 3.10's fromisoformat does not take a trailing Z.
        return datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        return value


def _convert(tp: Any, value: Any, ctx: "_Binding") -> Any:
    if value is None or tp is Any:
        return value
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(tp) if a is not type(None)]
        return _convert(args[0], value, ctx) if len(args) == 1 else value
    if origin in (list, List):
        (item,) = get_args(tp)
        return [_convert(item, v, ctx) for v in value] if isinstance(value, list) else value
    if tp is datetime:
        return _datetime(value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return build(tp, value, ctx) if isinstance(value, Mapping) else value
    return value


class _Binding:
    """Which classes stand for the model classes (the async twins) and the client they are bound to."""

    def __init__(self, client: Any = None, replace: Optional[Mapping[type, type]] = None) -> None:
        self.client = client
        self.replace = dict(replace or {})


def build(cls: type[T], data: Mapping[str, Any], ctx: Optional[_Binding] = None) -> T:
    """A model from its JSON object: camelCase keys to snake_case fields, unknown keys ignored."""
    ctx = ctx or _Binding()
    target: Any = ctx.replace.get(cls, cls)
    by_name = {snake_case(k): v for k, v in data.items()}
    kwargs = {name: _convert(tp, by_name.get(name), ctx) for name, tp in model_fields(target).items()}
    obj = target(**kwargs)
    if "_client" in {f.name for f in dataclasses.fields(target)}:
        obj._client = ctx.client
    return obj  # type: ignore[no-any-return]
