"""Domain errors. Each carries the HTTP status and the stable error code the API returns."""


class AppError(Exception):
    """Base for errors the API turns into ``{"error": {"code", "message"}}`` responses."""

    status_code = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class Unauthorized(AppError):
    status_code = 401
    code = "unauthorized"


class Forbidden(AppError):
    status_code = 403
    code = "forbidden"


class NotFound(AppError):
    status_code = 404
    code = "not_found"


class Conflict(AppError):
    """The request is valid but the claim's current state does not allow it."""

    status_code = 409
    code = "conflict"


class PayloadTooLarge(AppError):
    status_code = 413
    code = "payload_too_large"


class RuleViolation(AppError):
    """A business rule (filing window, policy period, coverage, ...) forbids the action."""

    status_code = 422
    code = "rule_violation"


class IntegrationError(AppError):
    """A vendor call failed or answered nonsense; surfaced as 502, never as a 500."""

    status_code = 502
    code = "integration_failed"
