# examples/live_view.py: watch a run's browser live, and share a view-only link.
import os

from agent_task_service import AgentTaskService

SITE = os.environ.get("EXAMPLE_SITE", "https://example.com")

client = AgentTaskService()
created = client.runs.create(f"Open {SITE}. Read the heading.")

for event in client.runs.stream(created):
    if event.type == "browser.ready":  # the run's browser is up (its id is on the run from now on too)
        browser = client.browsers.get(event.data["browserId"])
        # theme=light (dark by default) and ui=false (no URL bar and tabs) style the page.
        print("watch:", f"{browser.live_view_url}&theme=light")
        link = client.browsers.live_view_link(browser.id, mode="view", expires_in_seconds=600)
        print("share (view only, until", link.expires_at.isoformat(timespec="seconds"), end="):\n")
        print("  ", link.url)
    elif event.type.startswith("run."):
        print(event.type)

print("answer:", client.runs.get(created).result)
