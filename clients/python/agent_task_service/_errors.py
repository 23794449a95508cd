"""The exceptions the SDK raises: one class per HTTP status family, each printing status, detail and request id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from ._models import ValidationErrorItem

__all__ = [
    "AgentTaskServiceError",
    "APIError",
    "APIStatusError",
    "BadRequestError",
    "AuthenticationError",
    "NotFoundError",
    "ConflictError",
    "UnprocessableEntityError",
    "RateLimitError",
    "InternalServerError",
    "APIConnectionError",
    "APITimeoutError",
    "WaitTimeoutError",
]


class AgentTaskServiceError(Exception):
    """Base of every exception this SDK raises."""


class APIError(AgentTaskServiceError):
    """A call to the service failed; `status` is None when no HTTP answer came back."""

    status: Optional[int]
    detail: str
    request_id: Optional[str]
    method: Optional[str]
    path: Optional[str]

    def __init__(
        self,
        detail: str,
        *,
        status: Optional[int] = None,
        request_id: Optional[str] = None,
        method: Optional[str] = None,
        path: Optional[str] = None,
    ) -> None:
        self.status = status
        self.detail = detail
        self.request_id = request_id
        self.method = method
        self.path = path
        super().__init__(str(self))

    def __str__(self) -> str:
        # Only what the request said in the open: method and path, never headers (the key) or a query (a presigned link's signature).
        where = f"{self.method} {self.path}: " if self.method and self.path else ""
        status = f"{self.status} " if self.status is not None else ""
        rid = f" (request id {self.request_id})" if self.request_id else ""
        return f"{where}{status}{self.detail}{rid}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class APIStatusError(APIError):
    """The service answered with an error status (`status` is set); a subclass names the common ones."""

    body: Any

    def __init__(
        self,
        detail: str,
        *,
        status: int,
        request_id: Optional[str] = None,
        method: Optional[str] = None,
        path: Optional[str] = None,
        body: Any = None,
    ) -> None:
        self.body = body
        super().__init__(detail, status=status, request_id=request_id, method=method, path=path)


class BadRequestError(APIStatusError):
    """400: the request cannot be done as asked (e.g. workspace_id on browser-agent)."""


class AuthenticationError(APIStatusError):
    """401: the API key is missing, unknown or revoked."""


class NotFoundError(APIStatusError):
    """404: no such resource in this project (another project's resources are 404 too)."""


class ConflictError(APIStatusError):
    """409: the resource's state does not allow it (e.g. stopping a run that already ended)."""


class UnprocessableEntityError(APIStatusError):
    """422: the request failed validation; `errors` holds the items ({type, loc, msg, input})."""

    errors: "list[ValidationErrorItem]"

    def __init__(self, detail: str, *, errors: "list[ValidationErrorItem]", **kwargs: Any) -> None:
        self.errors = errors
        super().__init__(detail, **kwargs)


class RateLimitError(APIStatusError):
    """429: a project limit is reached; `retry_after` is the server's hint in seconds, if any."""

    retry_after: Optional[float]

    def __init__(self, detail: str, *, retry_after: Optional[float] = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        super().__init__(detail, **kwargs)


class InternalServerError(APIStatusError):
    """5xx: the service failed or a service it needs is unavailable; quote the request id."""


class APIConnectionError(APIError):
    """No HTTP answer: the connection was refused, broken or reset."""

    def __init__(self, detail: str = "Connection error", *, method: Optional[str] = None, path: Optional[str] = None) -> None:
        super().__init__(detail, method=method, path=path)


class APITimeoutError(APIConnectionError):
    """No HTTP answer within the client's timeout."""

    def __init__(self, detail: str = "Request timed out", *, method: Optional[str] = None, path: Optional[str] = None) -> None:
        super().__init__(detail, method=method, path=path)


class WaitTimeoutError(AgentTaskServiceError, TimeoutError):
    """`runs.wait` gave up: the run had not ended within the timeout (it goes on running)."""

    run_id: str
    last_status: Optional[str]
    timeout: float

    def __init__(self, run_id: str, timeout: float, last_status: Optional[str]) -> None:
        self.run_id = run_id
        self.timeout = timeout
        self.last_status = last_status
        super().__init__(f"run {run_id} did not end within {timeout:g} s (last status: {last_status or 'unknown'})")
