"""What a world's change journal gained since a position, read once and shared.

Two controls look at the journal after every controlled call: the jobs control (did the queue's table
change?) and the database-clock control (which tables gained row images?). Each asked PostgreSQL on
its own; a step paid for both reads though one answers both. A ``Tail`` (one per ``Journal``,
``journal.tail``) reads the entries after the highest ``seq`` it has seen, per table, and keeps the
answer until someone says the world may have changed (``stale()``: a controlled call begins, a drain
ran). Its start is known without a read after a move (the move returns the journal's next ``seq``);
only a journal nothing has moved yet is asked where it ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from statekit.postgres.journal import Journal


class Tail:
    """The journal's entries per table after ``start``, refreshed on demand (see the module)."""

    def __init__(self, journal: Journal, top: int | None) -> None:
        self._journal = journal
        self.top = top
        """The highest ``seq`` read (None: not known yet)."""
        self.last: dict[int, tuple[int, int, str]] = {}
        """Per table oid: (its highest ``seq``, its highest ``seq`` adding a row image, its name)."""
        self._current = False

    def stale(self) -> None:
        """The world may have changed since the last read: the next question reads again."""
        self._current = False

    def position(self) -> int:
        """The highest ``seq`` known: the last move's or read's (the journal is asked only when neither
        has told it). Entries written after that are what the next read finds."""
        if self.top is None:
            with self._journal.connected() as conn:
                row = conn.execute("SELECT coalesce(max(seq), 0) FROM _statekit.journal").fetchone()
            self.top = int(row[0]) if row else 0
            self._current = True
        return self.top

    def since(self, seq: int) -> dict[int, tuple[int, int, str]]:
        """Per table oid written after ``seq``: (highest ``seq``, highest adding ``seq``, name)."""
        if not self._current:
            start = self.position()
            with self._journal.connected() as conn:
                rows = conn.execute(
                    "SELECT rel, max(seq), coalesce(max(seq) FILTER (WHERE sign = 1), 0), "
                    "rel::regclass::text FROM _statekit.journal WHERE seq > %s GROUP BY rel",
                    (start,),
                ).fetchall()
            for rel, top, added, name in rows:  # merged: a later read of deletions only keeps the adds
                before = self.last.get(int(rel), (0, 0, ""))
                self.last[int(rel)] = (int(top), max(before[1], int(added)), str(name))
                self.top = max(self.top or 0, int(top))
            self._current = True
        return {rel: entry for rel, entry in self.last.items() if entry[0] > seq}
