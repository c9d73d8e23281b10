"""A sampled rewind's full check against the golden, done beside the next episode instead of inside the reset.

Comparing every row, sequence and catalog entry with the golden's fingerprints
(``_statekit.unlike_golden``) is O(rows): about 6 ms on a claims world and 9 ms on a world of 100 small
tables, two to three times a whole rewind. Done inside the rewind, the one reset in a hundred that drew
it was the only mode of ``env.reset`` above three times its median. An ``Audit`` instead takes a
REPEATABLE READ snapshot of the world just after the rewind committed and before the copy is handed
out (one connection, a statement, and ACCESS SHARE locks on the journaled tables), then compares the
tables' rows in a thread while the next episode plays. The episode's row writes are not in the
snapshot; what would be (a TRUNCATE, DDL) waits for the locks, so for the few milliseconds of the
check. Sequences are left out: they are not transactional (the episode's ``nextval`` would show), and
the move has just set every one to the golden's position. The catalog items are compared too; with
the tables locked, the application's role cannot change them meanwhile.

A world found unlike its golden is logged at once, naming it, and refused at its next move, mark or
apply (``result``): the strategy then replaces it by a clone, as it did when the check ran inside the
rewind. The episode that started on it has already run; the log names the world so its results can be
dropped.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psycopg

log = logging.getLogger(__name__)

_AUDITS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statekit-audit")
"""One thread for every audit of the process: starting a thread per audit cost the reset ~1-4 ms
(``Thread.start`` waits for the new thread, which then holds the GIL while it sends its query)."""


def _new_pool() -> None:  # a forked child inherits the pool without its thread: it needs its own
    global _AUDITS
    _AUDITS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statekit-audit")


os.register_at_fork(after_in_child=_new_pool)

CANCEL_WAIT = 5.0
"""Seconds a cancelled audit may take to stop before its backend is ended."""

LIMITS = "SET lock_timeout = '5s'; SET statement_timeout = '60s'"
"""An audit never waits long for a lock, and never runs away: a reset waits for it at the latest."""


def auditor(conninfo: str) -> psycopg.Connection[Any]:
    """statekit's connection for audits of one world, kept for the world's life (a fresh backend paid
    ~3 ms to load the relations it locks); ``_statekit.quiet()`` spares it when the mover's session
    names its pid in ``statekit.spare``."""
    conn = psycopg.connect(conninfo, autocommit=True, application_name="statekit")
    conn.execute(LIMITS)
    return conn


LOCK_TABLES = (
    "DO $$ DECLARE t regclass; BEGIN FOR t IN SELECT rel::regclass FROM _statekit.tables LOOP "
    "EXECUTE format('LOCK TABLE %s IN ACCESS SHARE MODE', t); END LOOP; END $$"
)
ROWS_UNLIKE_GOLDEN = "SELECT _statekit.unlike_golden('sequence %')"
"""The golden comparison without the sequences (see the module's docstring)."""


class Audit:
    """One check of a world against its golden, on a snapshot taken now, finished in a thread."""

    def __init__(self, conn: psycopg.Connection[Any], world: str) -> None:
        """Start the check on ``conn``: statekit's own idle connection to the world (``auditor``)."""
        self.world = world
        self.failure: str | None = None
        """Why the world is not its golden (None: it is, or the check could not run)."""
        self._conn: psycopg.Connection[Any] | None = None
        self._cancelled = False
        try:
            # one round trip: the snapshot is taken by the transaction's first statement; the locks keep
            # a TRUNCATE or DDL (which an old snapshot would see through) waiting until the check is done
            conn.execute(f"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {LOCK_TABLES}")
            self._conn = conn
        except psycopg.Error as exc:
            log.warning("world %s: its sampled check against the golden could not start: %s", world, exc)
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")  # a lock timeout left the transaction open: the next audit begins
        self._done: Future[None] = _AUDITS.submit(self._run)

    def _run(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            row = conn.execute(ROWS_UNLIKE_GOLDEN).fetchone()
            differs = row[0] if row else None
            if differs is not None:
                self.failure = f"after the rewind the world is not its golden: {differs}"
                log.error("world %s: %s (an episode started on it; it is replaced at its next reset)",
                          self.world, self.failure)  # fmt: skip
        except psycopg.Error as exc:  # the server went away, say: nothing is known against the world
            if self._cancelled:  # closing the world stopped it: nothing to say
                return
            log.warning("world %s: its sampled check against the golden did not finish: %s", self.world, exc)
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")  # idle again, its locks released

    def result(self) -> str | None:
        """Wait for the check; why the world is not its golden, or None."""
        self._done.result()
        return self.failure

    def cancel(self, terminate: Callable[[int], object]) -> None:
        """Stop the check if it still runs (the world is going away: its verdict no longer matters),
        and wait for its thread to let go of the connection. A check the cancel request did not stop
        within ``CANCEL_WAIT`` (it arrived before the query began, say) has its backend ended by
        ``terminate(pid)``: closing a world never waits out the audit's statement timeout."""
        conn = self._conn
        if conn is not None and not self._done.done():
            self._cancelled = True
            with contextlib.suppress(psycopg.Error):
                conn.cancel_safe(timeout=5)
            try:
                self._done.result(timeout=CANCEL_WAIT)
            except TimeoutError:
                log.warning("world %s: its sampled check did not stop when cancelled; ending its backend",
                            self.world)  # fmt: skip
                terminate(conn.info.backend_pid)
        self._done.result()
