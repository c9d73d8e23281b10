"""Serve an ASGI app on loopback from a background thread (vendor stubs, the harness in tests)."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from statekit.errors import StatekitError

KEEP_ALIVE_SECONDS = 65
"""How long statekit's servers keep an idle connection open: longer than an HTTP client keeps one
for reuse (httpx: 5 s, uvicorn's own default too). With both at 5 s, a client reusing a connection
just as the server closes it gets a reset instead of an answer (it failed a NeMo Gym rollout's
step in a CI run), and a step, not being idempotent, cannot simply be sent again."""


class ThreadedServer:
    """uvicorn on 127.0.0.1 with an OS-chosen port; ``url`` is known once ``start()`` returns."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="statekit-server", daemon=True)
        self.url = ""

    def start(self, timeout: float = 10.0) -> ThreadedServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise StatekitError("the loopback server did not start")
            time.sleep(0.01)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        """Stop serving and join the thread. Safe to call twice."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
