"""``statekit serve``: the harness under uvicorn, on a socket it binds itself (so port 0 works).

The URL is printed once the socket listens, so a caller that asked for port 0 learns the real one.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import logging
import socket
from collections.abc import Callable

import uvicorn

from statekit.errors import ConfigError
from statekit.harness import redact
from statekit.harness.config import HarnessConfig
from statekit.servers import KEEP_ALIVE_SECONDS


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``, or a ConfigError that says what to change."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise ConfigError(f"cannot resolve --host {host!r}: {exc.strerror}") from exc
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror}; pick another --port (0 lets the system choose)"
        ) from exc
    return sock


WS_PROTOCOL = "websockets-sansio"
"""Named, not uvicorn's "auto": "auto" without a WebSocket library serves every /ws request a 404."""


def check_websockets() -> None:
    """uvicorn needs the ``websockets`` library for /ws; say so at start rather than 404 each client."""
    if importlib.util.find_spec("websockets") is None:
        raise ConfigError(
            "statekit serve needs the 'websockets' library for OpenEnv's /ws (a dependency of statekit): "
            "pip install 'websockets>=13', or reinstall statekit"
        )


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


CHATTY_LOGGERS = ("vcr", "httpx", "httpx2")
"""Libraries that log at info on every step: vcrpy each cassette interaction it loads, httpx each
request the in-process app clients send. The server's log keeps their warnings only."""


def serve(
    config: HarnessConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    announce: Callable[[str], None] = lambda line: print(line, flush=True),
    uds: str | None = None,
) -> None:
    """Serve ``config`` until interrupted; on shutdown every session and its worlds are closed.

    ``uds`` serves on a Unix socket instead of TCP: a container with no network at all is driven
    that way, through a socket file in a directory the host mounts.
    """
    from statekit.harness.app import create_app  # FastAPI: not imported by worker processes

    logging.basicConfig(level=log_level.upper(), format="%(levelname)s:     %(name)s: %(message)s")
    for chatty in CHATTY_LOGGERS:  # a line per interaction loaded, per in-process request: noise at info
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.getLogger().level))
    check_websockets()
    app = create_app(config)
    if uds is not None:
        announce(f"statekit: serving {config.env.describe()} on unix socket {uds}")
        unix = uvicorn.Config(
            app,
            uds=uds,
            log_level=log_level,
            lifespan="on",
            ws=WS_PROTOCOL,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
        )
        redact.install(config.token)  # after uvicorn.Config, which (re)configures its loggers
        uvicorn.Server(unix).run()
        return
    sock = bind(host, port)
    url = url_of(sock)
    if config.token is None and not ipaddress.ip_address(sock.getsockname()[0]).is_loopback:
        announce(
            f"statekit: warning: {url} is reachable from other machines and has no token: anyone who can "
            "connect can drive its environments; pass --token (or set STATEKIT_TOKEN)"
        )
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level=log_level,
            ws=WS_PROTOCOL,
            ws_max_size=config.max_body_bytes,
            lifespan="on",
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
        )
    )
    redact.install(config.token)  # after uvicorn.Config, which (re)configures its loggers
    ws = url.replace("http://", "ws://", 1)
    announce(f"statekit: serving {config.env.describe()} at {url} (OpenEnv's WebSocket protocol: {ws}/ws)")
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass  # Ctrl-C: uvicorn has already shut down gracefully and re-raised it
    finally:
        sock.close()
