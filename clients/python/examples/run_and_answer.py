# examples/run_and_answer.py: start a run, wait for it to end, print the answer.
import os

from agent_task_service import AgentTaskService

SITE = os.environ.get("EXAMPLE_SITE", "https://example.com")

client = AgentTaskService()  # reads ATS_API_KEY and ATS_BASE_URL

created = client.runs.create(f"Open {SITE}. Read the heading.")
print("started", created.id, "in session", created.session_id)

run = client.runs.wait(created, timeout=300)  # polls /status until completed, stopped or failed
print(run.status, "->", run.result)
