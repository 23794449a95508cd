# examples/errors.py: errors are exceptions by status, each with the service's detail and request id.
from agent_task_service import (
    AgentTaskService,
    APIConnectionError,
    APIError,
    ConflictError,
    NotFoundError,
    UnprocessableEntityError,
)

client = AgentTaskService()

try:
    client.runs.get("run_does_not_exist")
except NotFoundError as err:
    print(err.status, err.detail, "| request id:", err.request_id is not None)

try:
    client.runs.create("Read the heading.", browser={"profile": "prf_typo"})
except UnprocessableEntityError as err:
    for item in err.errors:
        print(err.status, ".".join(map(str, item.loc)), "->", item.msg)

run = client.runs.wait(client.runs.create("Answer 'done'."))
try:
    client.runs.stop(run)
except ConflictError as err:
    print(err.status, err.detail)

try:
    AgentTaskService(base_url="http://127.0.0.1:9", max_retries=0).agents.list()
except APIConnectionError as err:
    print("no connection:", type(err).__name__)
except APIError as err:  # the base class of them all
    print("failed:", err)
