"""The Model Context Protocol at ``/mcp``: any MCP client lists a session's tools and plays an episode.

MCP's Streamable HTTP transport, answered with JSON (no server-sent events): each POST carries one
JSON-RPC message. ``initialize`` opens a harness session and returns its id in ``Mcp-Session-Id``;
the client sends it back on every later request, and ``DELETE /mcp`` closes the session. The tools
are the episode's own (each call is one ``step``) plus two of statekit's:

- ``statekit_reset`` ``{"seed", "options"}``: start an episode (the seed's world); call it first;
- ``statekit_state``: the episode's state (step count, seed, virtual clock, digest).

A tool result carries the observation as text and, in ``structuredContent``, what a trainer needs:
``observation``, ``reward``, ``terminated``, ``truncated``, ``info``. A malformed tool call is a normal
step with an error observation (as on ``/step``). What the environment could not serve (a reset that
failed, a session lost) is a JSON-RPC error carrying statekit's code, never a result with reward 0,
so a trainer can tell an infrastructure failure from a bad answer.

JSON-RPC errors ride on HTTP 200, as on OpenEnv's own ``/mcp`` (``openenv validate`` posts ``{}`` and
expects a JSON-RPC answer); a request without a session is 400, an unknown or expired session 404
(MCP clients read it as "initialize again"), a protocol version this server does not speak 400 and a
foreign ``Origin`` 403. statekit writes these few methods itself rather than mount the MCP SDK's
server: the SDK answers a malformed message with HTTP 400, and it would add its dependencies to
every server.
"""

from __future__ import annotations

import json
import logging
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from statekit.contract import JSON
from statekit.harness.errors import ApiError
from statekit.harness.models import MAX_SEED, reset_arguments
from statekit.harness.sessions import Session, SessionPool

log = logging.getLogger(__name__)

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""MCP revisions with the ``initialize`` handshake; a client asking for another gets the newest."""
SESSION_HEADER = "Mcp-Session-Id"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
)
SERVER_ERROR = -32000
"""JSON-RPC's implementation-defined range: the environment could not serve the call."""

RESET_TOOL: dict[str, JSON] = {
    "name": "statekit_reset",
    "description": "Start an episode in the seed's world (same seed, same world). Call it first; its "
    "result is the first observation, with the task's prompt.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "seed": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_SEED},
            "options": {"type": ["object", "null"], "description": 'e.g. {"task": KIND}'},
        },
        "additionalProperties": False,
    },
}
STATE_TOOL: dict[str, JSON] = {
    "name": "statekit_state",
    "description": "The episode's state: id, step count, seed, virtual clock and the world's digest.",
    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
    "annotations": {"readOnlyHint": True},
}


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: JSON = None, status: int = 200) -> None:
        super().__init__(message)
        self.code, self.message, self.data, self.status = code, message, data, status


def mcp_tools(tools: list[dict[str, JSON]]) -> list[dict[str, JSON]]:
    """statekit's tool descriptions (``input_schema``) as MCP's (``inputSchema``), statekit's two first."""
    out = [RESET_TOOL, STATE_TOOL]
    for tool in tools:
        entry: dict[str, JSON] = {
            "name": tool["name"],
            "description": tool["description"],
            "inputSchema": tool["input_schema"],
        }
        if "annotations" in tool:
            entry["annotations"] = tool["annotations"]
        out.append(entry)
    return out


def _result(structured: dict[str, Any], *, error: bool = False) -> dict[str, JSON]:
    """A tool result: the whole of it as text too (what a client of an MCP revision before
    ``structuredContent`` reads), made JSON-safe first so an applied step is never answered with an
    encoding error a client would retry."""
    safe = jsonable_encoder(structured)
    return {
        "content": [{"type": "text", "text": json.dumps(safe, sort_keys=True)}],
        "structuredContent": safe,
        "isError": error,
    }


def _call(session: Session, name: str, arguments: dict[str, Any]) -> dict[str, JSON]:
    """One ``tools/call`` in ``session`` (held by the caller)."""
    if name == RESET_TOOL["name"]:
        unknown = sorted(set(arguments) - {"seed", "options"})
        if unknown:
            raise RpcError(INVALID_PARAMS, f"statekit_reset takes seed and options, not {unknown}")
        observation, info = session.reset(*reset_arguments(arguments))
        return _result({"observation": observation, "info": info})
    if name == STATE_TOOL["name"]:
        if arguments:
            raise RpcError(INVALID_PARAMS, "statekit_state takes no arguments")
        return _result(session.env.state().as_dict())
    observation, reward, terminated, truncated, info = session.env.step({**arguments, "tool": name})
    step = {"observation": observation, "reward": reward, "terminated": terminated, "truncated": truncated}
    failed = isinstance(observation, dict) and isinstance(observation.get("error"), dict)
    return _result({**step, "info": info}, error=failed)


