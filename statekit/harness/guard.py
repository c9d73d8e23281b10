"""The ASGI guard in front of every route: bearer-token auth and a request-body limit.

It runs before FastAPI sees the request, so an unauthenticated or oversized request never reaches an
environment. Tokens are compared with ``hmac.compare_digest`` (no timing leak). ``Basic`` auth with
the token as password is accepted too: that is how a WebSocket client that cannot set headers, such
as OpenEnv's, authenticates (``http://user:TOKEN@host:port``). ``/health`` stays open for probes.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from statekit.harness.errors import error_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/health"})


def presented_token(authorization: str) -> str | None:
    """The secret in an ``Authorization`` header: a Bearer token, or a Basic password."""
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() == "bearer":
        return credentials.strip()
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2]
    return None


def is_authorized(authorization: str, token: str) -> bool:
    presented = presented_token(authorization)
    return presented is not None and hmac.compare_digest(presented.encode(), token.encode())


class Guard:
    """Wraps an ASGI app: 401 without the token (when one is set), 413 for a body over the limit."""

    def __init__(self, app: ASGIApp, *, token: str | None, max_body_bytes: int) -> None:
        self.app = app
        self.token = token
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not self._admits(scope["path"], headers.get("authorization", "")):
            await self._refuse(scope, receive, send, 401, "unauthorized", self._auth_hint())
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)  # message size is bounded by the server's ws_max_size
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._refuse(scope, receive, send, 413, "body_too_large", self._size_hint(int(declared)))
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > self.max_body_bytes:
                await self._refuse(scope, receive, send, 413, "body_too_large", self._size_hint(len(body)))
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(bytes(body), receive), send)

    def _admits(self, path: str, authorization: str) -> bool:
        return self.token is None or path in OPEN_PATHS or is_authorized(authorization, self.token)

    def _auth_hint(self) -> str:
        return "this harness needs its token: send 'Authorization: Bearer <token>'"

    def _size_hint(self, size: int) -> str:
        return f"the request body is {size} bytes or more; this harness accepts at most {self.max_body_bytes}"

    @staticmethod
    async def _refuse(
        scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str
    ) -> None:
        payload = json.dumps(error_body(code, message)).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="statekit"'))
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            if "websocket.http.response" in scope.get("extensions", {}):
                await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
                await send({"type": "websocket.http.response.body", "body": payload})
            else:
                await send({"type": "websocket.close", "code": 1008, "reason": code})
            return
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the app the already-read body, then defers to the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
