"""The lingerer: stops the embedded server once it has had no user for a while.

Started detached by ``SharedCluster.release`` (``python -m statekit.postgres.linger BASE SECONDS``).
It holds ``linger.lock`` while it watches, so one lingerer at most exists per cluster. Every user's
release touches ``last-release``, and the lingerer reads its modification time (set by the kernel:
a release made while another thread's virtual clock is active would write that clock's time). The
server stops only when ``SECONDS`` have passed since the latest release and no process holds
``users.lock``. If the cluster's directory is deleted under it (a test's temporary home), the
server is stopped by its pid.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import time
from pathlib import Path

from statekit.postgres.cluster import EmbeddedCluster


def _postmaster_pid(base: Path) -> int | None:
    try:
        return int((base / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def watch(base: Path, seconds: float) -> None:
    lock = (base / "linger.lock").open("w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    pid = _postmaster_pid(base)
    while True:
        try:
            last = (base / "last-release").stat().st_mtime
        except OSError:
            last = time.time()
        wait = last + seconds - time.time()
        if wait > 0:
            time.sleep(min(wait, 5.0))
            if not base.exists():
                if pid:
                    os.kill(pid, signal.SIGTERM)
                return
            continue
        with (base / "start.lock").open("w") as start:
            fcntl.flock(start, fcntl.LOCK_EX)
            users = (base / "users.lock").open("w")
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
                idle = True
            except BlockingIOError:  # in use again: its last user's release restarts the clock
                idle = False
            finally:
                users.close()
            if idle:
                EmbeddedCluster(base).stop_server()
                return
        time.sleep(min(seconds, 5.0))


if __name__ == "__main__":
    watch(Path(sys.argv[1]), float(sys.argv[2]))