def _answer(
    pool: SessionPool, session_id: str, method: str, params: dict[str, Any], declared: list[dict[str, JSON]]
) -> JSON:
    """The result of one request in an initialized session. Runs in a worker thread."""
    if method == "ping":
        with pool.use(session_id):  # an unknown session is 404; a ping keeps a live one from the reaper
            return {}
    if method == "tools/list":
        with pool.use(session_id) as session:
            return {"tools": mcp_tools(session.tools or declared)}
    if method == "tools/call":
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, 'tools/call takes {"name": TOOL, "arguments": {...}}')
        with pool.use(session_id) as session:
            return _call(session, name, arguments)
    raise RpcError(METHOD_NOT_FOUND, f"method {method!r}: this server answers ping, tools/list, tools/call")


def _initialize(
    pool: SessionPool, params: dict[str, Any], server: dict[str, JSON], previous: str | None
) -> tuple[str, JSON]:
    """Open the MCP session's harness session; one the client initializes again is closed first."""
    if previous:
        with suppress(ApiError):
            pool.close(previous)
    asked = params.get("protocolVersion")
    session = pool.open()
    return session.id, {
        "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": server,
        "instructions": "Call statekit_reset with a seed first; then the environment's tools. Each call "
        "is one step; structuredContent carries reward, terminated, truncated and info.",
    }


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _refused_headers(request: Request) -> RpcError | None:
    """MCP's header rules: a protocol version this server does not speak is 400, and a browser page
    from another origin (DNS rebinding) is 403."""
    version = request.headers.get("mcp-protocol-version")
    if version is not None and version not in PROTOCOL_VERSIONS:
        return RpcError(
            INVALID_REQUEST,
            f"MCP-Protocol-Version {version!r}: this server speaks {PROTOCOL_VERSIONS}",
            status=400,
        )
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        return RpcError(INVALID_REQUEST, f"Origin {origin!r} is not this server's", status=403)
    return None


def _error(request_id: JSON, exc: RpcError) -> JSONResponse:
    error: dict[str, JSON] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=exc.status)


def _from_api_error(exc: ApiError) -> RpcError:
    data: JSON = {"statekit_code": exc.code, "status": exc.status}
    if exc.status in (404, 410):
        return RpcError(INVALID_REQUEST, exc.message, data, status=404)
    code = INVALID_PARAMS if exc.code.startswith("invalid_") else SERVER_ERROR
    return RpcError(code, exc.message, data)


def install_mcp(
    app: FastAPI, pool: SessionPool, *, declared: list[dict[str, JSON]], server: dict[str, JSON]
) -> None:
    """Serve MCP at ``/mcp`` over ``pool``'s sessions: ``declared`` are the tools listed before a
    session's first reset (the adapter's ``ToolSchemas``), ``server`` MCP's ``serverInfo``."""

    @app.post("/mcp", include_in_schema=False)
    async def mcp_post(request: Request) -> Response:
        request_id: JSON = None
        try:
            try:
                message = json.loads(await request.body(), parse_constant=_no_constant)
            except (ValueError, RecursionError) as exc:
                raise RpcError(PARSE_ERROR, f"Parse error: {exc}") from exc
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                raise RpcError(INVALID_REQUEST, 'a JSON-RPC 2.0 message: {"jsonrpc": "2.0", "method", ...}')
            if "method" not in message and "id" in message and ("result" in message or "error" in message):
                return Response(status_code=202)  # a response to a request of ours: we never send any
            method, params = message.get("method"), message.get("params", {})
            if not isinstance(method, str) or not isinstance(params, dict):
                raise RpcError(INVALID_REQUEST, "method is a string and params, if any, an object")
            if "id" not in message:  # a notification (initialized, cancelled): nothing to answer
                return Response(status_code=202)
            if type(message["id"]) not in (str, int):
                raise RpcError(INVALID_REQUEST, "a request's id is a string or an integer (MCP: never null)")
            request_id = message["id"]
            refused = _refused_headers(request)
            if refused is not None:
                raise refused
            given = request.headers.get(SESSION_HEADER)
            if method == "initialize":
                session_id, result = await run_in_threadpool(_initialize, pool, params, server, given)
                return JSONResponse(
                    {"jsonrpc": "2.0", "id": request_id, "result": result},
                    headers={SESSION_HEADER: session_id},
                )
            if not given:
                raise RpcError(
                    INVALID_REQUEST, f"no {SESSION_HEADER} header: send initialize first", status=400
                )
            result = await run_in_threadpool(_answer, pool, given, method, params, declared)
            return JSONResponse({"jsonrpc": "2.0", "id": request_id, "result": result})
        except RpcError as exc:
            return _error(request_id, exc)
        except ApiError as exc:
            return _error(request_id, _from_api_error(exc))
        except Exception as exc:  # an adapter bug: report it, keep serving
            log.exception("MCP request failed")
            return _error(request_id, RpcError(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))

    @app.get("/mcp", include_in_schema=False)
    async def mcp_get() -> Response:
        """No server-initiated stream: this server never sends a request or notification of its own."""
        return Response(status_code=405, headers={"Allow": "POST, DELETE"})

    @app.delete("/mcp", include_in_schema=False)
    async def mcp_delete(request: Request) -> Response:
        """End the MCP session: its harness session closes and drops its worlds."""
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id:
            return Response(status_code=400)
        try:
            await run_in_threadpool(pool.close, session_id)
        except ApiError as exc:
            return Response(status_code=404 if exc.status in (404, 410) else exc.status)
        return Response(status_code=200)
