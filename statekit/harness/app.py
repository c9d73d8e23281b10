"""The harness as a FastAPI app: stateful HTTP routes over a session pool, plus OpenEnv's ``/ws``.

Routes are plain ``def`` functions, so FastAPI runs them in its thread pool: environment calls are
synchronous, and a slow reset in one session never stalls the event loop or another session. Every
error, including FastAPI's own, is answered as ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

import asyncio
import base64
import faulthandler
import inspect
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

from fastapi import Body, FastAPI, Query, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from statekit.capabilities import ToolSchemas
from statekit.errors import ConfigError
from statekit.harness.config import HarnessConfig
from statekit.harness.errors import ApiError, error_body
from statekit.harness.guard import Guard
from statekit.harness.mcp import install_mcp
from statekit.harness.models import (
    ClosedResponse,
    ErrorResponse,
    ExportResponse,
    HealthResponse,
    ImportRequest,
    MetadataResponse,
    ResetRequest,
    ResetResponse,
    RestoreRequest,
    SchemaResponse,
    SessionId,
    SessionRequest,
    SnapshotResponse,
    StateResponse,
    StepRequest,
    StepResponse,
)
from statekit.harness.openenv import serve_socket
from statekit.harness.schemas import environment_schemas
from statekit.harness.sessions import Session, SessionEnvironment, SessionPool
from statekit.harness.worker import make_environment
from statekit.harness.workers import WorkerPool
from statekit.strategies.base import Health

log = logging.getLogger(__name__)

SLOW_SHUTDOWN = 20.0
"""Seconds of shutdown after which the harness prints every thread's stack to stderr (and goes on)."""

ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse} for status in (400, 401, 404, 409, 410, 413, 422, 429, 500, 503)
}


