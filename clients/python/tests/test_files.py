"""Files in and out, and workspaces, through the sync client against the stack."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from agent_task_service import AgentTaskService, NotFoundError

pytestmark = pytest.mark.stack


def test_a_file_given_to_create_is_uploaded_attached_and_read_by_the_run(client: AgentTaskService, code_run) -> None:
    assert code_run.run.status == "completed", code_run.run.error
    assert code_run.run.result == "alpha beta gamma"
    inputs = client.runs.files(code_run.run, kind="input")
    assert [(f.name, f.kind, f.size_bytes) for f in inputs] == [("notes.txt", "input", len(code_run.notes))]
    assert inputs[0].download() == code_run.notes


def test_an_output_file_downloads_as_bytes_into_a_folder_or_to_a_path(client: AgentTaskService, code_run, tmp_path: Path) -> None:
    (count,) = client.runs.files(code_run.run, kind="output")
    assert (count.name, count.kind) == ("count.txt", "output")
    assert count.download() == b"3\n"
    written = count.download(to=tmp_path)
    assert written == tmp_path / "count.txt" and written.read_bytes() == b"3\n"
    other = client.files.download(count, to=tmp_path / "sub" / "n.txt")
    assert other.read_bytes() == b"3\n"
    assert client.files.download(count.download_url) == b"3\n"
    assert sorted(f.name for f in code_run.files) == ["count.txt", "notes.txt"]


def test_an_uploaded_file_is_attached_by_id_and_unknown_ids_come_back_missing(client: AgentTaskService) -> None:
    uploaded = client.files.upload(b"a,b\n1,2\n3,4\n", name="data.csv", agent="browsercode")
    assert uploaded.name == "data.csv" and uploaded.id.startswith("file_")
    created = client.runs.create(
        "Run `wc -l < data.csv`.",
        agent="browsercode",
        attached_file_ids=[uploaded.id, "file_unknown0000000000000000"],
    )
    assert created.missing_file_ids == ["file_unknown0000000000000000"]
    run = client.runs.wait(created, timeout=120)
    assert run.status == "completed", run.error
    assert run.result == "3"


def test_the_raw_add_returns_a_presigned_link_that_takes_a_put_without_the_key(client: AgentTaskService, stack) -> None:
    (item,) = client.files.create(["raw.txt"], agent="browsercode")
    assert item.name == "raw.txt"
    assert item.upload_url not in repr(item), "a presigned link is a secret: not in repr"
    assert httpx.put(item.upload_url, content=b"raw bytes").status_code < 300
    created = client.runs.create("Run `cat raw.txt`.", agent="browsercode", attached_file_ids=[item.id])
    assert client.runs.wait(created, timeout=120).result == "raw bytes"


def test_a_workspace_is_created_renamed_filled_used_by_a_run_and_deleted(client: AgentTaskService) -> None:
    workspace = client.workspaces.create("shared data")
    try:
        assert client.workspaces.get(workspace.id) == workspace
        renamed = client.workspaces.update(workspace.id, name="shared data v2")
        assert renamed.name == "shared data v2" and renamed.id == workspace.id
        assert workspace.id in [w.id for w in client.workspaces.list(limit=1)]

        client.workspaces.upload(workspace.id, b"from the workspace\n", name="shared.txt")
        client.workspaces.upload(workspace.id, ("second.txt", b"2\n"))
        (raw,) = client.workspaces.add_files(workspace.id, ["third.txt"])
        assert httpx.put(raw.upload_url, content=b"3\n").status_code < 300
        files = list(client.workspaces.files(workspace.id, limit=1))
        assert sorted(f.name for f in files) == ["second.txt", "shared.txt", "third.txt"]
        assert next(f for f in files if f.name == "shared.txt").download() == b"from the workspace\n"

        created = client.runs.create("Run `cat shared.txt`.", agent="browsercode", workspace_id=workspace.id)
        assert created.workspace_id == workspace.id
        assert client.runs.wait(created, timeout=120).result == "from the workspace"
    finally:
        client.workspaces.delete(workspace.id)
    with pytest.raises(NotFoundError):
        client.workspaces.get(workspace.id)
