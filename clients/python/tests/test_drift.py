"""The SDK against the stack's /openapi.json: a field, parameter, schema or operation the API has and the SDK
lacks (or the other way round), or a nullability that differs, fails here."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Sequence

import httpx
import pytest

import agent_task_service as ats
from schema_drift import Operation, check_model, check_operations

pytestmark = pytest.mark.stack

#: Each schema of components/schemas the SDK models, with its classes (a sync and an async twin where there are two).
MODELS: Dict[str, Sequence[type]] = {
    "Agent": [ats.Agent],
    "AgentList": [ats.AgentList],
    "Model": [ats.Model],
    "ModelList": [ats.ModelList],
    "RunCreated": [ats.RunCreated],
    "Run": [ats.Run],
    "RunStatus": [ats.RunStatus],
    "RunList": [ats.RunList],
    "Step": [ats.Step],
    "StepList": [ats.StepList],
    "Event": [ats.Event],
    "EventList": [ats.EventList],
    "Session": [ats.Session],
    "SessionList": [ats.SessionList],
    "FileUpload": [ats.FileUpload],
    "FileUploadList": [ats.FileUploadList],
    "File": [ats.File, ats.AsyncFile],
    "FileList": [ats.FileList],
    "WorkspaceFileList": [ats.WorkspaceFileList],
    "Workspace": [ats.Workspace],
    "WorkspaceList": [ats.WorkspaceList],
    "Browser": [ats.Browser, ats.AsyncBrowser],
    "BrowserList": [ats.BrowserList],
    "BrowserOptions": [ats.BrowserOptions],
    "Recording": [ats.Recording],
    "LiveViewLink": [ats.LiveViewLink],
    "Download": [ats.Download],
    "DownloadList": [ats.DownloadList],
    "Profile": [ats.Profile],
    "ProfileList": [ats.ProfileList],
    "ValidationErrorItem": [ats.ValidationErrorItem],
    "Health": [ats.Health],
    "ApiKey": [ats.ApiKey],
    "ApiKeyCreated": [ats.ApiKeyCreated],
    "ApiKeyList": [ats.ApiKeyList],
    "Webhook": [ats.Webhook],
    "WebhookWithSecret": [ats.WebhookWithSecret],
    "WebhookList": [ats.WebhookList],
    "WebhookDelivery": [ats.WebhookDelivery],
    "WebhookDeliveryList": [ats.WebhookDeliveryList],
    "RunEventPayload": [ats.RunEventPayload],
    "BrowserEventPayload": [ats.BrowserEventPayload],
    "FileEventPayload": [ats.FileEventPayload],
    "TestEventPayload": [ats.TestEventPayload],
}
#: Request bodies the SDK takes as keyword arguments: checked through OPERATIONS.
KEYWORD_BODIES = {
    "CreateRunRequest",
    "AddFilesRequest",
    "CreateWorkspaceRequest",
    "UpdateWorkspaceRequest",
    "CreateBrowserRequest",
    "CreateLiveViewLinkRequest",
    "CreateProfileRequest",
    "UpdateProfileRequest",
    "CreateApiKeyRequest",
    "CreateWebhookRequest",
    "UpdateWebhookRequest",
    "RotateWebhookSecretRequest",
}
#: Error bodies become exceptions (APIError.detail, UnprocessableEntityError.errors); readiness is for load balancers.
NOT_MODELLED = {"Error", "ValidationError", "Readiness"}

PAGED: Dict[str, Any] = {"ignored": ("cursor",)}
AGENT: Dict[str, Any] = {"defaults": ("agent",)}
RUN = {"runId": "run"}
OPERATIONS: Dict[str, Operation] = {
    "listAgents": Operation("agents", "list"),
    "listModels": Operation("models", "list"),
    "createRun": Operation("runs", "create", sdk_only=("files", "idempotency_key"), **AGENT),
    "listRuns": Operation("runs", "list", **PAGED, **AGENT),
    "getRun": Operation("runs", "get", RUN, **AGENT),
    "getRunStatus": Operation("runs", "status", RUN, **AGENT),
    "stopRun": Operation("runs", "stop", RUN, **AGENT),
    "listSteps": Operation("runs", "steps", RUN, **AGENT),
    "listEvents": Operation("runs", "events", RUN, **AGENT),
    # A stream has no pages: `limit` is the events list's.
    "streamEvents": Operation("runs", "stream", RUN, ignored=("limit",), **AGENT),
    "listRunFiles": Operation("runs", "files", RUN, **PAGED, **AGENT),
    "listSessions": Operation("sessions", "list", **PAGED, **AGENT),
    "getSession": Operation("sessions", "get", **AGENT),
    "addFiles": Operation("files", "create", {"files": "names"}, **AGENT),
    "createWorkspace": Operation("workspaces", "create"),
    "listWorkspaces": Operation("workspaces", "list", **PAGED),
    "getWorkspace": Operation("workspaces", "get"),
    "updateWorkspace": Operation("workspaces", "update"),
    "deleteWorkspace": Operation("workspaces", "delete"),
    "addWorkspaceFiles": Operation("workspaces", "add_files", {"files": "names"}),
    "listWorkspaceFiles": Operation("workspaces", "files", **PAGED),
    "createBrowser": Operation("browsers", "create", {"browser_profile_id": "profile_id"}),
    "listBrowsers": Operation("browsers", "list", **PAGED),
    "getBrowser": Operation("browsers", "get"),
    "stopBrowser": Operation("browsers", "stop"),
    "getRecording": Operation("browsers", "recording"),
    # The SDK's mode defaults to "view", the safer link.
    "createLiveViewLink": Operation("browsers", "live_view_link", defaults=("mode",)),
    "listBrowserDownloads": Operation("browsers", "downloads"),
    "createProfile": Operation("profiles", "create"),
    "listProfiles": Operation("profiles", "list", **PAGED),
    "getProfile": Operation("profiles", "get"),
    "updateProfile": Operation("profiles", "update"),
    "deleteProfile": Operation("profiles", "delete"),
    "createApiKey": Operation("api_keys", "create"),
    "listApiKeys": Operation("api_keys", "list"),
    "revokeApiKey": Operation("api_keys", "revoke"),
    "createWebhook": Operation("webhooks", "create"),
    "listWebhooks": Operation("webhooks", "list", **PAGED),
    "getWebhook": Operation("webhooks", "get"),
    "updateWebhook": Operation("webhooks", "update"),
    "deleteWebhook": Operation("webhooks", "delete"),
    "rotateWebhookSecret": Operation("webhooks", "rotate_secret"),
    "listWebhookDeliveries": Operation("webhooks", "deliveries", **PAGED),
    "redeliverWebhook": Operation("webhooks", "redeliver"),
    "testWebhook": Operation("webhooks", "test"),
    "health": Operation(None, "health"),
}
NOT_COVERED = {"readiness"}
CLIENTS = [ats.AgentTaskService, ats.AsyncAgentTaskService]


@pytest.fixture(scope="module")
def document(stack) -> Dict[str, Any]:
    response = httpx.get(f"{stack.base_url}/openapi.json", timeout=30)
    response.raise_for_status()
    return response.json()


def drift(doc: Dict[str, Any]) -> List[str]:
    """Every difference between the SDK and `doc`."""
    problems: List[str] = []
    schemas = doc["components"]["schemas"]
    accounted = set(MODELS) | KEYWORD_BODIES | NOT_MODELLED
    problems += [f"{name}: a schema of the API that the SDK neither models nor names" for name in sorted(set(schemas) - accounted)]
    problems += [f"{name}: the SDK expects a schema the API does not have" for name in sorted(accounted - set(schemas))]
    for name, classes in MODELS.items():
        for cls in classes:
            problems += check_model(doc, name, cls)
    if set(schemas.get("Error", {}).get("properties", {})) != {"detail"}:
        problems.append("Error: the SDK reads {detail} from an error reply")
    if schemas.get("ValidationError", {}).get("properties", {}).get("detail", {}).get("items", {}).get("$ref") != "#/components/schemas/ValidationErrorItem":
        problems.append("ValidationError: the SDK reads detail as a list of ValidationErrorItem")
    problems += check_operations(doc, OPERATIONS, NOT_COVERED, CLIENTS, MODELS)
    return problems


def test_the_sdk_follows_every_schema_and_operation_of_the_api(document: Dict[str, Any]) -> None:
    assert drift(document) == []


@pytest.mark.parametrize(
    "plant, expected",
    [
        (
            lambda d: (d["components"]["schemas"]["Run"]["properties"].__setitem__("queuePosition", {"type": ["integer", "null"]}), d["components"]["schemas"]["Run"]["required"].append("queuePosition")),
            "Run: the API's field 'queuePosition' has no field 'queue_position' in Run",
        ),
        (
            lambda d: d["components"]["schemas"]["Browser"]["properties"]["cdpUrl"].__setitem__("type", "string"),
            "Browser.cdpUrl: Browser.cdp_url is typing.Optional[str]; the API says not Optional",
        ),
        (
            lambda d: d["components"]["schemas"]["Step"]["properties"]["action"].__setitem__("type", ["string", "null"]),
            "Step.action: Step.action is <class 'str'>; the API says Optional[…]",
        ),
        (
            lambda d: d["components"]["schemas"]["Agent"]["properties"]["session"]["properties"].__setitem__("ttl", {"type": "integer"}),
            "Agent.session: the API's field 'ttl' has no field 'ttl' in AgentSession",
        ),
        (
            lambda d: d["components"]["schemas"]["CreateRunRequest"]["properties"].__setitem__("priority", {"type": "integer"}),
            "createRun: AgentTaskService.runs.create has no parameter 'priority' for the API's 'priority'",
        ),
        (
            lambda d: d["paths"]["/api/v1/browsers"]["get"]["parameters"].append({"name": "profile_id", "in": "query", "schema": {"type": "string"}}),
            "listBrowsers: AsyncAgentTaskService.browsers.list has no parameter 'profile_id' for the API's 'profile_id'",
        ),
        (
            lambda d: d["paths"].__setitem__("/api/v1/runs/{runId}/pause", {"post": {"operationId": "pauseRun", "summary": "Pause a run"}}),
            "pauseRun: an operation of the API (Pause a run) that the SDK has no method for",
        ),
        (
            lambda d: d["components"]["schemas"].__setitem__("Invoice", {"type": "object", "properties": {"id": {"type": "string"}}}),
            "Invoice: a schema of the API that the SDK neither models nor names",
        ),
        (
            lambda d: d["components"]["schemas"]["Profile"]["properties"].pop("cookieDomains"),
            "Profile: Profile.cookie_domains is not a field of the API",
        ),
    ],
    ids=["new-field", "nullable-to-required", "required-to-nullable", "nested-field", "new-body-field", "new-query-param", "new-route", "new-schema", "removed-field"],
)
def test_the_checker_catches_a_change_planted_in_a_copy_of_the_document(document: Dict[str, Any], plant, expected: str) -> None:
    planted = copy.deepcopy(document)
    plant(planted)
    problems = drift(planted)
    assert expected in problems, "\n".join(problems)
    assert drift(document) == [], "the live document itself has no drift"
