"""The synchronous client: `AgentTaskService` and one resource class per API resource."""

from __future__ import annotations

import os
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Type, TypeVar, Union, overload

import httpx

from ._base import (
    DEFAULT_AGENT,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    KEY_HEADER,
    FileInput,
    RunRef,
    Timeout,
    api_path,
    base_headers,
    browser_body,
    compact,
    download_source,
    download_target,
    is_retryable_status,
    make_timeout,
    new_idempotency_key,
    read_upload,
    read_uploads,
    resolve_api_key,
    resolve_base_url,
    retry_after_seconds,
    retry_delay,
    run_ref,
    sse_event,
    status_error,
    transport_error,
)
from ._errors import APIConnectionError, WaitTimeoutError
from ._models import (
    TERMINAL_EVENTS,
    Agent,
    ApiKey,
    ApiKeyCreated,
    ApiKeyList,
    Webhook,
    WebhookDelivery,
    WebhookDeliveryList,
    WebhookList,
    WebhookWithSecret,
    AgentList,
    ModelList,
    AsyncFile,
    Browser,
    BrowserList,
    BrowserOptions,
    Download,
    DownloadList,
    Event,
    EventList,
    File,
    FileList,
    FileUpload,
    FileUploadList,
    Health,
    LiveViewLink,
    Profile,
    ProfileList,
    Recording,
    Run,
    RunCreated,
    RunList,
    RunStatus,
    Session,
    SessionList,
    Step,
    StepList,
    UploadedFile,
    Workspace,
    WorkspaceFileList,
    WorkspaceList,
    _Binding,
    build,
)
from ._paging import Pager, next_after, next_cursor
from ._sse import SSEDecoder

M = TypeVar("M")

#: Files added per call of the add-files route (its limit).
_ADD_FILES_BATCH = 20


class AgentTaskService:
    """The Agent Task Service's client; `api_key` and `base_url` default to ATS_API_KEY and ATS_BASE_URL."""

    agents: "Agents"
    models: "Models"
    runs: "Runs"
    sessions: "Sessions"
    files: "Files"
    workspaces: "Workspaces"
    browsers: "Browsers"
    profiles: "Profiles"
    api_keys: "ApiKeys"
    webhooks: "Webhooks"

    def __init__(
        self,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: Timeout = DEFAULT_TIMEOUT,
        http_client: Optional[httpx.Client] = None,
    ) -> None:
        self._api_key = resolve_api_key(api_key)
        self.base_url = resolve_base_url(base_url)
        self.max_retries = max_retries
        self.timeout = make_timeout(timeout)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client(timeout=self.timeout)
        self._binding = _Binding(self)
        self.agents = Agents(self)
        self.models = Models(self)
        self.runs = Runs(self)
        self.sessions = Sessions(self)
        self.files = Files(self)
        self.workspaces = Workspaces(self)
        self.browsers = Browsers(self)
        self.profiles = Profiles(self)
        self.api_keys = ApiKeys(self)
        self.webhooks = Webhooks(self)

    def __repr__(self) -> str:
        return f"AgentTaskService(base_url={self.base_url!r})"

    def close(self) -> None:
        """Closes the connections (only those of an HTTP client the SDK made itself)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> "AgentTaskService":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self) -> Health:
        """Each downstream service's health (`GET /healthz`, no key needed)."""
        response = self._send("GET", "/healthz", retry=True, ok_statuses=(503,))
        return build(Health, response.json())

    # ---------- transport ----------

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Mapping[str, Any]] = None,
        json: Any = None,
        retry: Optional[bool] = None,
        ok_statuses: Sequence[int] = (),
        idempotency_key: Optional[str] = None,
    ) -> httpx.Response:
        """One API call with the key; idempotent calls are retried on connection errors, 502, 503 and 504.

        Every POST carries an `Idempotency-Key` (the caller's, else a new one), the same on each
        attempt: the API answers a repeat of the key with the first response, so a POST whose answer
        was lost is retried without being done twice."""
        retry = method in ("GET", "DELETE") if retry is None else retry
        headers = {**base_headers(), KEY_HEADER: self._api_key}
        if method == "POST" and idempotency_key is None:
            idempotency_key = new_idempotency_key()
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
            retry = True
        attempt = 0
        while True:
            try:
                response = self._http.request(method, self.base_url + path, params=params, json=json, headers=headers, timeout=self.timeout)
            except httpx.TransportError as exc:
                if retry and attempt < self.max_retries:
                    time.sleep(retry_delay(attempt))
                    attempt += 1
                    continue
                raise transport_error(exc, method, path) from exc
            if response.status_code < 400 or response.status_code in ok_statuses:
                return response
            if retry and is_retryable_status(response.status_code) and attempt < self.max_retries:
                time.sleep(retry_delay(attempt, retry_after_seconds(response)))
                attempt += 1
                continue
            raise status_error(response, method, path)

    def _call(self, model: Type[M], method: str, path: str, **kwargs: Any) -> M:
        return build(model, self._send(method, path, **kwargs).json(), self._binding)

    def _presigned(self, method: str, url: str, content: Optional[bytes] = None) -> httpx.Response:
        """A PUT or GET of a presigned link: no key (the link is the credential), retried like any idempotent call."""
        what = "upload link" if method == "PUT" else "download link"
        headers = {"User-Agent": base_headers()["User-Agent"]}
        if content is not None:
            headers["Content-Type"] = "application/octet-stream"
        attempt = 0
        while True:
            try:
                response = self._http.request(method, url, content=content, headers=headers, timeout=self.timeout)
            except httpx.TransportError as exc:
                if attempt < self.max_retries:
                    time.sleep(retry_delay(attempt))
                    attempt += 1
                    continue
                raise transport_error(exc, method, what) from exc
            if response.status_code < 400:
                return response
            if is_retryable_status(response.status_code) and attempt < self.max_retries:
                time.sleep(retry_delay(attempt, retry_after_seconds(response)))
                attempt += 1
                continue
            raise status_error(response, method, what)


