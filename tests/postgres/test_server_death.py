"""A PostgreSQL server killed under statekit (``kill -9`` on the postmaster): the embedded one is
started again by itself, ``health`` says so throughout, the worlds that died with it are dropped (none
leaks), the episodes on them end with ``WorldLost`` (410 ``world_lost`` over HTTP), and new episodes
are served as before. Each test runs its own embedded cluster in a private home, so killing it touches
no other test."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

import statekit
from statekit.checks.journal_attacks import journaled_parts
from statekit.client import RemoteEnvironment
from statekit.errors import EnvironmentLost, RemoteError, ServerDown, StatekitError, WorldLost
from statekit.postgres.cluster import PgCluster
from statekit.postgres.embedded import EmbeddedPostgres
from statekit.postgres.watch import ServerWatch

REPO = Path(__file__).resolve().parents[2]
SHELF = "tests.testing.shelf_adapters:Shelf"
STATEKIT = str(Path(sys.executable).with_name("statekit"))


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A statekit home of the test's own: its embedded cluster is started on first use. Not under
    pytest's ``tmp_path``: a pytest run makes its base directory private again, under the feet of
    the server (which runs as another user)."""
    path = Path(tempfile.mkdtemp(prefix="statekit-death-"))
    monkeypatch.setenv("STATEKIT_HOME", str(path))
    yield path
    for cluster in ("pg", "external"):
        if (path / cluster / "data").exists():
            PgCluster(path / cluster).stop_server()
    shutil.rmtree(path, ignore_errors=True)


