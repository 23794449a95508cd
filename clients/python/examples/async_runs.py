# examples/async_runs.py: the async client runs several tasks at once.
import asyncio
import os

from agent_task_service import AsyncAgentTaskService

SITE = os.environ.get("EXAMPLE_SITE", "https://example.com")


async def main() -> None:
    async with AsyncAgentTaskService() as client:
        tasks = [f"Open {SITE}. Read the heading.", f"Open {SITE}. Extract the title."]
        created = await asyncio.gather(*(client.runs.create(task) for task in tasks))
        runs = await asyncio.gather(*(client.runs.wait(c, timeout=300) for c in created))
        for run in runs:
            print(run.status, "->", run.result)

        async for run in client.runs.list(limit=10):  # async paging
            print("recent:", run.id, run.status)
            break

        async with client.browsers.create(timeout_minutes=5) as browser:  # stopped when the block ends
            print("browser", browser.status)


asyncio.run(main())
