"""Standalone browsers, live view, recordings and profiles through the sync client against the stack."""

from __future__ import annotations

import time

import httpx
import pytest

from agent_task_service import AgentTaskService, Browser, BrowserOptions, ConflictError, NotFoundError

pytestmark = pytest.mark.stack


def cdp_http(cdp_url: str, what: str) -> str:
    """The DevTools HTTP endpoint beside a CDP WebSocket URL (`/json/version`, `/json/list`)."""
    url = httpx.URL(cdp_url)
    return str(url.copy_with(scheme="https" if url.scheme == "wss" else "http", path=url.path + what))


@pytest.fixture(scope="session")
def stopped_browsers() -> list[Browser]:
    return []


def test_a_browser_made_in_a_with_block_is_driven_over_cdp_and_stopped_on_exit(client: AgentTaskService, stopped_browsers: list[Browser]) -> None:
    with client.browsers.create(timeout_minutes=5, screen_width=1024, screen_height=768) as browser:
        assert isinstance(browser, Browser)
        assert browser.status == "active"
        assert (browser.screen_width, browser.screen_height) == (1024, 768)
        assert browser.cdp_url and browser.cdp_url.startswith("ws")
        assert browser.live_view_url and browser.id in browser.live_view_url
        assert browser.cdp_url not in repr(browser), "a CDP URL carries a token: not in repr"
        version = httpx.get(cdp_http(browser.cdp_url, "/json/version")).json()
        assert "Chrome" in version["Browser"] or "Chromium" in version["Browser"]
        assert client.browsers.get(browser.id).status == "active"
        assert browser.id in [b.id for b in client.browsers.list(status="active")]
        link = client.browsers.live_view_link(browser.id, mode="view", expires_in_seconds=120)
        assert browser.id in link.url and link.expires_at > browser.created_at
        assert client.browsers.downloads(browser.id) == []
    after = client.browsers.get(browser.id)
    assert after.status == "stopped" and after.stopped_at is not None
    assert browser.id in [b.id for b in client.browsers.list(status="stopped", limit=1)]
    assert client.browsers.stop(browser.id).status == "stopped", "stop is idempotent"
    stopped_browsers.append(after)


def test_a_profile_is_created_renamed_used_by_a_browser_and_a_run_and_deleted(client: AgentTaskService, stack) -> None:
    profile = client.profiles.create("shop login", user_id="user-7")
    assert (profile.name, profile.user_id, profile.cookie_domains) == ("shop login", "user-7", [])
    assert client.profiles.get(profile.id) == profile
    assert client.profiles.update(profile.id, name="shop").name == "shop"
    assert profile.id in [p.id for p in client.profiles.list(limit=1)]

    with client.browsers.create(profile_id=profile.id, timeout_minutes=5) as browser:
        assert browser.profile_id == profile.id

    created = client.runs.create(f"Open {stack.site}/run-article.html. Read the heading.", model="builtin", browser=BrowserOptions(profile_id=profile.id))
    run = client.runs.wait(created, timeout=120)
    assert run.status == "completed", run.error
    assert run.browser_id and client.browsers.get(run.browser_id).profile_id == profile.id
    assert client.profiles.get(profile.id).last_used_at is not None

    client.profiles.delete(profile.id)
    with pytest.raises(NotFoundError):
        client.profiles.get(profile.id)
    client.profiles.delete(profile.id)  # idempotent


@pytest.mark.late
def test_a_stopped_browser_has_a_recording(client: AgentTaskService, stopped_browsers: list[Browser]) -> None:
    # The browser stopped by the first test of this file: its MP4 has been in the making since (this test runs last).
    if not stopped_browsers:
        stopped_browsers.append(client.browsers.create(timeout_minutes=5).stop())
    stopped = stopped_browsers[0]
    # The MP4 is finished a moment after the stop; until then the service answers 409 (Retry-After).
    deadline = time.monotonic() + 90
    while True:
        try:
            recording = client.browsers.recording(stopped.id)
            break
        except ConflictError as err:
            assert "not finished" in err.detail
            assert time.monotonic() < deadline, "the recording was not finished within 90 s"
            time.sleep(0.5)
    assert recording.expires_at > stopped.created_at
    video = httpx.get(recording.url)
    assert video.status_code == 200 and video.content[4:8] == b"ftyp", "an MP4"
    # The record links the recording too, unless live view was too slow to ask this time (then null).
    again = client.browsers.get(stopped.id).recording_url
    assert again is None or httpx.get(again).content[4:8] == b"ftyp"
