"""Servers for the harness tests: real uvicorn on 127.0.0.1 with OS-chosen ports.

Every server runs twice: sessions in the serving process (``workers=0``) and in two worker
processes (``workers=2``, what ``statekit serve`` does on a 2-core machine), so each test below
proves the HTTP and ``/ws`` contract holds both ways. The claims harness runs as the real
``statekit serve`` command in a subprocess, once per test session and mode. It has to be a
separate process anyway: the claims adapter replays vendor traffic by patching httpx process-wide
during a step, which would also catch this process's own HTTP calls.
The ledger harness (no database, no replay) runs in-process on a ``ThreadedServer``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import statekit
import statekit.kit
from statekit.harness import HarnessConfig, create_app
from statekit.servers import ThreadedServer
from tests.testing.serving import stop_server

from .helpers import LEDGER, Trace, play

REPO = Path(__file__).resolve().parents[2]


MODES = [0, 2]
MODE_IDS = ["in-process", "2-workers"]


@pytest.fixture(params=MODES, ids=MODE_IDS)
def workers(request: pytest.FixtureRequest) -> int:
    """How many worker processes the harness under test runs sessions in (0: its own process)."""
    return int(request.param)


@pytest.fixture
def serve_app(workers: int) -> Iterator[Callable[..., str]]:
    """Start ``create_app(HarnessConfig(...))`` on loopback; returns its URL. Stopped after the test."""
    servers: list[ThreadedServer] = []

    def start(adapter: str = LEDGER, **config: Any) -> str:
        config.setdefault("workers", workers)
        server = ThreadedServer(create_app(HarnessConfig.of(adapter, **config))).start(timeout=120)
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module", params=MODES, ids=MODE_IDS)
def ledger_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """One ledger harness per module and mode, shared by the module's tests (each closes what it
    opens; the harness must not need a fresh server per test). ``serve_app`` starts a fresh one for a
    test that needs its own limits or token."""
    config = HarnessConfig.of(LEDGER, workers=request.param, max_sessions=32)
    with ThreadedServer(create_app(config)) as server:
        yield server.url


TOKEN = "s3cret"
"""The token of ``token_url``'s harness."""


@pytest.fixture(scope="session", params=MODES, ids=MODE_IDS)
def token_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """One ledger harness per process and mode that asks for ``TOKEN``, shared by the tests of its
    authentication (each closes the sessions it opens): a server apiece cost two worker processes
    each in the ``2-workers`` mode."""
    config = HarnessConfig.of(LEDGER, workers=request.param, max_sessions=32, token=TOKEN)
    with ThreadedServer(create_app(config)) as server:
        yield server.url


def _read_url(proc: subprocess.Popen[str], lines: list[str]) -> str:
    """The first line ``statekit serve`` prints names its URL; keep draining output afterwards."""
    assert proc.stdout is not None
    url = ""
    for line in proc.stdout:
        lines.append(line)
        if "serving" in line and " at http://" in line:
            url = line.split(" at ", 1)[1].split()[0]
            break
    threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True).start()
    return url


@pytest.fixture(scope="session", params=MODES, ids=MODE_IDS)
def claims_server(pg_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """``statekit serve claims_app --db-url ... --port 0 --workers N`` as a subprocess; yields its URL."""
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("statekit")),
            "serve",
            "claims_app",
            "--db-url",
            pg_url,
            "--port",
            "0",
            "--workers",
            str(request.param),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "STATEKIT_TOKEN"},
    )
    lines: list[str] = []
    try:
        url = _read_url(proc, lines)
        assert url, "statekit serve printed no URL:\n" + "".join(lines)
        # this process holds environments too (claims_reference): its raw HTTP to the harness is allowed
        with statekit.kit.allow_egress(url):
            assert httpx.get(f"{url}/health", timeout=30).json()["status"] == "healthy"
            yield url
    finally:
        stop_server(
            proc, lines
        )  # SIGTERM: uvicorn shuts down gracefully and the harness closes every session
    # uvicorn re-raises SIGTERM once it has shut down, so the exit status is "killed by SIGTERM".
    assert proc.returncode in (0, -signal.SIGTERM), "".join(lines[-40:])
    assert any("Application shutdown complete" in line for line in lines), "".join(lines[-40:])


class ClaimsReference:
    """In-process answers for the claims adapter: each seed's reference script and its trace."""

    def __init__(self, env: statekit.Environment) -> None:
        self.env = env
        self._traces: dict[int, tuple[list[dict[str, Any]], Trace]] = {}

    def script(self, seed: int) -> list[dict[str, Any]]:
        return self._solve(seed)[0]

    def trace(self, seed: int) -> Trace:
        return self._solve(seed)[1]

    def _solve(self, seed: int) -> tuple[list[dict[str, Any]], Trace]:
        if seed not in self._traces:
            self.env.reset(seed=seed)
            script = self.env.adapter.reference_actions(self.env.task)
            self._traces[seed] = (script, play(self.env, seed, script))
        return self._traces[seed]


@pytest.fixture(scope="module")  # not longer: an open environment's egress guard covers the process
def claims_reference(pg_url: str) -> Iterator[ClaimsReference]:
    with statekit.make("claims_app", db_url=pg_url) as env:
        yield ClaimsReference(env)
