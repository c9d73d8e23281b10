"""Whether a PostgreSQL server is alive, and what to do when it dies: one watch per server a process
uses, shared by every strategy on it.

A world lives in its server's memory as much as on its disk: when the postmaster dies (``kill -9``,
the OOM killer) every connection, open transaction and warm application on it goes, and a world in
mid-episode can no longer be vouched for. So a watch thread pings the server (a kept connection,
``SELECT pg_postmaster_start_time()``) every ``INTERVAL`` seconds while a strategy uses it and keeps
three facts that cost nothing to read: ``down`` (why it cannot be reached now), ``started`` (when
the running postmaster started: a change means it restarted, whether or not anyone saw it down)
and the worlds made under each start. When the server is down and statekit runs it (the embedded
cluster, ``restart``), the watch starts it again. When it is back, each strategy is told
(``on_restart``): it drops the worlds made before, which died with the old postmaster (their files
survive crash recovery, their episodes do not), and the drops that failed while it was down are done
then. Goldens survive: they are files nobody had open.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg

log = logging.getLogger(__name__)

INTERVAL = 1.0
"""Seconds between pings while the server is in use."""
CONNECT_TIMEOUT = 3
"""Seconds a ping may wait for a connection (a live server answers in milliseconds)."""

_watches: dict[str, ServerWatch] = {}
_watches_lock = threading.Lock()


class ServerWatch:
    """The liveness of one server for this process (see the module). Use ``ServerWatch.of``."""

    def __init__(self, conninfo: str, restart: Callable[[], None] | None) -> None:
        self.conninfo = conninfo
        self.restart = restart
        self.down: str | None = None
        """Why the server cannot be reached now (None while it answers)."""
        self.started: datetime | None = None
        """When the running postmaster started, as last seen."""
        self.restarts = 0
        self.retired = False
        """statekit stopped the server on purpose (``retire``): a failure now is no crash."""
        self._conn: psycopg.Connection[Any] | None = None
        self._listeners: dict[int, Callable[[], None]] = {}
        self._tokens = itertools.count(1)
        self._deferred: dict[str, Callable[[], None]] = {}
        self._lock = threading.Lock()
        self._ping_lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def of(cls, conninfo: str, restart: Callable[[], None] | None = None) -> ServerWatch:
        """The process's watch of the server at ``conninfo`` (an admin connection string)."""
        with _watches_lock:
            watch = _watches.get(conninfo)
            if watch is None:
                watch = _watches[conninfo] = cls(conninfo, restart)
            elif restart is not None:
                watch.restart = restart
            return watch

    @staticmethod
    def known(conninfo: str) -> bool:
        """Whether this process has seen the server at ``conninfo`` answer (so a failure is its
        death, not a wrong address)."""
        with _watches_lock:
            watch = _watches.get(conninfo)
        return watch is not None and watch.started is not None

    # -- who is watching --------------------------------------------------------------------------
    def listen(self, on_back: Callable[[], None]) -> int:
        """Call ``on_back`` (from the watch thread) whenever the server answers again after it was down
        or restarted; the watch thread runs while anyone listens. Returns a token for ``unlisten``."""
        with self._lock:
            token = next(self._tokens)
            self._listeners[token] = on_back
            self._ensure_thread()
        return token

    def _ensure_thread(self) -> None:
        """Start the watch thread if none runs (the caller holds ``_lock``)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="statekit-pg-watch", daemon=True)
            self._thread.start()

    def unlisten(self, token: int) -> None:
        with self._lock:
            self._listeners.pop(token, None)
            if not self._listeners and not self._deferred:
                self._wake.set()  # the thread ends now

    def defer(self, name: str, clean_up: Callable[[], None]) -> None:
        """Run ``clean_up`` (a drop that failed while the server was down) once the server is back,
        even if whoever asked is gone by then: the watch thread runs until it is done."""
        with self._lock:
            self._deferred[name] = clean_up
            self._ensure_thread()

    # -- the facts --------------------------------------------------------------------------------
    def seen_start(self, started: datetime) -> None:
        """A start time read on another connection (a world was just made under it)."""
        if self.started is None:
            self.started = started
        elif started != self.started:
            self.check()  # it restarted since the last ping: tell the listeners now

    def check(self, *, reconnect: bool = False) -> str | None:
        """Ping now (restarting the server if it is down and statekit runs it); returns ``down``.

        ``reconnect`` pings on a new connection: after a failure seen elsewhere, the kept one's
        backend may outlive a killed postmaster by a few milliseconds and answer for a dead server.

        When it answers after being down or restarted, ``down`` stays set until the clean-up ran
        (the listeners' drops of dead worlds, the deferred drops), so whoever sees it clear finds
        no world of the old server left."""
        if _exiting.is_set() or self.retired:  # whoever stops the server now means it
            return self.down
        with self._ping_lock:
            if reconnect and self._conn is not None:
                self._conn.close()
                self._conn = None
            started, error = self._ping()
            if error is not None and (_exiting.is_set() or self.retired):  # stopped while we looked
                return self.down
            why = None if error is None else f"the database server is down: {error}"
            was_down, previous = self.down, self.started
            if why is not None and self.restart is not None:
                self.down = f"{why}; statekit is restarting it"  # honest while the restart runs
                if was_down is None:
                    log.error("%s", why)
                try:
                    self.restart()
                except Exception as exc:  # the next look tries again
                    why = f"{why}; restarting it failed: {exc}"
                else:
                    started, again = self._ping()
                    why = None if again is None else f"{why}; restarted, still unreachable: {again}"
            elif why is not None and was_down is None:
                log.error("%s", why)
            if why is not None or started is None:
                self.down = why
                return why
            self.started = started
            restarted = previous is not None and started != previous
            back = was_down is not None or restarted
            with self._lock:
                listeners = list(self._listeners.values()) if back else []
                deferred, self._deferred = list(self._deferred.values()), {}
            if back:
                self.down = "the database server is back: statekit is dropping the worlds that died with it"
            for clean_up in [*listeners, *deferred]:  # a deferred drop that fails again defers itself
                try:
                    clean_up()
                except Exception:
                    log.exception("cleaning up after the database server came back failed")
            if restarted:
                self.restarts += 1
                log.warning(
                    "the database server restarted (at %s): the worlds made before were dropped", started
                )
            elif back:
                log.warning("the database server answers again")
            self.down = None
            return None

    def _ping(self) -> tuple[datetime | None, str | None]:
        for attempt in (1, 2):  # a kept connection that broke is retried once on a new one
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(
                        self.conninfo,
                        autocommit=True,
                        connect_timeout=CONNECT_TIMEOUT,
                        application_name="statekit",
                    )
                row = self._conn.execute("SELECT pg_postmaster_start_time()").fetchone()
                assert row is not None
                return row[0], None
            except psycopg.Error as exc:
                if self._conn is not None:
                    self._conn.close()
                self._conn = None
                if attempt == 2:
                    return None, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AssertionError("unreachable")

    def _run(self) -> None:
        while True:
            self._wake.wait(INTERVAL)
            with self._lock:
                self._wake.clear()
                if (not self._listeners and not self._deferred) or _exiting.is_set() or self.retired:
                    self._thread = None
                    break
            try:
                self.check()
            except Exception:
                log.exception("the database server watch failed; it looks again in %s s", INTERVAL)
        with self._ping_lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def retire(conninfo: str) -> None:
    """statekit is stopping the server at ``conninfo`` on purpose (its last user left): this
    process's watch of it stops too, instead of taking the stop for a crash (logging it as one and
    starting the server again for an environment that was never closed)."""
    with _watches_lock:
        watch = _watches.pop(conninfo, None)
    if watch is not None:
        watch.retired = True
        watch._wake.set()


def _forget_after_fork() -> None:
    """A forked child watches for itself: the parent's threads and held locks did not come along."""
    global _watches_lock
    _watches.clear()
    _watches_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)

_exiting = threading.Event()
"""Set at interpreter exit: whoever stops the server then (a test session's clean-up) means it."""


@atexit.register
def stop_watching() -> None:
    """The interpreter is exiting: no watch restarts a server from now on (whoever stops one means
    it). Run at exit; a clean-up that stops a server at exit before this runs calls it first."""
    _exiting.set()
    with _watches_lock:
        watches = list(_watches.values())
    for watch in watches:
        watch._wake.set()
