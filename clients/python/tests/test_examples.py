"""The README's examples: each Python block is a file under examples/, and each file runs against the stack."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Dict

import pytest

HERE = Path(__file__).resolve().parent.parent
EXAMPLES = HERE / "examples"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)

#: What each example prints, line by line in this order (other lines may come between).
EXPECTED: Dict[str, list[str]] = {
    "run_and_answer.py": [r"^started run_\w+ in session ses_\w+$", r"^completed -> The Analytical Engine$"],
    "files_in_and_out.py": [r"^completed -> 3$", r"^downloaded count.txt = 3$"],
    "follow_up.py": [
        r"^first: The Analytical Engine$",
        r"^follow-up: The Analytical Engine \(same browser: True\)$",
        r"^run_\w+ completed Extract the title\.$",
        r"^run_\w+ completed Open .*Read the heading\.$",
    ],
    "browser_cdp.py": [
        r"^browser brw_\w+ active 1280x800$",
        r"^watch it live: http\S+/browsers/brw_\w+\?token=\S+$",
        r"^CDP speaks for \w*Chrom",
        r"^after the with block: stopped$",
    ],
    "live_view.py": [
        r"^run.queued$",
        r"^watch: http\S+/browsers/brw_\w+\?token=\S+&theme=light$",
        r"^share \(view only, until \d{4}-\d\d-\d\dT",
        r"^   http\S+/browsers/brw_\w+\?token=\S+$",
        r"^run.completed$",
        r"^answer: The Analytical Engine$",
    ],
    "profile.py": [
        r"^profile prf_\w+ shop account$",
        r"^browser brw_\w+ uses prf_\w+$",
        r"^run completed -> The Analytical Engine$",
        r"^\['shop account \(main\)'\]$",
        r"^deleted$",
    ],
    "streaming.py": [r"^\[1\] run.queued$", r"^\| hello$", r"^\| 1$", r"^\| 3$", r"^\[\d+\] run.completed$"],
    "errors.py": [
        r"^404 Run not found \| request id: True$",
        r"^422 body.browser.profile -> Extra inputs are not permitted$",
        r"^409 Run already completed$",
        r"^no connection: APIConnectionError$",
    ],
    "async_runs.py": [
        r"^completed -> The Analytical Engine$",
        r"^completed -> The Analytical Engine$",
        r"^recent: run_\w+ (queued|running|completed)$",  # the newest run of the project: maybe another example's
        r"^browser active$",
    ],
}


def test_every_python_block_of_the_readme_is_an_example_file_as_it_is() -> None:
    readme = (HERE / "README.md").read_text()
    blocks = BLOCK.findall(readme)
    shown = {}
    for block in blocks:
        first = block.splitlines()[0]
        match = re.match(r"# examples/(\w+\.py):", first)
        assert match, f"a README block that is not an example file: {first!r}"
        shown[match.group(1)] = block
    files = {p.name: p.read_text() for p in EXAMPLES.glob("*.py")}
    assert sorted(shown) == sorted(files), "every example is shown, every block is an example"
    for name, text in files.items():
        assert shown[name] == text, f"README block of {name} differs from examples/{name}"
    assert sorted(EXPECTED) == sorted(files), "every example has its expected output here"


@pytest.mark.stack
@pytest.mark.late
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_example_runs_against_the_stack(examples_started: Dict[str, subprocess.Popen], name: str) -> None:
    proc = examples_started[name]
    try:
        output, _ = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        pytest.fail(f"{name} did not end within 180 s:\n{output}")
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{output}"
    lines = output.splitlines()
    at = 0
    for pattern in EXPECTED[name]:
        found = next((i for i in range(at, len(lines)) if re.search(pattern, lines[i])), None)
        assert found is not None, f"{name}: no line matching {pattern!r} (in order) in:\n{output}"
        at = found + 1
