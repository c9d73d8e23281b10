"""The HTTP API's request and response bodies, so the OpenAPI document describes it exactly.

Requests are strict (``"7"`` is not a seed, ``true`` is not an integer) and reject unknown fields, so
a typo is an error rather than silently ignored. An action is any JSON: judging it is the
environment's job, and a bad one is an ordinary step with an error observation, as in-process.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from statekit.contract import JSON
from statekit.harness.errors import ApiError

MAX_SEED = 2**63 - 1
"""Seeds fit a signed 64-bit integer, so every client language (and numpy) can hold one."""


def reset_arguments(data: Any) -> tuple[int | None, dict[str, JSON] | None]:
    """``seed`` and ``options`` of a reset sent as loose JSON (OpenEnv's ``/ws``, MCP's
    ``statekit_reset``), held to ``ResetRequest``'s rules; a 422 ``invalid_reset`` names what is wrong."""
    if not isinstance(data, dict):
        raise ApiError(422, "invalid_reset", 'reset\'s data is a JSON object, e.g. {"seed": 7}')
    seed, options = data.get("seed"), data.get("options")
    if seed is not None and (
        not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED
    ):
        raise ApiError(
            422, "invalid_reset", f"seed must be null or an integer from 0 to {MAX_SEED}, got {seed!r}"
        )
    if options is not None and not isinstance(options, dict):
        raise ApiError(422, "invalid_reset", f"options must be a JSON object, got {type(options).__name__}")
    return seed, options


SessionId = Annotated[str, Field(min_length=1, max_length=128, description="from POST /reset")]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ResetRequest(_Request):
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] | None = Field(
        default=None, description="the world to start in; null picks one at random"
    )
    options: dict[str, Any] | None = Field(default=None, description='adapter options, e.g. {"task": kind}')
    session_id: SessionId | None = Field(
        default=None, description="reset this session instead of opening one"
    )


class StepRequest(_Request):
    session_id: SessionId
    action: Any = Field(description='{"tool": NAME, ...arguments}; see GET /schema')


class SessionRequest(_Request):
    session_id: SessionId


class RestoreRequest(_Request):
    session_id: SessionId
    snapshot_id: Annotated[str, Field(min_length=1, max_length=128)]


class ImportRequest(_Request):
    episode: Annotated[str, Field(min_length=1, description="what POST /export returned (base64)")]
    session_id: SessionId | None = Field(
        default=None, description="the session to continue it in; omitted: a new session is opened"
    )


class ExportResponse(BaseModel):
    episode: str = Field(description="the live episode as base64 bytes: POST /import continues it elsewhere")


class ResetResponse(BaseModel):
    session_id: str
    observation: Any
    info: dict[str, Any]


class StepResponse(BaseModel):
    observation: Any
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class StateResponse(BaseModel):
    episode_id: str
    step_count: int
    seed: int
    clock: str
    digest: str


class SnapshotResponse(BaseModel):
    snapshot_id: str


class ClosedResponse(BaseModel):
    session_id: str
    closed: bool


class HealthResponse(BaseModel):
    status: str = Field(
        description='"healthy", or "unhealthy" (HTTP 503) while the worlds\' database is down'
    )
    reason: str | None = Field(default=None, description="why it is unhealthy")
    database_restarts: int = Field(
        default=0, description="times the worlds' database came back after it died (its worlds were dropped)"
    )
    adapter: str
    sessions: int
    max_sessions: int
    num_worlds: int | None = Field(default=None, description="seedless resets draw from this many worlds")
    start_seed: int = Field(default=0, description="the first seed of that world set")
    workers: int = 0
    """Live worker processes (0: sessions run in the serving process)."""
    spec: dict[str, Any] = Field(default_factory=dict, description="the EnvSpec every session is made from")


class MetadataResponse(BaseModel):
    """OpenEnv's environment metadata (``GET /metadata``), plus what a trainer logs with its runs."""

    name: str
    description: str
    version: str
    task_kinds: list[str] = Field(description="what reset(options={'task': KIND}) accepts")
    strategies: list[str] = Field(description="the reset strategies the adapter offers")
    spec: dict[str, Any] = Field(description="the environment spec this server runs (EnvSpec.as_dict)")


class SchemaResponse(BaseModel):
    action: dict[str, Any]
    observation: dict[str, Any]
    state: dict[str, Any]


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorResponse(BaseModel):
    error: ErrorDetail