def _kill_postmaster(home: Path) -> int:
    pid = int((home / "pg" / "data" / "postmaster.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    return pid


def _databases(home: Path, prefix: str) -> list[str]:
    with psycopg.connect(host=str(home / "pg" / "sock"), user="postgres", dbname="postgres") as conn:
        rows = conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (prefix,))
        return sorted(str(row[0]) for row in rows.fetchall())


def _until(what: str, predicate: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_an_episode_whose_server_was_killed_is_lost_and_the_next_reset_serves_a_fresh_world(
    home: Path,
) -> None:
    keep = EmbeddedPostgres()  # the test's own lease: the server outlives the environment's
    keep.acquire()
    with statekit.make(SHELF) as env:
        _, first = env.reset(seed=7)
        (part,) = journaled_parts(env.world)
        env.step({"tool": "bump", "name": "item-1"})
        _kill_postmaster(home)
        with pytest.raises(WorldLost, match=r"is lost: .*(down|restarted)"):
            for _ in range(600):  # the step that meets the dead server says so (or the watch did first)
                with contextlib.suppress(ServerDown):  # seen down first: the episode waits, retry
                    env.step({"tool": "shelf"})
                time.sleep(0.05)
        _until("the server to be back", lambda: env.health().down is None)
        assert env.health().restarts == 1
        _, info = env.reset(seed=7)
        assert info["world"] == "restored", "the parked world died with the server: a fresh clone"
        assert info["digest"] == first["digest"]
        assert part.id not in _databases(home, "skshelf_e_"), "the dead world was dropped"
        env.step({"tool": "shelf"})
    try:
        assert _databases(home, "skshelf_e_") == [], "closing the environment dropped the rest"
    finally:
        keep.release()


def test_a_reset_while_the_server_is_down_says_so_and_creates_nothing(home: Path) -> None:
    """With a server statekit does not run (a URL), it reports it down and restarts nothing."""
    cluster = PgCluster(home / "external").start()
    try:
        with statekit.make(SHELF, db_url=cluster.url()) as env:
            env.reset(seed=7)
            cluster.stop_server()
            _until("the watch to see the server down", lambda: env.health().down)
            assert "the database server is down" in str(env.health().down)
            with pytest.raises(ServerDown, match="retry once health"):
                env.reset(seed=8)
            with pytest.raises(ServerDown, match="the episode is kept"):  # it may come back with its world
                env.state()
            cluster.start()
            _until("the server to be back", lambda: env.health().down is None)
            with pytest.raises(WorldLost, match="restarted"):  # it came back without it
                env.state()
            _, info = env.reset(seed=7)
            assert info["world"] == "restored"
    finally:
        cluster.stop()


def test_a_server_its_last_user_stops_is_not_taken_for_a_crash(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Something still watches the embedded server (an environment never closed) when its last
    lease ends and statekit stops it (no linger here): the watch stops with it, instead of logging
    "the database server is down" and trying to start it again (what every test process printed at
    the end of the suite)."""
    shared = EmbeddedPostgres()
    server = shared.acquire()
    watch = ServerWatch.of(server.admin_conninfo, server.restart)
    token = watch.listen(lambda: None)
    try:
        assert watch.check() is None, "it answers"
        with caplog.at_level(logging.WARNING, logger="statekit.postgres.watch"):
            shared.release()
            assert watch.check() is None
        assert not PgCluster(home / "pg").is_running(), "stopped on purpose, and not started again"
        # (a watch of an earlier test's server may still log about that server: its deferred drops)
        assert [r.getMessage() for r in caplog.records if str(home / "pg") in r.getMessage()] == []
        assert not ServerWatch.known(server.admin_conninfo)
    finally:
        watch.unlisten(token)


def _serve(home: Path, workers: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [STATEKIT, "serve", SHELF, "--port", "0", "--workers", str(workers), "--idle-timeout", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env={**os.environ, "STATEKIT_HOME": str(home), "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if " at http://" not in line:
        proc.kill()
        raise AssertionError(line + proc.stdout.read())
    threading.Thread(target=lambda: LOG.extend(proc.stdout), daemon=True).start()  # type: ignore[arg-type]
    return proc, line.split(" at ", 1)[1].split()[0]


LOG: list[str] = []


@pytest.mark.parametrize("workers", [0, 2], ids=["in_process", "two_workers"])
def test_a_server_soak_survives_its_postmaster_killed_twice(home: Path, workers: int) -> None:
    proc, url = _serve(home, workers)
    outcomes: Counter[str] = Counter()
    health: list[tuple[float, int, dict[str, Any]]] = []
    stop = threading.Event()

    def client(n: int) -> None:
        while not stop.is_set():
            try:
                with RemoteEnvironment(url, timeout=60) as env:
                    env.reset(seed=n % 3)
                    for _ in range(3):
                        env.step({"tool": "bump", "name": "item-2"})
                    env.step({"tool": "shelf"})
                outcomes["episode"] += 1
            except WorldLost:
                outcomes["world_lost"] += 1
            except ServerDown:
                outcomes["database_unavailable"] += 1
                time.sleep(0.1)
            except EnvironmentLost:
                outcomes["worker_lost"] += 1
            except RemoteError as exc:
                outcomes[f"{exc.status} {exc.code}"] += 1
                time.sleep(0.1)
            except StatekitError as exc:
                outcomes[f"{type(exc).__name__}: {exc}"[:300]] += 1

    def probe() -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            while not stop.is_set():
                response = http.get("/health")
                health.append((time.monotonic(), response.status_code, response.json()))
                time.sleep(0.1)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)] + [
        threading.Thread(target=probe)
    ]
    try:
        for thread in threads:
            thread.start()

        def served(at_least: int) -> bool:
            return outcomes["episode"] >= at_least

        def restarted(times: int) -> bool:
            return bool(health) and health[-1][1] == 200 and health[-1][2]["database_restarts"] >= times

        for kill in (1, 2):
            _until("episodes to be served", lambda: served(5 * kill))  # noqa: B023 - called at once
            before = outcomes["episode"]
            _kill_postmaster(home)
            _until(f"restart {kill} to show in /health", lambda: restarted(kill))  # noqa: B023
            _until("episodes after the restart", lambda: served(before + 5))  # noqa: B023
        stop.set()
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads)
        assert set(outcomes) <= {"episode", "world_lost", "database_unavailable", "503 reset_failed"}, (
            outcomes,
            "".join(LOG[-200:]),
        )
        unhealthy = [body for _, status, body in health if status == 503]
        assert unhealthy, "/health said so while the server was down or its dead worlds were dropped"
        assert all(
            body["status"] == "unhealthy" and "database server is" in body["reason"] for body in unhealthy
        )
        assert all(body["status"] == "healthy" for _, status, body in health if status == 200)
        assert health[-1][1] == 200 and health[-1][2]["database_restarts"] == 2
        assert _databases(home, "skshelf_e_") == [], (
            "every world that died, or whose session closed, was dropped"
        )
    finally:
        stop.set()
        proc.terminate()
        proc.wait(60)
