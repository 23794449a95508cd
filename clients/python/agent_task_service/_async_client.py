"""The asynchronous client: `AsyncAgentTaskService`, the twin of `AgentTaskService` for asyncio."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, AsyncIterator, Coroutine, Dict, Generator, List, Mapping, Optional, Sequence, Type, TypeVar, Union, overload, cast

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
    AsyncBrowser,
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
from ._paging import AsyncPager, next_after, next_cursor
from ._sse import SSEDecoder

M = TypeVar("M")

#: AsyncFiles added per call of the add-files route (its limit).
_ADD_FILES_BATCH = 20


class AsyncAgentTaskService:
    """The Agent Task Service's client; `api_key` and `base_url` default to ATS_API_KEY and ATS_BASE_URL."""

    agents: "AsyncAgents"
    models: "AsyncModels"
    runs: "AsyncRuns"
    sessions: "AsyncSessions"
    files: "AsyncFiles"
    workspaces: "AsyncWorkspaces"
    browsers: "AsyncBrowsers"
    profiles: "AsyncProfiles"
    api_keys: "AsyncApiKeys"
    webhooks: "AsyncWebhooks"

    def __init__(
        self,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        *,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: Timeout = DEFAULT_TIMEOUT,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        self._api_key = resolve_api_key(api_key)
        self.base_url = resolve_base_url(base_url)
        self.max_retries = max_retries
        self.timeout = make_timeout(timeout)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient(timeout=self.timeout)
        self._binding = _Binding(self, {File: AsyncFile, Browser: AsyncBrowser})
        self.agents = AsyncAgents(self)
        self.models = AsyncModels(self)
        self.runs = AsyncRuns(self)
        self.sessions = AsyncSessions(self)
        self.files = AsyncFiles(self)
        self.workspaces = AsyncWorkspaces(self)
        self.browsers = AsyncBrowsers(self)
        self.profiles = AsyncProfiles(self)
        self.api_keys = AsyncApiKeys(self)
        self.webhooks = AsyncWebhooks(self)

    def __repr__(self) -> str:
        return f"AsyncAgentTaskService(base_url={self.base_url!r})"

    async def close(self) -> None:
        """Closes the connections (only those of an HTTP client the SDK made itself)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncAgentTaskService":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def health(self) -> Health:
        """Each downstream service's health (`GET /healthz`, no key needed)."""
        response = await self._send("GET", "/healthz", retry=True, ok_statuses=(503,))
        return build(Health, response.json())

    # ---------- transport ----------

    async def _send(
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
                response = await self._http.request(method, self.base_url + path, params=params, json=json, headers=headers, timeout=self.timeout)
            except httpx.TransportError as exc:
                if retry and attempt < self.max_retries:
                    await asyncio.sleep(retry_delay(attempt))
                    attempt += 1
                    continue
                raise transport_error(exc, method, path) from exc
            if response.status_code < 400 or response.status_code in ok_statuses:
                return response
            if retry and is_retryable_status(response.status_code) and attempt < self.max_retries:
                await asyncio.sleep(retry_delay(attempt, retry_after_seconds(response)))
                attempt += 1
                continue
            raise status_error(response, method, path)

    async def _call(self, model: Type[M], method: str, path: str, **kwargs: Any) -> M:
        return build(model, (await self._send(method, path, **kwargs)).json(), self._binding)

    async def _presigned(self, method: str, url: str, content: Optional[bytes] = None) -> httpx.Response:
        """A PUT or GET of a presigned link: no key (the link is the credential), retried like any idempotent call."""
        what = "upload link" if method == "PUT" else "download link"
        headers = {"User-Agent": base_headers()["User-Agent"]}
        if content is not None:
            headers["Content-Type"] = "application/octet-stream"
        attempt = 0
        while True:
            try:
                response = await self._http.request(method, url, content=content, headers=headers, timeout=self.timeout)
            except httpx.TransportError as exc:
                if attempt < self.max_retries:
                    await asyncio.sleep(retry_delay(attempt))
                    attempt += 1
                    continue
                raise transport_error(exc, method, what) from exc
            if response.status_code < 400:
                return response
            if is_retryable_status(response.status_code) and attempt < self.max_retries:
                await asyncio.sleep(retry_delay(attempt, retry_after_seconds(response)))
                attempt += 1
                continue
            raise status_error(response, method, what)


class _AsyncResource:
    def __init__(self, client: AsyncAgentTaskService) -> None:
        self._client = client


class AsyncAgents(_AsyncResource):
    """The agent registry."""

    async def list(self) -> List[Agent]:
        """The agents and the watch verb (steps or events) each uses."""
        return (await self._client._call(AgentList, "GET", api_path("agents"))).agents


class AsyncModels(_AsyncResource):
    """The models a run may name."""

    async def list(self) -> ModelList:
        """The models on offer (builtin first), the default of a run that names none, and which other names a run may give."""
        return await self._client._call(ModelList, "GET", api_path("models"))


class AsyncRuns(_AsyncResource):
    """AsyncRuns: one task in plain language each."""

    async def create(
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
            ids += [f.id for f in await self._client.files._upload_many(read_uploads(files), agent=agent)]
        body = compact(
            task=task,
            model=model,
            browser=browser_body(browser),
            session_id=session_id,
            attached_file_ids=ids if files or attached_file_ids is not None else None,
            workspace_id=workspace_id,
        )
        return await self._client._call(RunCreated, "POST", api_path("agents", agent, "runs"), json=body, idempotency_key=idempotency_key)

    async def get(self, run: RunRef, *, agent: Optional[str] = None) -> Run:
        """The full run object."""
        run_id, agent = run_ref(run, agent)
        return await self._client._call(Run, "GET", api_path("agents", agent, "runs", run_id))

    async def status(self, run: RunRef, *, agent: Optional[str] = None) -> RunStatus:
        """The cheap poll: status, result, output and cost."""
        run_id, agent = run_ref(run, agent)
        return await self._client._call(RunStatus, "GET", api_path("agents", agent, "runs", run_id, "status"))

    async def stop(self, run: RunRef, *, agent: Optional[str] = None) -> Run:
        """Stops a queued or running run (ConflictError when it already ended)."""
        run_id, agent = run_ref(run, agent)
        # Stopping twice ends in the same state, so a retry after a lost answer is safe.
        return await self._client._call(Run, "POST", api_path("agents", agent, "runs", run_id, "stop"), retry=True)

    def list(
        self,
        *,
        agent: str = DEFAULT_AGENT,
        session_id: Optional[str] = None,
        status: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> AsyncPager[Run, RunList]:
        """The project's runs of an agent, newest first, fetched `limit` per page."""

        async def fetch(cursor: Optional[str]) -> RunList:
            params = compact(session_id=session_id, status=status, limit=limit, cursor=cursor)
            return await self._client._call(RunList, "GET", api_path("agents", agent, "runs"), params=params)

        return AsyncPager(fetch, lambda p: p.items, next_cursor)

    def steps(self, run: RunRef, *, agent: Optional[str] = None, after: Optional[int] = None, limit: Optional[int] = None) -> AsyncPager[Step, StepList]:
        """A run's browser steps after step number `after`."""
        run_id, agent = run_ref(run, agent)

        async def fetch(cursor: Optional[int]) -> StepList:
            params = compact(after=cursor if cursor is not None else after, limit=limit)
            return await self._client._call(StepList, "GET", api_path("agents", agent, "runs", run_id, "steps"), params=params)

        return AsyncPager(fetch, lambda p: p.steps, next_after)

    def events(self, run: RunRef, *, agent: Optional[str] = None, after: Optional[int] = None, limit: Optional[int] = None) -> AsyncPager[Event, EventList]:
        """A run's events after event id `after` (what has happened so far)."""
        run_id, agent = run_ref(run, agent)

        async def fetch(cursor: Optional[int]) -> EventList:
            params = compact(after=cursor if cursor is not None else after, limit=limit)
            return await self._client._call(EventList, "GET", api_path("agents", agent, "runs", run_id, "events"), params=params)

        return AsyncPager(fetch, lambda p: p.events, next_after)

    async def stream(self, run: RunRef, *, agent: Optional[str] = None, after: Optional[int] = None) -> AsyncIterator[Event]:
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
                response = await client._http.send(request, stream=True)
                async with _closing(response):
                    if response.status_code >= 400:
                        await response.aread()
                        if not (is_retryable_status(response.status_code) and attempt < client.max_retries):
                            raise status_error(response, "GET", path)
                        await asyncio.sleep(retry_delay(attempt, retry_after_seconds(response)))
                        attempt += 1
                        continue
                    decoder = SSEDecoder()
                    async for chunk in response.aiter_bytes():
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
            await asyncio.sleep(retry_delay(attempt))
            attempt += 1

    async def wait(self, run: RunRef, *, agent: Optional[str] = None, timeout: Optional[float] = 1800.0, poll_interval: float = 2.0) -> Run:
        """Polls the run's status, more slowly as it goes on (up to `poll_interval` s apart), until it ends; returns the final run."""
        run_id, agent = run_ref(run, agent)
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = min(0.25, poll_interval)
        while True:
            status = await self.status(run_id, agent=agent)
            if status.ended:
                return await self.get(run_id, agent=agent)
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeoutError(run_id, timeout or 0.0, status.status)
                await asyncio.sleep(min(delay, remaining))
            else:
                await asyncio.sleep(delay)
            delay = min(delay * 2, poll_interval)

    async def files(self, run: RunRef, *, agent: Optional[str] = None, kind: Optional[str] = None, limit: Optional[int] = None) -> List[AsyncFile]:
        """A run's files: `input` (attached), `output` (written by the agent), or both; each can `download()`. Every page of them (`limit`: files per request)."""
        run_id, agent = run_ref(run, agent)
        out: List[AsyncFile] = []
        cursor: Optional[str] = None
        while True:
            page = await self._client._call(FileList, "GET", api_path("agents", agent, "runs", run_id, "files"), params=compact(kind=kind, limit=limit, cursor=cursor))
            out.extend(cast(List[AsyncFile], page.items))
            cursor = next_cursor(page)
            if cursor is None:
                return out


class AsyncSessions(_AsyncResource):
    """AsyncSessions (conversations); the first run creates one."""

    def list(self, *, agent: str = DEFAULT_AGENT, limit: Optional[int] = None) -> AsyncPager[Session, SessionList]:
        """The project's sessions of an agent."""

        async def fetch(cursor: Optional[str]) -> SessionList:
            return await self._client._call(SessionList, "GET", api_path("agents", agent, "sessions"), params=compact(limit=limit, cursor=cursor))

        return AsyncPager(fetch, lambda p: p.items, next_cursor)

    async def get(self, session_id: str, *, agent: str = DEFAULT_AGENT) -> Session:
        """A session."""
        return await self._client._call(Session, "GET", api_path("agents", agent, "sessions", session_id))


class AsyncFiles(_AsyncResource):
    """AsyncFiles: the presigned add flow, and downloads."""

    async def create(self, names: Sequence[str], *, agent: str = DEFAULT_AGENT) -> List[FileUpload]:
        """Adds files by name (the raw add): each comes with a presigned `upload_url` for its bytes."""
        if isinstance(names, str):
            raise TypeError("names takes a list of file names")
        body = {"files": [{"name": n} for n in names]}
        return (await self._client._call(FileUploadList, "POST", api_path("agents", agent, "files"), json=body)).items

    async def upload(self, file: FileInput, *, name: Optional[str] = None, agent: str = DEFAULT_AGENT) -> UploadedFile:
        """Adds a file and PUTs its bytes; attach the returned id to a run (`attached_file_ids`)."""
        (uploaded,) = await self._upload_many([read_upload(file, name)], agent=agent)
        return uploaded

    async def _upload_many(self, files: Sequence[tuple[str, bytes]], *, agent: str) -> List[UploadedFile]:
        out: List[UploadedFile] = []
        for i in range(0, len(files), _ADD_FILES_BATCH):
            batch = files[i : i + _ADD_FILES_BATCH]
            items = await self.create([n for n, _ in batch], agent=agent)
            for item, (_, data) in zip(items, batch):
                await self._client._presigned("PUT", item.upload_url, data)
                out.append(UploadedFile(id=item.id, name=item.name))
        return out

    @overload
    async def download(self, file: Union[File, AsyncFile, Download, str], *, to: None = None) -> bytes: ...
    @overload
    async def download(self, file: Union[File, AsyncFile, Download, str], *, to: Union[str, "os.PathLike[str]"]) -> Path: ...

    async def download(self, file: Union[File, AsyncFile, Download, str], *, to: Union[str, "os.PathLike[str]", None] = None) -> Union[bytes, Path]:
        """The bytes behind a File, a Download or a download URL; with `to` (a file or a folder), the path written."""
        url, name = download_source(file)
        data = (await self._client._presigned("GET", url)).content
        if to is None:
            return data
        target = download_target(to, name)
        target.write_bytes(data)
        return target


class AsyncWorkspaces(_AsyncResource):
    """AsyncWorkspaces (advanced, browsercode): named disks shared across conversations."""

    async def create(self, name: str) -> Workspace:
        """Creates a workspace."""
        return await self._client._call(Workspace, "POST", api_path("agent-workspaces"), json={"name": name})

    def list(self, *, limit: Optional[int] = None) -> AsyncPager[Workspace, WorkspaceList]:
        """The project's workspaces."""

        async def fetch(cursor: Optional[str]) -> WorkspaceList:
            return await self._client._call(WorkspaceList, "GET", api_path("agent-workspaces"), params=compact(limit=limit, cursor=cursor))

        return AsyncPager(fetch, lambda p: p.items, next_cursor)

    async def get(self, workspace_id: str) -> Workspace:
        """A workspace."""
        return await self._client._call(Workspace, "GET", api_path("agent-workspaces", workspace_id))

    async def update(self, workspace_id: str, *, name: str) -> Workspace:
        """Renames a workspace."""
        # Setting a name twice gives the same workspace, so a retry after a lost answer is safe.
        return await self._client._call(Workspace, "PATCH", api_path("agent-workspaces", workspace_id), json={"name": name}, retry=True)

    async def delete(self, workspace_id: str) -> None:
        """Deletes a workspace and its disk."""
        await self._client._send("DELETE", api_path("agent-workspaces", workspace_id))

    async def add_files(self, workspace_id: str, names: Sequence[str]) -> List[FileUpload]:
        """Adds files to the workspace by name (the raw add): each comes with a presigned `upload_url`."""
        if isinstance(names, str):
            raise TypeError("names takes a list of file names")
        body = {"files": [{"name": n} for n in names]}
        return (await self._client._call(FileUploadList, "POST", api_path("agent-workspaces", workspace_id, "files"), json=body)).items

    async def upload(self, workspace_id: str, file: FileInput, *, name: Optional[str] = None) -> UploadedFile:
        """Puts a file on the workspace's disk (presigned add flow)."""
        fname, data = read_upload(file, name)
        (item,) = await self.add_files(workspace_id, [fname])
        await self._client._presigned("PUT", item.upload_url, data)
        return UploadedFile(id=item.id, name=item.name)

    def files(self, workspace_id: str, *, limit: Optional[int] = None) -> AsyncPager[AsyncFile, WorkspaceFileList]:
        """The workspace's files, each able to `download()`."""

        async def fetch(cursor: Optional[str]) -> WorkspaceFileList:
            params = compact(limit=limit, cursor=cursor)
            return await self._client._call(WorkspaceFileList, "GET", api_path("agent-workspaces", workspace_id, "files"), params=params)

        return AsyncPager(fetch, lambda p: cast(List[AsyncFile], p.items), next_cursor)


class AsyncBrowsers(_AsyncResource):
    """AsyncBrowsers: standalone ones to drive over CDP, and those runs provision."""

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
    ) -> "_BrowserCreation":
        """Starts a standalone browser: `await` it, or `async with` it to have it stopped on exit."""
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
        return _BrowserCreation(self._client._call(Browser, "POST", api_path("browsers"), json=body))

    def list(self, *, status: Optional[str] = None, session_id: Optional[str] = None, limit: Optional[int] = None) -> AsyncPager[AsyncBrowser, BrowserList]:
        """The project's browsers (`status`: active or stopped)."""

        async def fetch(cursor: Optional[str]) -> BrowserList:
            params = compact(status=status, session_id=session_id, limit=limit, cursor=cursor)
            return await self._client._call(BrowserList, "GET", api_path("browsers"), params=params)

        return AsyncPager(fetch, lambda p: cast(List[AsyncBrowser], p.items), next_cursor)

    async def get(self, browser_id: str) -> AsyncBrowser:
        """A browser record (with a fresh `recording_url` once its recording is ready)."""
        return cast(AsyncBrowser, await self._client._call(Browser, "GET", api_path("browsers", browser_id)))

    async def stop(self, browser_id: str) -> AsyncBrowser:
        """Stops a browser (idempotent); saves its profile, closes a browser-agent session."""
        return cast(AsyncBrowser, await self._client._call(Browser, "POST", api_path("browsers", browser_id, "stop"), retry=True))

    async def recording(self, browser_id: str) -> Recording:
        """A fresh presigned link to the MP4 recording (ConflictError while it is being finished)."""
        return await self._client._call(Recording, "GET", api_path("browsers", browser_id, "recording"))

    async def live_view_link(self, browser_id: str, *, mode: str = "view", expires_in_seconds: Optional[int] = None) -> LiveViewLink:
        """A live view link of an active browser: `view` (watch only) or `interactive`."""
        body = compact(mode=mode, expires_in_seconds=expires_in_seconds)
        # A link is signed, not stored: minting another after a lost answer is harmless.
        return await self._client._call(LiveViewLink, "POST", api_path("browsers", browser_id, "live-view-links"), json=body, retry=True)

    async def downloads(self, browser_id: str) -> List[Download]:
        """AsyncFiles the browser downloaded from the web."""
        return (await self._client._call(DownloadList, "GET", api_path("browsers", browser_id, "downloads"))).items


class AsyncProfiles(_AsyncResource):
    """Browser profiles: saved cookies, localStorage and logins."""

    async def create(self, name: str, *, user_id: Optional[str] = None) -> Profile:
        """Creates a profile."""
        return await self._client._call(Profile, "POST", api_path("browser-profiles"), json=compact(name=name, user_id=user_id))

    def list(self, *, limit: Optional[int] = None) -> AsyncPager[Profile, ProfileList]:
        """The project's profiles."""

        async def fetch(cursor: Optional[str]) -> ProfileList:
            return await self._client._call(ProfileList, "GET", api_path("browser-profiles"), params=compact(limit=limit, cursor=cursor))

        return AsyncPager(fetch, lambda p: p.items, next_cursor)

    async def get(self, profile_id: str) -> Profile:
        """A profile."""
        return await self._client._call(Profile, "GET", api_path("browser-profiles", profile_id))

    async def update(self, profile_id: str, *, name: str) -> Profile:
        """Renames a profile."""
        # Setting a name twice gives the same profile, so a retry after a lost answer is safe.
        return await self._client._call(Profile, "PATCH", api_path("browser-profiles", profile_id), json={"name": name}, retry=True)

    async def delete(self, profile_id: str) -> None:
        """Deletes a profile (idempotent)."""
        await self._client._send("DELETE", api_path("browser-profiles", profile_id))


class AsyncApiKeys(_AsyncResource):
    """The project's API keys (`npm run keys` on the server does the same)."""

    async def create(self, name: str, *, scope: Optional[str] = None) -> ApiKeyCreated:
        """Issues a key; `scope` "full" (default) or "read" (GET only). The key is in this reply only."""
        return await self._client._call(ApiKeyCreated, "POST", api_path("api-keys"), json=compact(name=name, scope=scope))

    async def list(self) -> List[ApiKey]:
        """The keys that are not revoked: name, prefix, scope, created and last used (never the keys themselves)."""
        return (await self._client._call(ApiKeyList, "GET", api_path("api-keys"))).items

    async def revoke(self, api_key_id: str) -> None:
        """Revokes a key: it fails from the next request on."""
        await self._client._send("DELETE", api_path("api-keys", api_key_id))


class AsyncWebhooks(_AsyncResource):
    """Endpoints that receive the project's events, signed with their secret (Standard Webhooks)."""

    async def create(self, url: str, *, event_types: Optional[List[str]] = None, description: Optional[str] = None, enabled: Optional[bool] = None) -> WebhookWithSecret:
        """Registers an endpoint for `event_types` (none: every type). Its `secret` is in this reply only."""
        body = compact(url=url, event_types=event_types, description=description, enabled=enabled)
        return await self._client._call(WebhookWithSecret, "POST", api_path("webhooks"), json=body)

    def list(self, *, limit: Optional[int] = None) -> AsyncPager[Webhook, WebhookList]:
        """The project's webhooks, newest first."""

        async def fetch(cursor: Optional[str]) -> WebhookList:
            return await self._client._call(WebhookList, "GET", api_path("webhooks"), params=compact(limit=limit, cursor=cursor))

        return AsyncPager(fetch, lambda p: p.items, next_cursor)

    async def get(self, webhook_id: str) -> Webhook:
        """A webhook (never its secret)."""
        return await self._client._call(Webhook, "GET", api_path("webhooks", webhook_id))

    async def update(
        self, webhook_id: str, *, url: Optional[str] = None, event_types: Optional[List[str]] = None, description: Optional[str] = None, enabled: Optional[bool] = None
    ) -> Webhook:
        """Changes what is given; `enabled=True` re-enables a webhook the service disabled."""
        # Setting the same values twice gives the same webhook, so a retry after a lost answer is safe.
        body = compact(url=url, event_types=event_types, description=description, enabled=enabled)
        return await self._client._call(Webhook, "PATCH", api_path("webhooks", webhook_id), json=body, retry=True)

    async def delete(self, webhook_id: str) -> None:
        """Deletes a webhook and its pending deliveries (idempotent)."""
        await self._client._send("DELETE", api_path("webhooks", webhook_id))

    async def rotate_secret(self, webhook_id: str, *, overlap_seconds: Optional[int] = None) -> WebhookWithSecret:
        """A new secret (in this reply only); the previous one still signs for `overlap_seconds` (default a day)."""
        body = compact(overlap_seconds=overlap_seconds)
        return await self._client._call(WebhookWithSecret, "POST", api_path("webhooks", webhook_id, "rotate-secret"), json=body)

    def deliveries(self, webhook_id: str, *, limit: Optional[int] = None) -> AsyncPager[WebhookDelivery, WebhookDeliveryList]:
        """A webhook's deliveries, newest first: status, attempts, last status code, latency, error, next retry."""

        async def fetch(cursor: Optional[str]) -> WebhookDeliveryList:
            path = api_path("webhooks", webhook_id, "deliveries")
            return await self._client._call(WebhookDeliveryList, "GET", path, params=compact(limit=limit, cursor=cursor))

        return AsyncPager(fetch, lambda p: p.items, next_cursor)

    async def redeliver(self, webhook_id: str, delivery_id: str) -> WebhookDelivery:
        """Sends a delivery's event again: a new delivery of the same event id."""
        return await self._client._call(WebhookDelivery, "POST", api_path("webhooks", webhook_id, "deliveries", delivery_id, "redeliver"))

    async def test(self, webhook_id: str) -> WebhookDelivery:
        """Sends a webhook.test event to the endpoint; its delivery is in `deliveries(webhook_id)`."""
        return await self._client._call(WebhookDelivery, "POST", api_path("webhooks", webhook_id, "test"))


class _BrowserCreation:
    """The pending creation of a browser: `await` gives the AsyncBrowser; `async with` also stops it on exit."""

    def __init__(self, call: Coroutine[Any, Any, Browser]) -> None:
        self._call = call
        self._browser: Optional[AsyncBrowser] = None

    def __await__(self) -> Generator[Any, None, AsyncBrowser]:
        browser = yield from self._call.__await__()
        return cast(AsyncBrowser, browser)

    async def __aenter__(self) -> AsyncBrowser:
        self._browser = await self
        return self._browser

    async def __aexit__(self, *exc: object) -> None:
        if self._browser is not None:
            await self._browser.stop()


class _closing:
    """Closes a streamed response however the block ends."""

    def __init__(self, response: httpx.Response) -> None:
        self._response = response

    async def __aenter__(self) -> httpx.Response:
        return self._response

    async def __aexit__(self, *exc: object) -> None:
        await self._response.aclose()
