"""A sampled rewind's full check against the golden, done beside the next episode instead of inside the reset.

Comparing every row, sequence and catalog entry with the golden's fingerprints
(``_statekit.unlike_golden``) is O(rows): about 6 ms on a claims world and 9 ms on a world of 100 small
tables, two to three times a whole rewind. Done inside the rewind, the one reset in a hundred that drew
it was the only mode of ``env.reset`` above three times its median. An ``Audit`` instead takes a
REPEATABLE READ snapshot of the world just after the rewind committed and before the copy is handed
out (one connection and one statement), then compares in a thread while the next episode plays: the
episode's own writes are not in its snapshot, so it checks exactly the state the episode started from.

A world found unlike its golden is logged at once, naming it, and refused at its next move or mark
(``result``): the strategy then replaces it by a clone, as it did when the check ran inside the rewind.
The episode that started on it has already run; the log names the world so its results can be dropped.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psycopg

log = logging.getLogger(__name__)

_AUDITS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="statekit-audit")
"""One thread for every audit of the process: starting a thread per audit cost the reset ~1-4 ms
(``Thread.start`` waits for the new thread, which then holds the GIL while it sends its query)."""


class Audit:
    """One check of a world against its golden, on a snapshot taken now, finished in a thread."""

    def __init__(self, conninfo: str, world: str) -> None:
        self.world = world
        self.failure: str | None = None
        """Why the world is not its golden (None: it is, or the check could not run)."""
        self._conn: psycopg.Connection[Any] | None = None
        try:
            conn = psycopg.connect(conninfo, autocommit=True, application_name="statekit")
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            conn.execute("SELECT 1")  # the snapshot is taken by a transaction's first statement
            self._conn = conn
        except psycopg.Error as exc:
            log.warning("world %s: its sampled check against the golden could not start: %s", world, exc)
        self._done: Future[None] = _AUDITS.submit(self._run)

    def _run(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            row = conn.execute("SELECT _statekit.unlike_golden()").fetchone()
            differs = row[0] if row else None
            if differs is not None:
                self.failure = f"after the rewind the world is not its golden: {differs}"
                log.error("world %s: %s (an episode started on it; it is replaced at its next reset)",
                          self.world, self.failure)  # fmt: skip
        except psycopg.Error as exc:  # the server went away, say: nothing is known against the world
            log.warning("world %s: its sampled check against the golden did not finish: %s", self.world, exc)
        finally:
            conn.close()

    def result(self) -> str | None:
        """Wait for the check; why the world is not its golden, or None."""
        self._done.result()
        return self.failure
