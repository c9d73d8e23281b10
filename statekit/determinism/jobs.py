"""Background jobs drained inside ``step``: the world changes only while statekit runs the app.

An application's worker thread polls a queue on the wall clock; in an episode that would change the
world between steps, at moments no seed decides. ``DrainJobs`` runs what is due instead, in the
application's own order, at the end of every controlled call (so inside the step, under the other
controls, outbound replay included when it is entered before this one). With the control disabled
the adapter runs the application's own worker, which is how the removal check shows it matters.

Asking the application whether anything is due costs a transaction on every step, and most steps
enqueue nothing. Given a ``JobQueue`` (the queue's table in a journaled world, and how to read the
earliest due time), ``DrainJobs`` drains only when something can be due: the queue's table changed
since the last drain (the world's change journal says so, one indexed read) or the virtual clock
reached the earliest due time read after it. Same jobs, same order, same moments: a drain that
would find nothing due is all that is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from statekit.determinism.base import Control
from statekit.determinism.controls import clock
from statekit.memo import Memo

if TYPE_CHECKING:
    from statekit.postgres.journal import Journal
    from statekit.world import World


class JobQueue:
    """Whether a drain can find a due job, without asking the application (see the module).

    ``table`` is the queue's table (``"jobs"`` or ``"schema.jobs"``) in ``world``'s database;
    ``next_due`` returns the earliest time a queued job becomes due (None: nothing queued), read
    through the application after a drain. A world without a journal drains on every call.
    """

    def __init__(self, world: World, table: str, next_due: Callable[[], datetime | None]) -> None:
        from statekit.postgres.journal import journals_of  # psycopg: not imported with statekit

        self.next_due = next_due
        self.table = table
        journals = list(journals_of(world))
        self._journal = journals[0] if len(journals) == 1 and journals[0].unavailable() is None else None
        self._rel = 0
        """The table's oid, read at the first drain (nothing is read at the episode's start)."""
        self._seen = -1
        self._due: datetime | None = None
        self._known = False
        """Whether ``_due`` was read since the queue last changed (else the next call drains)."""

    def may_be_due(self, now: datetime) -> bool:
        if self._journal is None or not self._known or self._changed():
            return True
        return self._due is not None and now >= self._due

    def stale(self) -> None:
        """A controlled call begins: what the journal said may no longer hold."""
        if self._journal is not None:
            self._journal.tail.stale()

    def drained(self) -> None:
        """After a drain: remember the earliest due time, and move past what the drain wrote."""
        if self._journal is None:
            return
        self._journal.tail.stale()
        self._due = self.next_due()
        if not self._rel:
            self._rel = _oid(self._journal, self.table)
        self._changed()
        self._known = True

    def _changed(self) -> bool:
        """Whether the queue's table gained journal entries since the last look (and look now)."""
        assert self._journal is not None
        written = self._journal.tail.since(self._seen)
        self._seen = max(self._seen, self._journal.tail.position())
        return self._rel in written


_OIDS: Memo[tuple[str, str], int] = Memo()
"""The queue table's oid per (database, table): clones keep their oids, so a world reads it once."""


def _oid(journal: Journal, table: str) -> int:
    key = (journal.conninfo, table)
    if key not in _OIDS:
        with journal.connected() as conn:
            row = conn.execute("SELECT %s::regclass::oid", (table,)).fetchone()
        assert row is not None
        _OIDS[key] = int(row[0])
    return _OIDS[key]


class DrainJobs(Control):
    """After each controlled call that returned normally, ``drain()`` runs the jobs that are due
    (given a ``queue``, only when one can be: see the module)."""

    name: ClassVar[str] = "jobs"

    def __init__(self, drain: Callable[[], object], *, queue: JobQueue | None = None) -> None:
        self.drain = drain
        self.queue = queue

    @contextmanager
    def active(self) -> Iterator[None]:
        if self.queue is not None:
            self.queue.stale()
        yield
        if self.queue is None:
            self.drain()
            return
        if self.queue.may_be_due(clock().now):
            self.drain()
            self.queue.drained()
