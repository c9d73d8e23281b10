"""The embedded default: one private cluster per user, shared by every statekit process.

It lives under ``$STATEKIT_HOME/pg`` (default ``~/.cache/statekit/pg``) so the world cache (the
golden databases) survives process restarts. Each process holds a shared ``flock`` on the cluster
while it uses it; a crashed process releases its lock with it. When the last one leaves, the server
lingers for ``$STATEKIT_PG_LINGER`` seconds (default 300; 0 stops it at once), so a series of CLI
commands pays for starting PostgreSQL once: a small detached process (``statekit.postgres.linger``),
started with a process's first lease, stops it once that long has passed with no user, including
when the last user died without releasing. ``statekit stop`` stops it now.
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from statekit.errors import ResetError
from statekit.postgres.cluster import PgCluster
from statekit.postgres.server import PostgresServer
from statekit.postgres.watch import retire
from statekit.settings import settings

log = logging.getLogger(__name__)
__all__ = ["EmbeddedPostgres", "linger_seconds"]


@dataclass
class _Hold:
    """This process's use of one cluster: the handle, the shared lock on ``users.lock``, the leases."""

    cluster: PgCluster
    users: IO[str]
    leases: int = 0


_held_lock = threading.Lock()
_held: dict[Path, _Hold] = {}
"""Clusters this process uses now. A serving process opens an environment per session: only its first
lease starts or checks the server (``pg_ctl status`` and the binary probes, each a process spawn) and
takes the shared users lock, which it keeps until its last lease ends, so no other process can stop
the server meanwhile (``stop`` needs that lock exclusively). A forked child starts with none: its
leases are its own, and it never unlocks the parent's lock."""
os.register_at_fork(after_in_child=_held.clear)


def linger_seconds() -> float:
    """How long the embedded server outlives its last user (``$STATEKIT_PG_LINGER``)."""
    return settings().pg_linger


class EmbeddedPostgres:
    """Reference-counted access to the per-user embedded cluster.

    Two lock files: ``start.lock`` (held exclusively only while deciding to start or stop) and
    ``users.lock`` (held shared by every user for as long as it uses the server).
    """

    def __init__(self, base_dir: Path | None = None) -> None:
        self.base_dir = base_dir or settings().home / "pg"
        self._cluster: PgCluster | None = None

    def _start_lock(self) -> IO[str]:
        lock = (self.base_dir / "start.lock").open("w")
        fcntl.flock(lock, fcntl.LOCK_EX)
        return lock

    def acquire(self) -> PostgresServer:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        key = self.base_dir.resolve()
        with _held_lock:
            hold = _held.get(key)
            if hold is None:
                with self._start_lock():
                    cluster = PgCluster(self.base_dir)
                    if not cluster.is_running():
                        cluster.start()
                    users = (self.base_dir / "users.lock").open("w")
                    fcntl.flock(users, fcntl.LOCK_SH)
                    # watched from the start: a user that dies without releasing still lets it stop
                    self._linger(linger_seconds())
                hold = _held[key] = _Hold(cluster, users)
            hold.leases += 1
        self._cluster = hold.cluster
        server = hold.cluster.server()
        server.restart = self._revive
        return server

    def _revive(self) -> None:
        """Start the server again after it died (``kill -9``, the OOM killer), while this process still
        uses it: its watch calls this (``statekit.postgres.watch``). Under the start lock, so of
        several processes seeing it down one starts it and the others find it running."""
        with self._start_lock():
            with _held_lock:  # under the start lock: a release meanwhile may have let it stop
                hold = _held.get(self.base_dir.resolve())
            if hold is None:
                raise ResetError(
                    "this process no longer uses the embedded PostgreSQL server: not restarting it"
                )
            if not hold.cluster.is_running():
                log.warning("the embedded PostgreSQL server in %s is not running: starting it", self.base_dir)
                hold.cluster.start()

    def release(self) -> None:
        """Leave the server: the last user out stops it, or lets it linger. Safe to call twice."""
        if self._cluster is None:
            return
        self._cluster = None
        key = self.base_dir.resolve()
        with _held_lock:
            hold = _held.get(key)
            if hold is None:  # acquired before a fork: the parent's lease, not this process's
                return
            hold.leases -= 1
            if hold.leases == 0:
                del _held[key]
                self._leave(hold.users, hold.cluster)

    def _leave(self, users: IO[str], cluster: PgCluster) -> None:
        """This process's last lease ends: the last user out of every process stops the server or
        lets it linger."""
        with self._start_lock():
            fcntl.flock(users, fcntl.LOCK_UN)
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass  # another user still holds it
            else:
                linger = linger_seconds()
                if linger > 0:
                    (self.base_dir / "last-release").touch()  # the kernel's time: not a virtual clock
                    self._linger(linger)
                else:
                    _stop(cluster)
            finally:
                users.close()

    def _linger(self, seconds: float) -> None:
        """Start the detached process that stops the server after ``seconds`` without a user (unless
        one already watches it)."""
        probe = (self.base_dir / "linger.lock").open("w")
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a lingerer is already watching
        finally:
            probe.close()
        try:
            subprocess.Popen(
                [sys.executable, "-m", "statekit.postgres.linger", str(self.base_dir), str(seconds)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:  # the server still works; the next lease or release tries again
            log.warning("could not start the embedded server's lingerer: %s", exc)

    def stop(self, *, force: bool = False) -> bool:
        """Stop the server now; unless ``force``, only when no process uses it. Whether it stopped."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        with self._start_lock():
            users = (self.base_dir / "users.lock").open("w")
            try:
                fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not force:
                    return False
            finally:
                users.close()
            _stop(PgCluster(self.base_dir))
            return True


def _stop(cluster: PgCluster) -> None:
    """Stop the server on purpose: this process's watch of it is retired first, so it does not take
    the stop for a crash."""
    retire(cluster.server().admin_conninfo)
    cluster.stop_server()
