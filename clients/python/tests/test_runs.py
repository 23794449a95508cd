"""Runs, sessions and agents through the sync client against the stack."""

from __future__ import annotations

import json
from datetime import datetime

import httpx
import pytest

from agent_task_service import AgentTaskService, Event, NotFoundError, Run, WaitTimeoutError

pytestmark = pytest.mark.stack


def test_agents_list_names_both_agents_and_their_watch_verb(client: AgentTaskService) -> None:
    agents = {a.name: a for a in client.agents.list()}
    assert set(agents) == {"browser-agent", "browsercode"}
    assert agents["browser-agent"].watch == "steps"
    assert agents["browsercode"].watch == "events"
    assert agents["browsercode"].session.kind == "durable"
    assert agents["browser-agent"].example_tasks
    health = client.health()
    assert set(health.services) == {"run", "browser-pool", "file-storage", "live-view", "webhooks", "nats"}
    assert health.status == ("ok" if set(health.services.values()) == {"SERVING"} else "degraded")


def test_models_list_offers_builtin_and_names_the_default(client: AgentTaskService) -> None:
    offered = client.models.list()
    builtin = next(m for m in offered.models if m.name == "builtin")
    assert builtin.provider == "builtin" and builtin.vision is False
    assert [m.name for m in offered.models if m.default] == [offered.default]


def test_when_a_run_is_created_and_waited_for_then_its_result_is_the_answer(client: AgentTaskService, stack) -> None:
    created = client.runs.create(f"Open {stack.site}/run-table.html. Extract the table as JSON.", model="builtin")
    assert created.status == "queued"
    assert created.agent == "browser-agent"
    assert created.session_id.startswith("ses_")
    assert created.missing_file_ids == []

    run = client.runs.wait(created, timeout=120)

    assert isinstance(run, Run)
    assert run.status == "completed", run.error
    assert json.loads(run.result or "") == [
        {"Product": "Lamp", "Price": "25"},
        {"Product": "Desk", "Price": "140"},
        {"Product": "Chair", "Price": "60"},
    ]
    assert run.session_id == created.session_id
    assert run.browser_id and run.browser_id.startswith("brw_")
    assert run.output is None
    assert isinstance(run.finished_at, datetime) and run.finished_at >= run.created_at
    status = client.runs.status(run.id)
    assert (status.status, status.result, status.ended) == ("completed", run.result, True)
    assert client.runs.get(run.id) == run


def test_when_a_follow_up_names_the_session_then_it_continues_in_the_same_browser(client: AgentTaskService, heading_run: Run) -> None:
    follow_up = client.runs.create("Extract the title.", session_id=heading_run.session_id, model="builtin")
    run = client.runs.wait(follow_up, timeout=120)
    assert run.status == "completed", run.error
    assert run.result == "The Analytical Engine"
    assert run.session_id == heading_run.session_id
    assert run.browser_id == heading_run.browser_id

    session = client.sessions.get(heading_run.session_id)
    assert session.latest_run_id == run.id
    assert session.agent == "browser-agent"
    ids = [r.id for r in client.runs.list(session_id=heading_run.session_id)]
    assert ids == [run.id, heading_run.id]
    assert heading_run.session_id in [s.id for s in client.sessions.list(limit=1)]


def test_when_a_list_spans_several_pages_then_the_iterator_follows_the_cursor(client: AgentTaskService, heading_run: Run) -> None:
    seen: list[str] = []
    client._http.event_hooks["request"].append(lambda r: seen.append(str(r.url)) if r.url.path.endswith("/runs") else None)
    try:
        paged = [r.id for r in client.runs.list(limit=1)]
    finally:
        client._http.event_hooks["request"].pop()
    whole = [r.id for r in client.runs.list(limit=200)]
    assert len(whole) >= 2
    assert paged == whole
    assert len(seen) == len(whole), "one request per page of one"
    assert "cursor=" in seen[1]
    pages = list(client.runs.list(limit=1).pages())
    assert [p.items[0].id for p in pages] == whole
    assert pages[-1].has_more is False and all(p.has_more for p in pages[:-1])


