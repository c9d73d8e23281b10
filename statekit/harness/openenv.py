"""OpenEnv's WebSocket protocol at ``/ws``, so OpenEnv's own client drives a statekit environment.

The messages are those of OpenEnv (``openenv.core.env_server.http_server``; openenv 0.10, as in 0.3)::

    client                                           server
    {"type": "reset", "data": {"seed": 7, ...}}      {"type": "observation", "data": {...}}
    {"type": "step", "data": ACTION}                 {"type": "observation", "data": {...}}
    {"type": "state"}                                {"type": "state", "data": {...}}
    {"type": "close"}                                (closes the socket)
    (anything that fails)                            {"type": "error", "data": {"message", "code"}}

An observation message carries ``{"observation", "reward", "done"}`` as OpenEnv's client reads it.
OpenEnv has one ``done``; statekit's is ``terminated or truncated``, and statekit's own
``terminated``, ``truncated`` and ``info`` ride along in ``data`` (OpenEnv's clients ignore keys they
do not read). On reset, ``reward`` is null, as in OpenEnv. Reset keys other than ``seed`` and
``options`` (OpenEnv's ``episode_id``) are ignored, as OpenEnv's server ignores keyword arguments an
environment does not take. State is statekit's ``State``, a superset of OpenEnv's (``episode_id``,
``step_count``). One connection is one session: it counts toward ``max_sessions``, is never reaped
while the socket is open, and closes with it.
"""

from __future__ import annotations

import json
import logging
from contextlib import suppress

from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocket, WebSocketDisconnect

from statekit.contract import JSON
from statekit.harness.errors import ApiError
from statekit.harness.models import reset_arguments
from statekit.harness.sessions import SessionPool

log = logging.getLogger(__name__)

# OpenEnv's WSErrorCode values (openenv.core.env_server.types); OpenEnv itself is not a dependency.
INVALID_JSON = "INVALID_JSON"
UNKNOWN_TYPE = "UNKNOWN_TYPE"
VALIDATION_ERROR = "VALIDATION_ERROR"
EXECUTION_ERROR = "EXECUTION_ERROR"
CAPACITY_REACHED = "CAPACITY_REACHED"
FACTORY_ERROR = "FACTORY_ERROR"
SESSION_ERROR = "SESSION_ERROR"


def _error(code: str, message: str, statekit_code: str | None = None) -> dict[str, JSON]:
    data: dict[str, JSON] = {"message": message, "code": code}
    if statekit_code:
        data["statekit_code"] = statekit_code
    return {"type": "error", "data": data}


def _from_api_error(exc: ApiError) -> dict[str, JSON]:
    if exc.code == "too_many_sessions":
        code = CAPACITY_REACHED
    elif exc.code == "environment_unavailable":
        code = FACTORY_ERROR
    elif exc.code.startswith("invalid_"):
        code = VALIDATION_ERROR
    elif exc.status in (404, 410):
        code = SESSION_ERROR
    else:
        code = EXECUTION_ERROR
    return _error(code, exc.message, exc.code)


def answer(pool: SessionPool, session_id: str, raw: str) -> dict[str, JSON] | None:
    """The reply to one client message, or None for ``close``. Runs in a worker thread."""
    try:
        message = json.loads(raw)
    except ValueError as exc:
        return _error(INVALID_JSON, f"Invalid JSON: {exc}")
    except RecursionError:  # the decoder's recursion limit: an attack or a bug, never an action
        return _error(INVALID_JSON, "Invalid JSON: nested too deeply for this server to decode")
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        return _error(
            VALIDATION_ERROR, 'a message is a JSON object with a "type": reset, step, state or close'
        )
    kind = message["type"]
    if kind == "close":
        return None
    if kind not in ("reset", "step", "state"):
        return _error(
            UNKNOWN_TYPE, f"Unknown message type: {kind}; this server speaks reset, step, state, close"
        )
    if kind == "step" and "data" not in message:
        return _error(VALIDATION_ERROR, 'a step message carries the action in "data"')
    try:
        with pool.use(session_id) as session:
            if kind == "reset":
                seed, options = reset_arguments(message.get("data", {}))
                observation, info = session.reset(seed, options)
                return {
                    "type": "observation",
                    "data": {"observation": observation, "reward": None, "done": False, "info": info},
                }
            if kind == "step":
                observation, reward, terminated, truncated, info = session.env.step(message["data"])
                data = {
                    "observation": observation,
                    "reward": reward,
                    "done": terminated or truncated,
                    "terminated": terminated,
                    "truncated": truncated,
                    "info": info,
                }
                return {"type": "observation", "data": data}
            return {"type": "state", "data": session.env.state().as_dict()}
    except ApiError as exc:
        return _from_api_error(exc)
    except Exception as exc:  # an adapter bug: report it, keep the connection (as OpenEnv does)
        log.exception("WebSocket %s message failed in session %s", kind, session_id)
        return _error(EXECUTION_ERROR, f"{type(exc).__name__}: {exc}")


async def serve_socket(websocket: WebSocket, pool: SessionPool) -> None:
    """One OpenEnv connection: open a pinned session, answer messages in order, close it at the end."""
    await websocket.accept()
    try:
        session = await run_in_threadpool(pool.open, pinned=True)
    except ApiError as exc:
        await websocket.send_text(json.dumps(_from_api_error(exc)))
        await websocket.close(code=1013 if exc.status == 429 else 1011)
        return
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            raw = message.get("text")
            if raw is None:
                raw = (message.get("bytes") or b"").decode("utf-8", errors="replace")
            reply = await run_in_threadpool(answer, pool, session.id, raw)
            if reply is None:
                break
            await websocket.send_text(json.dumps(reply))
    except WebSocketDisconnect:
        pass
    finally:
        with suppress(ApiError):
            await run_in_threadpool(pool.close, session.id)
        with suppress(Exception):  # the client may be gone already
            await websocket.close()
