"""The async client against the stack: every resource and helper, as `await`, `async for` and `async with`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Awaitable, Callable, TypeVar

import httpx
import pytest

from agent_task_service import (
    AsyncAgentTaskService,
    AsyncBrowser,
    AsyncFile,
    AuthenticationError,
    ConflictError,
    Event,
    NotFoundError,
    Run,
    UnprocessableEntityError,
    WaitTimeoutError,
)

pytestmark = pytest.mark.stack
T = TypeVar("T")


def run_async(body: Callable[[AsyncAgentTaskService], Awaitable[T]], **options) -> T:
    """Runs `body` with a fresh async client (pytest-asyncio is not assumed)."""

    async def main() -> T:
        async with AsyncAgentTaskService(**options) as client:
            return await body(client)

    return asyncio.run(main())


async def collect(iterable) -> list:
    return [item async for item in iterable]


def test_async_create_wait_follow_up_and_read_back(stack) -> None:
    async def body(client: AsyncAgentTaskService) -> None:
        assert {a.name for a in await client.agents.list()} == {"browser-agent", "browsercode"}
        assert (await client.models.list()).default in {m.name for m in (await client.models.list()).models}
        created = await client.runs.create(f"Open {stack.site}/run-table.html. Extract the table as JSON.", model="builtin")
        run = await client.runs.wait(created, timeout=120)
        assert isinstance(run, Run) and run.status == "completed", run.error
        assert json.loads(run.result or "")[1] == {"Product": "Desk", "Price": "140"}
        assert (await client.runs.status(created.id)).result == run.result
        assert await client.runs.get(created) == run

        follow_up = await client.runs.create("Read the heading.", session_id=run.session_id, model="builtin")
        second = await client.runs.wait(follow_up, timeout=120)
        assert second.result == "Price list" and second.browser_id == run.browser_id
        session = await client.sessions.get(run.session_id)
        assert session.latest_run_id == second.id
        assert run.session_id in [s.id async for s in client.sessions.list(limit=1)]

        assert [r.id async for r in client.runs.list(session_id=run.session_id, limit=1)] == [second.id, run.id]
        whole = [r.id async for r in client.runs.list(limit=200)]
        assert [r.id async for r in client.runs.list(limit=1)] == whole
        assert len(await collect(client.runs.list(limit=1).pages())) == len(whole)

        steps = await collect(client.runs.steps(run, limit=1))
        assert [s.number for s in steps] == [1, 2]
        events = await collect(client.runs.events(run, limit=2))
        assert events[-1].type == "run.completed"
        assert await collect(client.runs.stream(run)) == events
        health = await client.health()
        assert set(health.services) == {"run", "browser-pool", "file-storage", "live-view", "webhooks", "nats"}
        assert health.status == ("ok" if set(health.services.values()) == {"SERVING"} else "degraded")

    run_async(body)


@pytest.mark.disruptive
def test_async_stream_resumes_after_a_cut(stack) -> None:
    got: list[Event] = []
    opened: list[tuple[httpx.Request, int | None]] = []  # each connection and the last event had before it

    async def on_request(request: httpx.Request) -> None:
        if request.url.path.endswith("/events/stream"):
            opened.append((request, got[-1].id if got else None))

    async def body(client: AsyncAgentTaskService) -> None:
        client._http.event_hooks["request"].append(on_request)
        created = await client.runs.create("Run `echo one`. Run `sleep 2`. Run `echo two`.", agent="browsercode")
        async for event in client.runs.stream(created):
            got.append(event)
            if len(got) == 2:
                await asyncio.to_thread(stack.control, "cut")
        assert len(opened) >= 2
        (again, had) = opened[1]
        assert had is not None and had >= got[1].id and again.headers["last-event-id"] == str(had)
        assert got == await collect(client.runs.events(created))
        assert [e.data["chunk"] for e in got if e.type == "terminal.output"] == ["one\n", "two\n"]

    run_async(body)


def test_async_files_in_and_out(tmp_path: Path) -> None:
    async def body(client: AsyncAgentTaskService) -> None:
        created = await client.runs.create(
            "Run `tr a-z A-Z < in.txt > out.txt`.", agent="browsercode", files=[("in.txt", b"shout\n")]
        )
        run = await client.runs.wait(created, timeout=120)
        assert run.status == "completed", run.error
        (out,) = await client.runs.files(run, kind="output")
        assert isinstance(out, AsyncFile) and out.name == "out.txt"
        assert await out.download() == b"SHOUT\n"
        assert (await out.download(to=tmp_path)).read_bytes() == b"SHOUT\n"
        uploaded = await client.files.upload(b"x", name="x.txt", agent="browsercode")
        (raw,) = await client.files.create(["y.txt"])
        assert uploaded.id.startswith("file_") and raw.upload_url

        workspace = await client.workspaces.create("async ws")
        assert (await client.workspaces.update(workspace.id, name="async ws 2")).name == "async ws 2"
        assert (await client.workspaces.get(workspace.id)).name == "async ws 2"
        assert workspace.id in [w.id async for w in client.workspaces.list(limit=1)]
        await client.workspaces.upload(workspace.id, b"in the workspace", name="w.txt")
        (listed,) = await collect(client.workspaces.files(workspace.id))
        assert isinstance(listed, AsyncFile) and await listed.download() == b"in the workspace"
        await client.workspaces.delete(workspace.id)
        with pytest.raises(NotFoundError):
            await client.workspaces.get(workspace.id)

    run_async(body)


def test_async_browsers_and_profiles(stack) -> None:
    async def body(client: AsyncAgentTaskService) -> None:
        profile = await client.profiles.create("async profile")
        assert (await client.profiles.update(profile.id, name="renamed")).name == "renamed"
        assert (await client.profiles.get(profile.id)).name == "renamed"
        assert profile.id in [p.id async for p in client.profiles.list(limit=1)]

        async with client.browsers.create(profile_id=profile.id, timeout_minutes=5) as browser:
            assert isinstance(browser, AsyncBrowser) and browser.status == "active"
            assert browser.profile_id == profile.id and browser.cdp_url
            assert (await client.browsers.get(browser.id)).status == "active"
            assert browser.id in [b.id async for b in client.browsers.list(status="active")]
            link = await client.browsers.live_view_link(browser.id, mode="interactive")
            assert browser.id in link.url
            assert await client.browsers.downloads(browser.id) == []
        assert (await client.browsers.get(browser.id)).status == "stopped"

        plain = await client.browsers.create(timeout_minutes=5)
        assert (await plain.stop()).status == "stopped"
        try:
            recording = await client.browsers.recording(plain.id)
            assert recording.url.startswith("http")
        except ConflictError as err:  # finishing the MP4 takes a moment after the stop
            assert err.detail == "Recording is not finished yet"

        await client.profiles.delete(profile.id)
        with pytest.raises(NotFoundError):
            await client.profiles.get(profile.id)

    run_async(body)


def test_async_errors(stack) -> None:
    async def body(client: AsyncAgentTaskService) -> None:
        with pytest.raises(UnprocessableEntityError) as bad:
            await client.runs.create("x", browser={"nope": True})
        assert [tuple(i.loc) for i in bad.value.errors] == [("body", "browser", "nope")]
        with pytest.raises(NotFoundError):
            await client.runs.get("run_doesnotexist00000000000")
        created = await client.runs.create(f"Open {stack.site}/run-table.html. Wait for 'never ever'.", model="builtin")
        with pytest.raises(WaitTimeoutError):
            await client.runs.wait(created, timeout=0.3, poll_interval=0.1)
        assert (await client.runs.stop(created)).status == "stopped"
        with pytest.raises(ConflictError):
            await client.runs.stop(created)
        async with AsyncAgentTaskService(api_key="ats_wrong") as wrong:
            with pytest.raises(AuthenticationError) as caught:
                await wrong.agents.list()
        assert "ats_wrong" not in str(caught.value)

    run_async(body)