def _links(**targets: dict[str, Any]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI links (which response field feeds which request): docs, and stateful fuzzing."""
    return {**ERRORS, 200: {"links": targets}}


_FROM_SESSION = {"requestBody": {"session_id": "$response.body#/session_id"}}
_SESSION_LINKS = _links(
    step={"operationId": "step", **_FROM_SESSION},
    state={"operationId": "state", "parameters": {"query.session_id": "$response.body#/session_id"}},
    snapshot={"operationId": "snapshot", **_FROM_SESSION},
    reset_again={"operationId": "reset", **_FROM_SESSION},
    close={"operationId": "close_session", "parameters": {"query.session_id": "$response.body#/session_id"}},
)


def _reaper_interval(idle_timeout: float) -> float:
    return min(max(idle_timeout / 4, 0.05), 30.0)


def create_app(config: HarnessConfig, *, clock: Callable[[], float] = time.monotonic) -> FastAPI:
    """The harness for ``config``; ``clock`` (seconds, monotonic) decides when a session is idle.

    The adapter is resolved once here, so a wrong name or strategy fails at start, not per session.
    The session pool is ``app.state.sessions``; with ``config.workers`` > 0 the worker processes
    (``app.state.workers``) start with the app's lifespan and stop after every session is closed.
    """
    spec = config.env
    probe = spec.resolve_adapter()
    try:
        if spec.strategy is not None and spec.strategy not in probe.strategies:
            raise ConfigError(
                f"adapter {probe.name!r} offers strategies {list(probe.strategies)}, not {spec.strategy!r}"
            )
        unknown = sorted(set(spec.exclude_tasks) - set(probe.task_kinds()))
        if unknown:
            raise ConfigError(
                f"exclude_tasks names unknown task kinds {unknown}; {probe.name!r} has {probe.task_kinds()}"
            )
        adapter_name, schemas = probe.name, environment_schemas(probe)
        metadata = MetadataResponse(
            name=probe.name,
            description=inspect.getdoc(type(probe)) or f"the {probe.name} environment",
            version=_version(),
            task_kinds=list(probe.task_kinds()),
            strategies=list(probe.strategies),
            spec=spec.as_dict(),
        )
        declared = (
            [tool.as_dict() for tool in probe.declared_tools()] if isinstance(probe, ToolSchemas) else []
        )
    finally:
        probe.close()

    workers = (
        WorkerPool(config, config.workers, on_lost=lambda: pool.forget_lost()) if config.workers else None
    )

    def make_env() -> SessionEnvironment:
        if workers is not None:
            return workers.open()
        return make_environment(config)

    pool = SessionPool(
        make_env, max_sessions=config.max_sessions, idle_timeout=config.idle_timeout, clock=clock
    )
    health: dict[str, Any] = {"ask": None, "seen": Health()}
    """``ask`` (in-process: the keeper's health) or ``seen`` (workers: their last answer)."""
    watching: list[asyncio.Task[None]] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # In-process sessions: one environment for the server's lifetime, never a session's. Making it
        # sweeps what dead processes left (copies, builds, fork goldens) before the first session
        # arrives, and it holds the database server so the embedded one is not stopped whenever the
        # last session closes. Worker processes each keep such an environment themselves.
        keeper: SessionEnvironment | None = None
        stopping = asyncio.Event()  # set when the server shuts down: every watcher ends at its next look
        if workers is not None:
            await run_in_threadpool(workers.start)
            watching.append(asyncio.create_task(_poll_health(workers.health, health, stopping)))
        else:
            keeper = await run_in_threadpool(make_env)
            health["ask"] = keeper.health  # in this process: a fact the strategy keeps, no round trip
        if config.idle_timeout:
            watching.append(asyncio.create_task(_reap_forever(pool, config.idle_timeout, stopping)))
        try:
            yield
        finally:
            # a shutdown still closing worlds after SLOW_SHUTDOWN prints every thread's stack (what it
            # waits for); an orchestrator's SIGKILL would otherwise end it without a word
            faulthandler.dump_traceback_later(SLOW_SHUTDOWN, file=sys.stderr)
            try:
                await _close(pool, workers, keeper, watching, stopping)
            finally:
                faulthandler.cancel_dump_traceback_later()

    app = FastAPI(
        title=f"statekit harness: {adapter_name}",
        description="Stateful sessions over one statekit environment; OpenEnv's WebSocket protocol at /ws; "
        "MCP (Streamable HTTP, JSON responses) at /mcp.",
        version=_version(),
        lifespan=lifespan,
    )
    app.state.sessions = pool
    app.state.workers = workers
    _install_error_handlers(app)

    def begin(session_id: str | None, start: Callable[[Session], tuple[Any, dict]]) -> ResetResponse:
        """Start an episode in ``session_id``'s session, or in a new one (closed again if it fails)."""
        if session_id is not None:
            with pool.use(session_id) as session:
                observation, info = start(session)
            return ResetResponse(session_id=session.id, observation=observation, info=info)
        session = pool.open()
        try:
            with pool.use(session.id):
                observation, info = start(session)
        except BaseException:
            with suppress(ApiError):
                pool.close(session.id)
            raise
        return ResetResponse(session_id=session.id, observation=observation, info=info)

    @app.post("/reset", operation_id="reset", response_model=ResetResponse, responses=_SESSION_LINKS)
    def reset(body: Annotated[ResetRequest, Body(default_factory=ResetRequest)]) -> ResetResponse:
        """Open a session (or reset ``session_id``'s) and start an episode in the seed's world."""
        return begin(body.session_id, lambda session: session.reset(body.seed, body.options))

    @app.post("/step", operation_id="step", response_model=StepResponse, responses=ERRORS)
    def step(body: StepRequest) -> JSONResponse:
        """Apply one action; a bad action is a normal step with an error observation. The answer is
        ``StepResponse``'s fields sent as they are: the environment's values are JSON already (``/ws``
        sends the same with ``json.dumps``), and validating them again cost ~0.2 ms a step."""
        with pool.use(body.session_id) as session:
            observation, reward, terminated, truncated, info = session.env.step(body.action)
        return JSONResponse(
            {"observation": observation, "reward": reward, "terminated": terminated,
             "truncated": truncated, "info": info}
        )  # fmt: skip

    @app.get("/state", operation_id="state", response_model=StateResponse, responses=ERRORS)
    def state(session_id: Annotated[SessionId, Query()]) -> StateResponse:
        """Episode id, step count, seed, virtual clock and the world's digest."""
        with pool.use(session_id) as session:
            return StateResponse(**session.env.state().as_dict())

    @app.get("/dump", operation_id="dump", responses=ERRORS)
    def dump(session_id: Annotated[SessionId, Query()]) -> dict[str, Any]:
        """The canonical rows of the session's world (``statekit diff --url`` compares two)."""
        with pool.use(session_id) as session:
            return session.env.dump().as_dict()

    @app.post(
        "/snapshot",
        operation_id="snapshot",
        response_model=SnapshotResponse,
        responses=_links(
            restore={
                "operationId": "restore",
                "requestBody": {
                    "session_id": "$request.body#/session_id",
                    "snapshot_id": "$response.body#/snapshot_id",
                },
            }
        ),
    )
    def snapshot(body: SessionRequest) -> SnapshotResponse:
        """Capture the session's world and episode; restore it (any number of times) later."""
        with pool.use(body.session_id) as session:
            return SnapshotResponse(snapshot_id=session.snapshot())

    @app.post("/restore", operation_id="restore", response_model=ResetResponse, responses=_SESSION_LINKS)
    def restore(body: RestoreRequest) -> ResetResponse:
        """Continue the session from one of its snapshots, in a fresh copy."""
        with pool.use(body.session_id) as session:
            observation, info = session.restore(body.snapshot_id)
        return ResetResponse(session_id=session.id, observation=observation, info=info)

    @app.post("/export", operation_id="export_episode", response_model=ExportResponse, responses=ERRORS)
    def export_episode(body: SessionRequest) -> ExportResponse:
        """The session's live episode as bytes (base64) that ``POST /import`` continues, here or on any
        server of the same environment; the episode goes on here too."""
        with pool.use(body.session_id) as session:
            return ExportResponse(episode=base64.b64encode(session.export_episode()).decode())

    @app.post(
        "/import", operation_id="import_episode", response_model=ResetResponse, responses=_SESSION_LINKS
    )
    def import_episode(body: ImportRequest) -> ResetResponse:
        """Continue an exported episode in ``session_id``'s session, or in a new one."""
        try:
            blob = base64.b64decode(body.episode, validate=True)
        except ValueError as exc:
            raise ApiError(422, "invalid_episode", f"episode is not base64: {exc}") from exc
        return begin(body.session_id, lambda session: session.import_episode(blob))

    @app.delete("/session", operation_id="close_session", response_model=ClosedResponse, responses=ERRORS)
    def close_session(
        session_id: Annotated[SessionId | None, Query()] = None,
        body: Annotated[SessionRequest | None, Body()] = None,
    ) -> ClosedResponse:
        """Close a session and drop its worlds (``session_id`` in the query or the body)."""
        chosen = session_id or (body.session_id if body is not None else None)
        if chosen is None:
            raise ApiError(
                422, "invalid_request", "say which session to close: DELETE /session?session_id=..."
            )
        pool.close(chosen)
        return ClosedResponse(session_id=chosen, closed=True)

    @app.get(
        "/health",
        operation_id="health",
        response_model=HealthResponse,
        responses={503: {"model": HealthResponse, "description": "the worlds' database is down"}},
    )
    async def health_route() -> JSONResponse:
        """Liveness, for probes (open even when a token is set): 503 with a reason while the worlds'
        database is down (statekit restarts an embedded one by itself). On the event loop, not in the
        thread pool: a probe must answer while every worker thread is busy resetting worlds."""
        ask = health["ask"]
        seen: Health = ask() if ask is not None else health["seen"]
        reason = seen.down
        body = HealthResponse(
            status="healthy" if reason is None else "unhealthy",
            reason=reason,
            database_restarts=seen.restarts,
            adapter=adapter_name,
            sessions=len(pool),
            max_sessions=pool.max_sessions,
            num_worlds=spec.num_worlds,
            start_seed=spec.start_seed,
            spec=spec.as_dict(),
            workers=len(workers) if workers is not None else 0,
        )
        return JSONResponse(body.model_dump(), status_code=200 if reason is None else 503)

    @app.get("/schema", operation_id="schema", response_model=SchemaResponse, responses=ERRORS)
    def schema() -> SchemaResponse:
        """JSON Schemas of this environment's actions, observations and state."""
        return SchemaResponse(**schemas)

    @app.get("/metadata", operation_id="metadata", response_model=MetadataResponse)
    def metadata_route() -> MetadataResponse:
        """What this environment is (OpenEnv's metadata: name, description), its task kinds and spec."""
        return metadata

    install_mcp(
        app, pool, declared=declared, server={"name": f"statekit-{adapter_name}", "version": _version()}
    )

    @app.websocket("/ws")
    async def openenv(websocket: WebSocket) -> None:
        await serve_socket(websocket, pool)

    app.add_middleware(Guard, token=config.token, max_body_bytes=config.max_body_bytes)
    return app


HEALTH_INTERVAL = 0.25
"""Seconds between the front's questions to its workers about their database."""


async def _poll_health(ask: Callable[[], Health], health: dict[str, Any], stopping: asyncio.Event) -> None:
    """Ask the workers for their health every ``HEALTH_INTERVAL`` until ``stopping``. Not
    ``asyncio.wait_for``: on Python 3.11 it swallows a cancellation that arrives as the call it waits
    for completes, and this loop, asking four times a second, then kept a shutdown waiting forever."""
    while not stopping.is_set():
        try:
            async with asyncio.timeout(10):
                health["seen"] = await run_in_threadpool(ask)
        except Exception:
            log.exception("asking the harness workers for their health failed; asking again")
        await _pause(stopping, HEALTH_INTERVAL)


async def _pause(stopping: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``stopping`` is set meanwhile."""
    with suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stopping.wait()


async def _close(
    pool: SessionPool,
    workers: WorkerPool | None,
    keeper: SessionEnvironment | None,
    watching: list[asyncio.Task[None]],
    stopping: asyncio.Event,
) -> None:
    """The harness's shutdown: its watchers (told to stop, and cancelled: either ends them), then
    every session, the workers, the keeper."""
    stopping.set()
    for task in watching:
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task
    await run_in_threadpool(pool.close_all)
    if workers is not None:
        await run_in_threadpool(workers.close)
    if keeper is not None:
        await run_in_threadpool(keeper.close)


async def _reap_forever(pool: SessionPool, idle_timeout: float, stopping: asyncio.Event) -> None:
    interval = _reaper_interval(idle_timeout)
    while not stopping.is_set():
        await _pause(stopping, interval)
        if stopping.is_set():
            return
        try:
            await run_in_threadpool(pool.reap)
        except Exception:
            log.exception("the idle-session reaper failed; it will try again")


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = exc.errors()
        if any(p.get("type") == "json_invalid" for p in problems):
            return JSONResponse(
                error_body("malformed_json", "the request body is not valid JSON"), status_code=400
            )
        described = "; ".join(_describe(p) for p in problems[:5]) or "the request does not match the API"
        return JSONResponse(
            error_body("invalid_request", f"{described} (the API is described at /openapi.json)"),
            status_code=422,
        )

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        codes = {400: "malformed_json", 404: "not_found", 405: "method_not_allowed"}  # 400: FastAPI's parser
        code = codes.get(exc.status_code, f"http_{exc.status_code}")
        message = f"{request.method} {request.url.path}: {exc.detail}"
        if exc.status_code in (404, 405):
            message += "; the routes are listed at /openapi.json"
        return JSONResponse(error_body(code, message), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        message = f"{type(exc).__name__}: {exc} (a bug in the server or its adapter; see the server log)"
        return JSONResponse(error_body("internal_error", message), status_code=500)


def _describe(problem: Any) -> str:
    where = ".".join(str(part) for part in problem.get("loc", ()) if part != "body")
    if not where:
        return "the body must be a JSON object, sent with Content-Type: application/json"
    return f"{where}: {problem.get('msg', 'invalid')}"


def _version() -> str:
    try:
        return version("statekit")
    except PackageNotFoundError:
        return "0"
