"""The embedded default: one private cluster per user, shared by every statekit process.

It lives under ``$STATEKIT_HOME/pg`` (default ``~/.cache/statekit/pg``) so the snapshot cache (the
golden databases) survives process restarts. Each process holds a shared ``flock`` on the cluster
while it uses it; the last one out stops the server. A crashed process releases its lock with it.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

from statekit.home import statekit_home
from statekit.postgres.cluster import EmbeddedCluster
from statekit.postgres.server import PostgresServer

__all__ = ["SharedCluster", "statekit_home"]


class SharedCluster:
    """Reference-counted access to the per-user embedded cluster.

    Two lock files: ``start.lock`` (held exclusively only while deciding to start or stop) and
    ``users.lock`` (held shared by every user for as long as it uses the server).
    """

    def __init__(self, base_dir: Path | None = None) -> None:
        self.base_dir = base_dir or statekit_home() / "pg"
        self._users: IO[str] | None = None
        self._cluster: EmbeddedCluster | None = None

    def _start_lock(self) -> IO[str]:
        lock = (self.base_dir / "start.lock").open("w")
        fcntl.flock(lock, fcntl.LOCK_EX)
        return lock

    def acquire(self) -> PostgresServer:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        with self._start_lock():
            cluster = EmbeddedCluster(self.base_dir)
            if not cluster.is_running():
                cluster.start()
            users = (self.base_dir / "users.lock").open("w")
            fcntl.flock(users, fcntl.LOCK_SH)
        self._users, self._cluster = users, cluster
        return cluster.server()

    def release(self) -> None:
        """Stop the server if no other user holds it. Safe to call twice."""
        users, cluster = self._users, self._cluster
        self._users = self._cluster = None
        if users is None or cluster is None:
            return
        with self._start_lock():
            fcntl.flock(users, fcntl.LOCK_UN)
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # another user still holds it
            else:
                cluster.stop_server()
            finally:
                users.close()
