# examples/profile.py: a browser profile keeps cookies and logins for the browsers and runs that use it.
import os

from agent_task_service import AgentTaskService, BrowserOptions

SITE = os.environ.get("EXAMPLE_SITE", "https://example.com")

client = AgentTaskService()
profile = client.profiles.create("shop account", user_id="customer-42")
print("profile", profile.id, profile.name)

# A standalone browser with the profile: log in over CDP; stopping it saves the profile.
with client.browsers.create(profile_id=profile.id, timeout_minutes=10) as browser:
    print("browser", browser.id, "uses", browser.profile_id)

# A run whose browser starts with the profile's cookies; a completed run saves them back.
run = client.runs.wait(client.runs.create(f"Open {SITE}. Read the heading.", browser=BrowserOptions(profile_id=profile.id)))
print("run", run.status, "->", run.result)

client.profiles.update(profile.id, name="shop account (main)")
print([p.name for p in client.profiles.list() if p.id == profile.id])
client.profiles.delete(profile.id)
print("deleted")