class _Resource:
    def __init__(self, client: AgentTaskService) -> None:
        self._client = client


class Agents(_Resource):
    """The agent registry."""

    def list(self) -> List[Agent]:
        """The agents and the watch verb (steps or events) each uses."""
        return self._client._call(AgentList, "GET", api_path("agents")).agents


class Models(_Resource):
    """The models a run may name."""

    def list(self) -> ModelList:
        """The models on offer (builtin first), the default of a run that names none, and which other names a run may give."""
        return self._client._call(ModelList, "GET", api_path("models"))


class Runs(_Resource):
    """Runs: one task in plain language each."""

    def create(
        self,
        task: str,
        *,
        agent: str = DEFAULT_AGENT,
        model: Optional[str] = None,
        browser: Union[BrowserOptions, Mapping[str, Any], None] = None,
        session_id: Optional[str] = None,
        attached_file_ids: Optional[Sequence[str]] = None,
        workspace_id: Optional[str] = None,
        files: Optional[Sequence[FileInput]] = None,
        idempotency_key: Optional[str] = None,
    ) -> RunCreated:
        """Starts a run (it goes on in the background); `files` are uploaded and attached first.

        The SDK retries it after a connection error, a timeout or a 503 with one `Idempotency-Key`,
        so the API makes one run however often it is sent; pass `idempotency_key` (e.g. a UUID kept
        with your order) to make your own retries of the create safe too."""
        ids = list(attached_file_ids or [])
        if files:
            ids += [f.id for f in self._client.files._upload_many(read_uploads(files), agent=agent)]
        body = compact(
            task=task,
            model=model,
            browser=browser_body(browser),
            session_id=session_id,
            attached_file_ids=ids if files or attached_file_ids is not None else None,
            workspace_id=workspace_id,
        )
        return self._client._call(RunCreated, "POST", api_path("agents", agent, "runs"), json=body, idempotency_key=idempotency_key)

    def get(self, run: RunRef, *, agent: Optional[str] = None) -> Run:
        """The full run object."""
        run_id, agent = run_ref(run, agent)
        return self._client._call(Run, "GET", api_path("agents", agent, "runs", run_id))

    def status(self, run: RunRef, *, agent: Optional[str] = None) -> RunStatus:
        """The cheap poll: status, result, output and cost."""
        run_id, agent = run_ref(run, agent)
        return self._client._call(RunStatus, "GET", api_path("agents", agent, "runs", run_id, "status"))

    def stop(self, run: RunRef, *, agent: Optional[str] = None) -> Run:
        """Stops a queued or running run (ConflictError when it already ended)."""
        run_id, agent = run_ref(run, agent)
        # Stopping twice ends in the same state, so a retry after a lost answer is safe.
        return self._client._call(Run, "POST", api_path("agents", agent, "runs", run_id, "stop"), retry=True)

    def list(
        self,
        *,
        agent: str = DEFAULT_AGENT,
        session_id: Optional[str] = None,
        status: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Pager[Run, RunList]:
        """The project's runs of an agent, newest first, fetched `limit` per page."""

        def fetch(cursor: Optional[str]) -> RunList:
            params = compact(session_id=session_id, status=status, limit=limit, cursor=cursor)
            return self._client._call(RunList, "GET", api_path("agents", agent, "runs"), params=params)

        return Pager(fetch, lambda p: p.items, next_cursor)

    def steps(self, run: RunRef, *, agent: Optional[str] = None, after: Optional[int] = None, limit: Optional[int] = None) -> Pager[Step, StepList]:
        """A run's browser steps after step number `after`."""
        run_id, agent = run_ref(run, agent)

        def fetch(cursor: Optional[int]) -> StepList:
            params = compact(after=cursor if cursor is not None else after, limit=limit)
            return self._client._call(StepList, "GET", api_path("agents", agent, "runs", run_id, "steps"), params=params)

        return Pager(fetch, lambda p: p.steps, next_after)

    def events(self, run: RunRef, *, agent: Optional[str] = None, after: Optional[int] = None, limit: Optional[int] = None) -> Pager[Event, EventList]:
        """A run's events after event id `after` (what has happened so far)."""
        run_id, agent = run_ref(run, agent)

        def fetch(cursor: Optional[int]) -> EventList:
            params = compact(after=cursor if cursor is not None else after, limit=limit)
            return self._client._call(EventList, "GET", api_path("agents", agent, "runs", run_id, "events"), params=params)

        return Pager(fetch, lambda p: p.events, next_after)

    def stream(self, run: RunRef, *, agent: Optional[str] = None, after: Optional[int] = None) -> Iterator[Event]:
        """A run's events as they happen (SSE), resuming after a dropped connection; ends after the terminal event."""
        run_id, agent = run_ref(run, agent)
        path = api_path("agents", agent, "runs", run_id, "events", "stream")
        client = self._client
        last = after
        attempt = 0
        while True:
            headers = {**base_headers(), KEY_HEADER: client._api_key, "Accept": "text/event-stream", "Cache-Control": "no-cache"}
            params: Dict[str, Any] = {}
            if last is not None and last == after:
                params["after"] = last
            elif last is not None:
                headers["Last-Event-ID"] = str(last)  # how SSE resumes: the server sends what came after it
            failure: Optional[httpx.TransportError] = None
            progressed = False
            try:
                request = client._http.build_request("GET", client.base_url + path, params=params, headers=headers, timeout=client.timeout)
                response = client._http.send(request, stream=True)
                with closing(response):
                    if response.status_code >= 400:
                        response.read()
                        if not (is_retryable_status(response.status_code) and attempt < client.max_retries):
                            raise status_error(response, "GET", path)
                        time.sleep(retry_delay(attempt, retry_after_seconds(response)))
                        attempt += 1
                        continue
                    decoder = SSEDecoder()
                    for chunk in response.iter_bytes():
                        for sse in decoder.feed(chunk):
                            event = sse_event(sse.data, sse.id, client._binding)
                            if event is None:
                                continue
                            last, progressed, attempt = event.id, True, 0
                            yield event
                            if event.type in TERMINAL_EVENTS:
                                return
            except httpx.TransportError as exc:
                failure = exc
            # The stream broke or ended before the terminal event: connect again after the last event seen,
            # at once when this connection brought events, else as one more failure in a row.
            if progressed:
                continue
            if attempt >= client.max_retries:
                if failure is not None:
                    raise transport_error(failure, "GET", path) from failure
                raise APIConnectionError("The event stream ended before the run's terminal event", method="GET", path=path)
            time.sleep(retry_delay(attempt))
            attempt += 1

    def wait(self, run: RunRef, *, agent: Optional[str] = None, timeout: Optional[float] = 1800.0, poll_interval: float = 2.0) -> Run:
        """Polls the run's status, more slowly as it goes on (up to `poll_interval` s apart), until it ends; returns the final run."""
        run_id, agent = run_ref(run, agent)
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = min(0.25, poll_interval)
        while True:
            status = self.status(run_id, agent=agent)
            if status.ended:
                return self.get(run_id, agent=agent)
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeoutError(run_id, timeout or 0.0, status.status)
                time.sleep(min(delay, remaining))
            else:
                time.sleep(delay)
            delay = min(delay * 2, poll_interval)

    def files(self, run: RunRef, *, agent: Optional[str] = None, kind: Optional[str] = None, limit: Optional[int] = None) -> List[File]:
        """A run's files: `input` (attached), `output` (written by the agent), or both; each can `download()`. Every page of them (`limit`: files per request)."""
        run_id, agent = run_ref(run, agent)

        def fetch(cursor: Optional[str]) -> FileList:
            params = compact(kind=kind, limit=limit, cursor=cursor)
            return self._client._call(FileList, "GET", api_path("agents", agent, "runs", run_id, "files"), params=params)

        return list(Pager(fetch, lambda p: p.items, next_cursor))


class Sessions(_Resource):
    """Sessions (conversations); the first run creates one."""

    def list(self, *, agent: str = DEFAULT_AGENT, limit: Optional[int] = None) -> Pager[Session, SessionList]:
        """The project's sessions of an agent."""

        def fetch(cursor: Optional[str]) -> SessionList:
            return self._client._call(SessionList, "GET", api_path("agents", agent, "sessions"), params=compact(limit=limit, cursor=cursor))

        return Pager(fetch, lambda p: p.items, next_cursor)

    def get(self, session_id: str, *, agent: str = DEFAULT_AGENT) -> Session:
        """A session."""
        return self._client._call(Session, "GET", api_path("agents", agent, "sessions", session_id))


class Files(_Resource):
    """Files: the presigned add flow, and downloads."""

    def create(self, names: Sequence[str], *, agent: str = DEFAULT_AGENT) -> List[FileUpload]:
        """Adds files by name (the raw add): each comes with a presigned `upload_url` for its bytes."""
        if isinstance(names, str):
            raise TypeError("names takes a list of file names")
        body = {"files": [{"name": n} for n in names]}
        return self._client._call(FileUploadList, "POST", api_path("agents", agent, "files"), json=body).items

    def upload(self, file: FileInput, *, name: Optional[str] = None, agent: str = DEFAULT_AGENT) -> UploadedFile:
        """Adds a file and PUTs its bytes; attach the returned id to a run (`attached_file_ids`)."""
        (uploaded,) = self._upload_many([read_upload(file, name)], agent=agent)
        return uploaded

    def _upload_many(self, files: Sequence[tuple[str, bytes]], *, agent: str) -> List[UploadedFile]:
        out: List[UploadedFile] = []
        for i in range(0, len(files), _ADD_FILES_BATCH):
            batch = files[i : i + _ADD_FILES_BATCH]
            items = self.create([n for n, _ in batch], agent=agent)
            for item, (_, data) in zip(items, batch):
                self._client._presigned("PUT", item.upload_url, data)
                out.append(UploadedFile(id=item.id, name=item.name))
        return out

    @overload
    def download(self, file: Union[File, AsyncFile, Download, str], *, to: None = None) -> bytes: ...
    @overload
    def download(self, file: Union[File, AsyncFile, Download, str], *, to: Union[str, "os.PathLike[str]"]) -> Path: ...

    def download(self, file: Union[File, AsyncFile, Download, str], *, to: Union[str, "os.PathLike[str]", None] = None) -> Union[bytes, Path]:
        """The bytes behind a File, a Download or a download URL; with `to` (a file or a folder), the path written."""
        url, name = download_source(file)
        data = self._client._presigned("GET", url).content
        if to is None:
            return data
        target = download_target(to, name)
        target.write_bytes(data)
        return target


class Workspaces(_Resource):
    """Workspaces (advanced, browsercode): named disks shared across conversations."""

    def create(self, name: str) -> Workspace:
        """Creates a workspace."""
        return self._client._call(Workspace, "POST", api_path("agent-workspaces"), json={"name": name})

    def list(self, *, limit: Optional[int] = None) -> Pager[Workspace, WorkspaceList]:
        """The project's workspaces."""

        def fetch(cursor: Optional[str]) -> WorkspaceList:
            return self._client._call(WorkspaceList, "GET", api_path("agent-workspaces"), params=compact(limit=limit, cursor=cursor))

        return Pager(fetch, lambda p: p.items, next_cursor)

    def get(self, workspace_id: str) -> Workspace:
        """A workspace."""
        return self._client._call(Workspace, "GET", api_path("agent-workspaces", workspace_id))

    def update(self, workspace_id: str, *, name: str) -> Workspace:
        """Renames a workspace."""
        # Setting a name twice gives the same workspace, so a retry after a lost answer is safe.
        return self._client._call(Workspace, "PATCH", api_path("agent-workspaces", workspace_id), json={"name": name}, retry=True)

    def delete(self, workspace_id: str) -> None:
        """Deletes a workspace and its disk."""
        self._client._send("DELETE", api_path("agent-workspaces", workspace_id))

    def add_files(self, workspace_id: str, names: Sequence[str]) -> List[FileUpload]:
        """Adds files to the workspace by name (the raw add): each comes with a presigned `upload_url`."""
        if isinstance(names, str):
            raise TypeError("names takes a list of file names")
        body = {"files": [{"name": n} for n in names]}
        return (self._client._call(FileUploadList, "POST", api_path("agent-workspaces", workspace_id, "files"), json=body)).items

    def upload(self, workspace_id: str, file: FileInput, *, name: Optional[str] = None) -> UploadedFile:
        """Puts a file on the workspace's disk (presigned add flow)."""
        fname, data = read_upload(file, name)
        (item,) = self.add_files(workspace_id, [fname])
        self._client._presigned("PUT", item.upload_url, data)
        return UploadedFile(id=item.id, name=item.name)

    def files(self, workspace_id: str, *, limit: Optional[int] = None) -> Pager[File, WorkspaceFileList]:
        """The workspace's files, each able to `download()`."""

        def fetch(cursor: Optional[str]) -> WorkspaceFileList:
            params = compact(limit=limit, cursor=cursor)
            return self._client._call(WorkspaceFileList, "GET", api_path("agent-workspaces", workspace_id, "files"), params=params)

        return Pager(fetch, lambda p: p.items, next_cursor)


class Browsers(_Resource):
    """Browsers: standalone ones to drive over CDP, and those runs provision."""

    def create(
        self,
        *,
        profile_id: Optional[str] = None,
        proxy_country_code: Optional[str] = None,
        screen_width: Optional[int] = None,
        screen_height: Optional[int] = None,
        timeout_minutes: Optional[int] = None,
        stealth: Optional[bool] = None,
        locale: Optional[str] = None,
        timezone: Optional[str] = None,
        allowed_domains: Optional[List[str]] = None,
        block_ads: Optional[bool] = None,
    ) -> Browser:
        """Starts a standalone browser; as a context manager (`with … as browser`) it is stopped on exit."""
        body = compact(
            browser_profile_id=profile_id,
            proxy_country_code=proxy_country_code,
            screen_width=screen_width,
            screen_height=screen_height,
            timeout_minutes=timeout_minutes,
            stealth=stealth,
            locale=locale,
            timezone=timezone,
            allowed_domains=allowed_domains,
            block_ads=block_ads,
        )
        return self._client._call(Browser, "POST", api_path("browsers"), json=body)

    def list(self, *, status: Optional[str] = None, session_id: Optional[str] = None, limit: Optional[int] = None) -> Pager[Browser, BrowserList]:
        """The project's browsers (`status`: active or stopped)."""

        def fetch(cursor: Optional[str]) -> BrowserList:
            params = compact(status=status, session_id=session_id, limit=limit, cursor=cursor)
            return self._client._call(BrowserList, "GET", api_path("browsers"), params=params)

        return Pager(fetch, lambda p: p.items, next_cursor)

    def get(self, browser_id: str) -> Browser:
        """A browser record (with a fresh `recording_url` once its recording is ready)."""
        return self._client._call(Browser, "GET", api_path("browsers", browser_id))

    def stop(self, browser_id: str) -> Browser:
        """Stops a browser (idempotent); saves its profile, closes a browser-agent session."""
        return self._client._call(Browser, "POST", api_path("browsers", browser_id, "stop"), retry=True)

    def recording(self, browser_id: str) -> Recording:
        """A fresh presigned link to the MP4 recording (ConflictError while it is being finished)."""
        return self._client._call(Recording, "GET", api_path("browsers", browser_id, "recording"))

    def live_view_link(self, browser_id: str, *, mode: str = "view", expires_in_seconds: Optional[int] = None) -> LiveViewLink:
        """A live view link of an active browser: `view` (watch only) or `interactive`."""
        body = compact(mode=mode, expires_in_seconds=expires_in_seconds)
        # A link is signed, not stored: minting another after a lost answer is harmless.
        return self._client._call(LiveViewLink, "POST", api_path("browsers", browser_id, "live-view-links"), json=body, retry=True)

    def downloads(self, browser_id: str) -> List[Download]:
        """Files the browser downloaded from the web."""
        return self._client._call(DownloadList, "GET", api_path("browsers", browser_id, "downloads")).items


class Profiles(_Resource):
    """Browser profiles: saved cookies, localStorage and logins."""

    def create(self, name: str, *, user_id: Optional[str] = None) -> Profile:
        """Creates a profile."""
        return self._client._call(Profile, "POST", api_path("browser-profiles"), json=compact(name=name, user_id=user_id))

    def list(self, *, limit: Optional[int] = None) -> Pager[Profile, ProfileList]:
        """The project's profiles."""

        def fetch(cursor: Optional[str]) -> ProfileList:
            return self._client._call(ProfileList, "GET", api_path("browser-profiles"), params=compact(limit=limit, cursor=cursor))

        return Pager(fetch, lambda p: p.items, next_cursor)

    def get(self, profile_id: str) -> Profile:
        """A profile."""
        return self._client._call(Profile, "GET", api_path("browser-profiles", profile_id))

    def update(self, profile_id: str, *, name: str) -> Profile:
        """Renames a profile."""
        # Setting a name twice gives the same profile, so a retry after a lost answer is safe.
        return self._client._call(Profile, "PATCH", api_path("browser-profiles", profile_id), json={"name": name}, retry=True)

    def delete(self, profile_id: str) -> None:
        """Deletes a profile (idempotent)."""
        self._client._send("DELETE", api_path("browser-profiles", profile_id))


class ApiKeys(_Resource):
    """The project's API keys (`npm run keys` on the server does the same)."""

    def create(self, name: str, *, scope: Optional[str] = None) -> ApiKeyCreated:
        """Issues a key; `scope` "full" (default) or "read" (GET only). The key is in this reply only."""
        return self._client._call(ApiKeyCreated, "POST", api_path("api-keys"), json=compact(name=name, scope=scope))

    def list(self) -> List[ApiKey]:
        """The keys that are not revoked: name, prefix, scope, created and last used (never the keys themselves)."""
        return (self._client._call(ApiKeyList, "GET", api_path("api-keys"))).items

    def revoke(self, api_key_id: str) -> None:
        """Revokes a key: it fails from the next request on."""
        self._client._send("DELETE", api_path("api-keys", api_key_id))


class Webhooks(_Resource):
    """Endpoints that receive the project's events, signed with their secret (Standard Webhooks)."""

    def create(self, url: str, *, event_types: Optional[List[str]] = None, description: Optional[str] = None, enabled: Optional[bool] = None) -> WebhookWithSecret:
        """Registers an endpoint for `event_types` (none: every type). Its `secret` is in this reply only."""
        body = compact(url=url, event_types=event_types, description=description, enabled=enabled)
        return self._client._call(WebhookWithSecret, "POST", api_path("webhooks"), json=body)

    def list(self, *, limit: Optional[int] = None) -> Pager[Webhook, WebhookList]:
        """The project's webhooks, newest first."""

        def fetch(cursor: Optional[str]) -> WebhookList:
            return self._client._call(WebhookList, "GET", api_path("webhooks"), params=compact(limit=limit, cursor=cursor))

        return Pager(fetch, lambda p: p.items, next_cursor)

    def get(self, webhook_id: str) -> Webhook:
        """A webhook (never its secret)."""
        return self._client._call(Webhook, "GET", api_path("webhooks", webhook_id))

    def update(
        self, webhook_id: str, *, url: Optional[str] = None, event_types: Optional[List[str]] = None, description: Optional[str] = None, enabled: Optional[bool] = None
    ) -> Webhook:
        """Changes what is given; `enabled=True` re-enables a webhook the service disabled."""
        # Setting the same values twice gives the same webhook, so a retry after a lost answer is safe.
        body = compact(url=url, event_types=event_types, description=description, enabled=enabled)
        return self._client._call(Webhook, "PATCH", api_path("webhooks", webhook_id), json=body, retry=True)

    def delete(self, webhook_id: str) -> None:
        """Deletes a webhook and its pending deliveries (idempotent)."""
        self._client._send("DELETE", api_path("webhooks", webhook_id))

    def rotate_secret(self, webhook_id: str, *, overlap_seconds: Optional[int] = None) -> WebhookWithSecret:
        """A new secret (in this reply only); the previous one still signs for `overlap_seconds` (default a day)."""
        body = compact(overlap_seconds=overlap_seconds)
        return self._client._call(WebhookWithSecret, "POST", api_path("webhooks", webhook_id, "rotate-secret"), json=body)

    def deliveries(self, webhook_id: str, *, limit: Optional[int] = None) -> Pager[WebhookDelivery, WebhookDeliveryList]:
        """A webhook's deliveries, newest first: status, attempts, last status code, latency, error, next retry."""

        def fetch(cursor: Optional[str]) -> WebhookDeliveryList:
            path = api_path("webhooks", webhook_id, "deliveries")
            return self._client._call(WebhookDeliveryList, "GET", path, params=compact(limit=limit, cursor=cursor))

        return Pager(fetch, lambda p: p.items, next_cursor)

    def redeliver(self, webhook_id: str, delivery_id: str) -> WebhookDelivery:
        """Sends a delivery's event again: a new delivery of the same event id."""
        return self._client._call(WebhookDelivery, "POST", api_path("webhooks", webhook_id, "deliveries", delivery_id, "redeliver"))

    def test(self, webhook_id: str) -> WebhookDelivery:
        """Sends a webhook.test event to the endpoint; its delivery is in `deliveries(webhook_id)`."""
        return self._client._call(WebhookDelivery, "POST", api_path("webhooks", webhook_id, "test"))
