"""Fixtures of the SDK's tests against a running stack (test/clients-python.test.ts starts one and sets ATS_*).

Tests marked `stack` need the environment of test/support/client-harness.ts: ATS_BASE_URL and
ATS_API_KEY (through a proxy whose connections can be cut), ATS_TEST_DIRECT_URL, ATS_TEST_OTHER_KEY,
ATS_TEST_SITE and ATS_TEST_CONTROL. Without it they are skipped (the Node test fails on a skip).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator

import httpx
import pytest

from agent_task_service import AgentTaskService, File, Run

STACK_VARS = ("ATS_BASE_URL", "ATS_API_KEY", "ATS_TEST_DIRECT_URL", "ATS_TEST_OTHER_KEY", "ATS_TEST_SITE", "ATS_TEST_CONTROL")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `disruptive` tests (they cut connections or restart the gateway) run first, `late` ones last:
    # the example programs run in between, beside the other tests (see examples_started).
    items.sort(key=lambda item: 0 if "disruptive" in item.keywords else 2 if "late" in item.keywords else 1)
    missing = [v for v in STACK_VARS if not os.environ.get(v)]
    if not missing:
        return
    skip = pytest.mark.skip(reason=f"needs a stack (test/clients-python.test.ts): {', '.join(missing)} not set")
    for item in items:
        if "stack" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "stack: needs the running stack of test/support/client-harness.ts")
    config.addinivalue_line("markers", "late: runs after every other test")
    config.addinivalue_line("markers", "disruptive: cuts the proxied connections or restarts the gateway; runs first")


@dataclass
class Stack:
    base_url: str
    api_key: str
    direct_url: str
    other_key: str
    site: str
    control_url: str

    def control(self, action: str) -> dict:
        """Asks the harness to cut the proxied connections (`cut`) or to stop or start the gateway."""
        response = httpx.post(f"{self.control_url}/{action}", timeout=120)
        response.raise_for_status()
        return response.json()


@pytest.fixture(scope="session")
def stack() -> Stack:
    return Stack(
        base_url=os.environ["ATS_BASE_URL"],
        api_key=os.environ["ATS_API_KEY"],
        direct_url=os.environ["ATS_TEST_DIRECT_URL"],
        other_key=os.environ["ATS_TEST_OTHER_KEY"],
        site=os.environ["ATS_TEST_SITE"],
        control_url=os.environ["ATS_TEST_CONTROL"],
    )


@pytest.fixture(scope="session")
def client(stack: Stack) -> Iterator[AgentTaskService]:
    # The key and URL come from ATS_API_KEY / ATS_BASE_URL, as a user sets them.
    with AgentTaskService(timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def heading_run(client: AgentTaskService, stack: Stack) -> Run:
    """A completed browser-agent run (two steps) shared by the tests that read one."""
    created = client.runs.create(f"Open {stack.site}/run-article.html. Read the heading.", model="builtin")
    return client.runs.wait(created, timeout=120)


@dataclass
class CodeRun:
    run: Run
    notes: bytes
    files: list[File]


@pytest.fixture(scope="session")
def code_run(client: AgentTaskService, tmp_path_factory: pytest.TempPathFactory) -> CodeRun:
    """A completed browsercode run that read an uploaded notes.txt and wrote count.txt."""
    notes = b"alpha beta gamma\n"
    path = Path(tmp_path_factory.mktemp("in")) / "notes.txt"
    path.write_bytes(notes)
    created = client.runs.create("Run `cat notes.txt`. Run `wc -w < notes.txt > count.txt`.", agent="browsercode", files=[path])
    run = client.runs.wait(created, timeout=120)
    return CodeRun(run=run, notes=notes, files=client.runs.files(run))


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
_examples: Dict[str, subprocess.Popen] = {}


@pytest.fixture(autouse=True)
def examples_started(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, subprocess.Popen]:
    """The example programs, started once the disruptive tests are done and left running beside the others.

    They run as a user runs them (`python examples/x.py` with ATS_API_KEY and ATS_BASE_URL), in the
    other project (ATS_TEST_OTHER_KEY), so their runs and browsers stay out of this project's lists
    and limits; test_examples.py checks what they printed, last.
    """
    wanted = "disruptive" not in request.node.keywords and all(os.environ.get(v) for v in STACK_VARS)
    if wanted and not _examples and any("test_the_example_runs" in item.name for item in request.session.items):
        env = {k: v for k, v in os.environ.items() if not k.startswith("ATS_TEST_")}
        env["ATS_API_KEY"] = os.environ["ATS_TEST_OTHER_KEY"]
        env["EXAMPLE_SITE"] = f"{os.environ['ATS_TEST_SITE']}/run-article.html"
        for path in sorted(EXAMPLES.glob("*.py")):
            cwd = tmp_path_factory.mktemp(path.stem)
            _examples[path.name] = subprocess.Popen([sys.executable, str(path)], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        request.session.config.add_cleanup(_stop_examples)
    return _examples


def _stop_examples() -> None:
    for proc in _examples.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
