"""The embedded server lingers between commands, stops by itself once idle, and `statekit stop` stops it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from statekit.postgres import EmbeddedPostgres, linger
from statekit.postgres.cluster import PgCluster

ROOT = Path(__file__).resolve().parents[2]


def _cli(home: Path, *args: str, linger: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STATEKIT_HOME": str(home), "STATEKIT_PG_LINGER": linger}
    return subprocess.run(
        [sys.executable, "-m", "statekit.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )


def _running(home: Path) -> bool:
    return PgCluster(home / "pg").is_running()


def test_the_server_lingers_between_commands_then_stops(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = _cli(home, "spec", "init", "tests.testing.order_adapter:SortedItems", linger="4")
    assert first.returncode == 0, first.stderr
    assert _running(home), "the server outlives the command"
    t0 = time.monotonic()
    again = _cli(home, "spec", "init", "tests.testing.order_adapter:SortedItems", linger="4")
    assert again.returncode == 0 and _running(home)
    deadline = time.monotonic() + 30
    while _running(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _running(home), "it stops by itself once idle"
    assert time.monotonic() - t0 >= 3, "not before the linger period"


def test_statekit_stop_stops_it_now(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert _cli(home, "spec", "init", "tests.testing.order_adapter:SortedItems", linger="600").returncode == 0
    assert _running(home)
    stopped = _cli(home, "stop", linger="600")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not _running(home)


def test_leases_in_one_process_share_the_server_without_spawning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A serving process opens an environment per session: after the first lease, another spawns no
    process (a spawn per session failed with EFAULT under load), and the server stops only when the
    last lease ends."""
    monkeypatch.setenv("STATEKIT_PG_LINGER", "0")
    shared = EmbeddedPostgres(tmp_path / "pg")
    first = shared.acquire()
    spawned: list[list[str]] = []
    real_run = subprocess.run

    def counting_run(command: list[str], *args: object, **kwargs: object) -> object:
        spawned.append(command)
        return real_run(command, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "run", counting_run)
    leases = [EmbeddedPostgres(tmp_path / "pg") for _ in range(3)]
    for lease in leases:
        server = lease.acquire()
        with server.admin() as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        server.close()
    for lease in leases:
        lease.release()
    assert spawned == [], "later leases spawn nothing"
    monkeypatch.setattr(subprocess, "run", real_run)
    assert _running(tmp_path), "the first lease still holds the server"
    first.close()
    shared.release()
    assert not _running(tmp_path), "the last lease out stops it"


def test_a_user_killed_without_releasing_does_not_leave_the_server_running(tmp_path: Path) -> None:
    """A process that dies holding a lease (SIGKILL, or a script that never closes its environment)
    must not leave the server running forever: the lingerer watches from the first lease."""
    home = tmp_path / "home"
    user = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from statekit.postgres import EmbeddedPostgres; import time\n"
            "EmbeddedPostgres().acquire(); print('up', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "STATEKIT_HOME": str(home), "STATEKIT_PG_LINGER": "1"},
    )
    try:
        assert user.stdout is not None and user.stdout.readline().strip() == "up"
        time.sleep(3)
        assert _running(home), "a user holds it past the linger period: it keeps running"
    finally:
        user.kill()
        user.wait()
    deadline = time.monotonic() + 30
    while _running(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _running(home), "once its only user died, the server stops by itself"


def test_the_lingerer_makes_no_file_in_a_directory_being_deleted(tmp_path: Path) -> None:
    """Its server's directory half-deleted (the lock files gone, the directory not yet): the lingerer's
    check fails and leaves nothing there, so the deletion can finish (it once left ``start.lock`` and
    ``users.lock`` in a test run's removed home)."""
    base = tmp_path / "pg"
    base.mkdir()
    with (base / "linger.lock").open("w") as watching:
        (base / "linger.lock").unlink()
        with pytest.raises(FileNotFoundError):
            linger._stop_if_idle(base, watching, started=0.0, seconds=0.0)
    assert list(base.iterdir()) == []
