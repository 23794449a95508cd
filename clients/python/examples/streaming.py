# examples/streaming.py: follow a run's events as they happen (SSE; a dropped connection resumes by itself).
from agent_task_service import AgentTaskService

client = AgentTaskService()
created = client.runs.create("Run `echo hello`. Run `seq 3`.", agent="browsercode")

for event in client.runs.stream(created):  # ends after run.completed, run.failed or run.stopped
    if event.type == "terminal.output":
        for line in event.data["chunk"].splitlines():
            print("|", line)
    else:
        print(f"[{event.id}] {event.type}")
