# examples/follow_up.py: a follow-up run continues the conversation (and the browser) of the first.
import os

from agent_task_service import AgentTaskService

SITE = os.environ.get("EXAMPLE_SITE", "https://example.com")

client = AgentTaskService()

first = client.runs.wait(client.runs.create(f"Open {SITE}. Read the heading."))
print("first:", first.result)

follow_up = client.runs.create("Extract the title.", session_id=first.session_id)
second = client.runs.wait(follow_up)
print("follow-up:", second.result, "(same browser:", second.browser_id == first.browser_id, end=")\n")

for run in client.runs.list(session_id=first.session_id):  # pages are fetched as the loop goes
    print(run.id, run.status, run.task)