def test_steps_and_events_page_by_their_after_cursor(client: AgentTaskService, heading_run: Run) -> None:
    steps = list(client.runs.steps(heading_run, limit=1))
    assert [s.number for s in steps] == [1, 2]
    assert steps[0].action.startswith("navigate ") and steps[0].url and steps[0].url.endswith("/run-article.html")
    assert [p.next_after for p in client.runs.steps(heading_run, limit=1).pages()] == [1, 2]
    assert [s.number for s in client.runs.steps(heading_run, after=1)] == [2]

    events = list(client.runs.events(heading_run, limit=2))
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "run.queued" and events[-1].type == "run.completed"
    assert len(list(client.runs.events(heading_run, limit=2).pages())) == (len(events) + 1) // 2
    assert [e.id for e in client.runs.events(heading_run, after=3)] == [e.id for e in events[3:]]


def test_a_stream_of_an_ended_run_replays_its_events_and_ends(client: AgentTaskService, heading_run: Run) -> None:
    streamed = list(client.runs.stream(heading_run))
    listed = list(client.runs.events(heading_run))
    assert streamed == listed
    assert streamed[-1].type == "run.completed"
    assert list(client.runs.stream(heading_run, after=streamed[-2].id)) == [streamed[-1]]


@pytest.mark.disruptive
def test_when_the_connection_is_cut_mid_stream_then_it_resumes_from_the_last_event(client: AgentTaskService, stack) -> None:
    created = client.runs.create("Run `echo one`. Run `sleep 2`. Run `echo two`.", agent="browsercode")
    got: list[Event] = []
    opened: list[tuple[httpx.Request, int | None]] = []  # each connection and the last event had before it

    def on_request(request: httpx.Request) -> None:
        if request.url.path.endswith("/events/stream"):
            opened.append((request, got[-1].id if got else None))

    client._http.event_hooks["request"].append(on_request)
    try:
        for event in client.runs.stream(created):
            got.append(event)
            if len(got) == 2:
                # Cut while the run is still going (it sleeps 2 s): the rest must come over a new connection.
                assert stack.control("cut")["cut"] >= 1
    finally:
        client._http.event_hooks["request"].remove(on_request)

    assert len(opened) >= 2, "the stream did not connect again after the cut"
    assert "last-event-id" not in opened[0][0].headers
    (again, had) = opened[1]
    assert had is not None and had >= got[1].id
    assert again.headers["last-event-id"] == str(had)
    listed = list(client.runs.events(created, agent="browsercode"))
    assert [e.id for e in got] == [e.id for e in listed], "events lost or repeated across the cut"
    assert got == listed
    assert got[-1].type == "run.completed"
    assert [e.data["chunk"] for e in got if e.type == "terminal.output"] == ["one\n", "two\n"]


def test_wait_gives_up_naming_the_run_and_stop_ends_it(client: AgentTaskService, stack) -> None:
    created = client.runs.create(f"Open {stack.site}/run-table.html. Wait for 'a text that never appears'.", model="builtin")
    with pytest.raises(WaitTimeoutError) as caught:
        client.runs.wait(created, timeout=0.5, poll_interval=0.1)
    assert caught.value.run_id == created.id
    assert created.id in str(caught.value)
    assert caught.value.last_status in ("queued", "running")

    stopped = client.runs.stop(created)
    assert stopped.status == "stopped"
    assert client.runs.wait(created, timeout=30).status == "stopped"
    assert created.id in [r.id for r in client.runs.list(status="stopped")]
    assert list(client.runs.stream(created))[-1].type == "run.stopped"


def test_a_run_given_by_object_keeps_its_agent(client: AgentTaskService, code_run) -> None:
    # A browsercode run read by object needs no agent=…; by bare id it does (the default agent does not know it).
    assert client.runs.get(code_run.run).agent == "browsercode"
    with pytest.raises(NotFoundError):
        client.runs.get(code_run.run.id)
    assert client.runs.get(code_run.run.id, agent="browsercode").id == code_run.run.id
