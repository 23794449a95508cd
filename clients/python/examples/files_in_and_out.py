# examples/files_in_and_out.py: upload a file, attach it to a browsercode run, download what the run wrote.
import tempfile
from pathlib import Path

from agent_task_service import AgentTaskService

client = AgentTaskService()
work = Path(tempfile.mkdtemp())
notes = work / "notes.txt"
notes.write_text("alpha beta gamma\n")

# Upload (presigned PUT, no key on it), then attach by id: attaching puts it on the run's disk.
uploaded = client.files.upload(notes, agent="browsercode")
created = client.runs.create(
    "Run `wc -w < notes.txt > count.txt`. Read file count.txt.",
    agent="browsercode",
    attached_file_ids=[uploaded.id],
)
# The same in one call: client.runs.create(..., agent="browsercode", files=[notes])
run = client.runs.wait(created, timeout=300)
print(run.status, "->", run.result)

for file in client.runs.files(run, kind="output"):
    path = file.download(to=work)  # a folder: the file keeps its name
    print("downloaded", file.name, "=", path.read_text().strip())
