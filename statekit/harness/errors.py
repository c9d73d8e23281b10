"""Errors the harness answers with: an HTTP status plus ``{"error": {"code", "message"}}``.

The message says what was wrong and what to do, like every statekit error; the code is stable, for
programs. Errors the agent causes inside an episode (an unknown tool, bad arguments) are not here:
those are ordinary steps with an error observation, exactly as in-process.
"""

from __future__ import annotations

from statekit.contract import JSON


class ApiError(Exception):
    """A request the harness refuses; ``status`` is 4xx for the caller's mistakes, 5xx for its own."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, JSON]:
        return error_body(self.code, self.message)


def error_body(code: str, message: str) -> dict[str, JSON]:
    return {"error": {"code": code, "message": message}}
