"""The lingerer: stops the embedded server once it has had no user for a while.

Started detached with a process's first lease of the server (``EmbeddedPostgres.acquire``, as
``python -m statekit.postgres.linger BASE SECONDS``), so it watches while the server is used: a user
that dies without releasing (killed, or a script that never closed its environment) still leaves
no server behind. It holds ``linger.lock`` while it watches, so one lingerer at most exists per
cluster. Every user's release touches ``last-release``, and the lingerer reads its modification time
(set by the kernel: a release made while another thread's virtual clock is active would write that
clock's time). The server stops once ``SECONDS`` have passed since the latest release (or since the
lingerer started, if later) and no process holds ``users.lock``. If the cluster's directory is
deleted under it (a test's temporary home), the server is stopped by its pid, and the lingerer never
creates a file there: a lock file it made while the directory was being deleted would leave it behind.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import IO

from statekit.postgres.cluster import PgCluster


def _postmaster_pid(base: Path) -> int | None:
    try:
        return int((base / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


POLL_SECONDS = 5.0
"""How often the lingerer looks again while the server is in use (or its period has not passed)."""


def watch(base: Path, seconds: float) -> None:
    lock = (base / "linger.lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    started = time.time()
    pid: int | None = None
    while True:
        if not base.exists():
            _terminate_postmaster(pid)
            return
        pid = _postmaster_pid(base)  # None once the server stopped: nothing left to signal
        due = seconds - _idle_for(base, started)
        if due > 0:
            time.sleep(min(due, POLL_SECONDS))
            continue
        try:
            if _stop_if_idle(base, lock, started, seconds):
                return
        except FileNotFoundError:
            if not base.exists():  # the directory went meanwhile: the next turn stops it by pid
                continue
        time.sleep(POLL_SECONDS)


def _idle_for(base: Path, started: float) -> float:
    """Seconds since the latest release (or since the lingerer started, if later)."""
    try:
        last = max(started, (base / "last-release").stat().st_mtime)
    except OSError:
        last = started
    return time.time() - last


def _terminate_postmaster(pid: int | None) -> None:
    """Stop the server of a deleted home by its pid, if that pid is still a postgres process."""
    if pid is None:
        return
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"postgres" in command:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _stop_if_idle(base: Path, watching: IO[str], started: float, seconds: float) -> bool:
    """Stop the server if no process uses it and the period since the latest release has passed
    (both judged under the locks, so a release made meanwhile restarts the clock). Stopped, the
    lingerer lets go of ``linger.lock`` before ``start.lock``, so the next user to start the server
    also starts the next lingerer."""
    # opened, never created ("r+"): both exist from the server's first lease, so a missing one means
    # its directory is being deleted, and a lock file made now would keep that from finishing
    with (base / "start.lock").open("r+") as start:
        fcntl.flock(start, fcntl.LOCK_EX)
        with (base / "users.lock").open("r+") as users:
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
        if _idle_for(base, started) < seconds:
            return False
        PgCluster(base).stop_server()
        watching.close()
        return True


if __name__ == "__main__":
    watch(Path(sys.argv[1]), float(sys.argv[2]))
