"""The database's own clock, caught at run time.

Python's clock is virtual, PostgreSQL's is not: ``now()``, ``CURRENT_TIMESTAMP``, a trigger stamping
``updated_at`` or SQLAlchemy's ``onupdate=func.now()`` write the real time. The digest's coverage check
refuses such column *defaults* for digested columns; this control catches the rest as it happens.
After each controlled call it reads the row images the world's change journal gained
(``statekit/postgres/journal.py`` records every row change of the episode), decodes their timestamp
columns through the table's own row type, and reports any value within a day of the database
server's real clock while the episode's virtual clock is elsewhere (more than two days away; closer
than that nothing can be told apart, and nothing is reported). Columns whose *default* reads the
database's clock are the coverage check's (refused when digested, accepted when excluded with a
reason, as the claims app's audit timestamps are), so only triggers and SQL that write the clock
are reported here; an explicit ``now()`` into such a column is not.

Why detect rather than control: PostgreSQL's clock cannot be moved per connection without an
extension, and a ``now()`` shadowed ahead of ``pg_catalog`` in ``search_path`` would miss
``CURRENT_TIMESTAMP`` and every default already parsed into the catalog. Why ``info`` and not the
observation: the agent did nothing wrong and can do nothing about it; the environment's author can.
Each finding goes to the step's ``info["determinism"]`` and the log, and ``statekit check`` fails a
control whose probe replays show one. Worlds without a journal (no PostgreSQL, the container
strategy) are not watched; ``date`` columns are not checked (a day is too coarse to tell).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from statekit.determinism.base import Control, Violation
from statekit.determinism.clock import VirtualClock
from statekit.digest.coverage import reads_database_clock
from statekit.memo import Memo

if TYPE_CHECKING:
    from statekit.postgres.journal import Journal
    from statekit.world import World

WINDOW = timedelta(days=1)
"""How near the real clock a value must be to count, and (twice it) how far the virtual clock must be."""
_COLUMNS: Memo[tuple[str, int], list[tuple[str, bool]]] = Memo()
"""Timestamp columns per (database, table oid): ``(name, has time zone)``. Clones keep their oids."""
_QUERIES: Memo[tuple[str, tuple[tuple[int, str], ...]], str] = Memo()
"""The check's statement per (database, tables written), composed once."""


def _stamps(alias: str, columns: list[tuple[str, bool]]) -> Any:
    """``(name, value as timestamptz)`` for each timestamp column of the row ``alias.r``."""
    from psycopg import sql

    return sql.SQL(", ").join(
        sql.SQL("({}, ({}.r).{}{})").format(
            sql.Literal(name),
            sql.Identifier(alias),
            sql.Identifier(name),
            sql.SQL("" if tz else " AT TIME ZONE 'UTC'"),  # a naive value read as UTC
        )
        for name, tz in columns
    )


class _Watch:
    """One journal and how far along it this episode has looked."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.seen = journal.tail.position() if journal.unavailable() is None else -1

    def check(self, virtual: datetime) -> list[tuple[str, str, str]]:
        """``(table, column, value)`` of new images the database's clock stamped (at most 20)."""
        if self.seen < 0:
            return []
        written = self.journal.tail.since(self.seen)
        if not written:
            return []
        since, self.seen = self.seen, max(top for top, _, _ in written.values())
        with self.journal.connected() as conn:
            stamped = tuple(
                (rel, table)
                for rel, (_, added, table) in sorted(written.items())
                if added > since and self._columns(conn, rel)
            )
            if not stamped:
                return []
            query = self._query(conn, stamped)
            # ``since`` a parameter: the text repeats for the same tables, so psycopg prepares it and
            # the server plans it once
            params = {
                "window": WINDOW,
                "virtual": virtual,
                "seconds": WINDOW.total_seconds(),
                "since": since,
                "until": self.seen,  # what a writer adds after the tail's read is the next check's
            }
            return [(str(t), str(c), str(v)) for t, c, v in conn.execute(query, params).fetchall()]

    def _query(self, conn: Any, stamped: tuple[tuple[int, str], ...]) -> str:
        """The check's statement for these tables, composed once per world and set of tables."""
        key = (self.journal.conninfo, stamped)
        if key in _QUERIES:
            return _QUERIES[key]
        from psycopg import sql

        parts = [
            sql.SQL(
                "SELECT {table}::text, c.col, c.v::text FROM _statekit.journal j "
                "CROSS JOIN LATERAL (SELECT j.img::{qualified} AS r OFFSET 0) x "
                "CROSS JOIN LATERAL (VALUES {new}) c(col, v) "
                "WHERE j.rel = {rel} AND j.seq > %(since)s AND j.seq <= %(until)s AND j.sign = 1 "
                "AND c.v BETWEEN clock_timestamp() - %(window)s AND clock_timestamp() + %(window)s "
                "AND abs(extract(epoch FROM c.v - %(virtual)s)) > %(seconds)s "
                "AND abs(extract(epoch FROM clock_timestamp() - %(virtual)s)) > 2 * %(seconds)s "
                # a value the row already had (an update of another column) was reported when written
                "AND NOT EXISTS (SELECT 1 FROM _statekit.journal o "
                "  CROSS JOIN LATERAL (SELECT o.img::{qualified} AS r OFFSET 0) y "
                "  CROSS JOIN LATERAL (VALUES {old}) d(col, v) "
                "  WHERE o.rel = {rel} AND o.seq > %(since)s AND o.seq <= %(until)s AND o.sign = -1 "
                "  AND d.col = c.col AND d.v = c.v)"
            ).format(
                table=sql.Literal(table),
                qualified=sql.SQL(table),
                new=_stamps("x", self._columns(conn, rel)),
                old=_stamps("y", self._columns(conn, rel)),
                rel=sql.Literal(rel),
            )
            for rel, table in stamped
        ]
        text = (sql.SQL(" UNION ALL ").join(parts) + sql.SQL(" LIMIT 20")).as_string(conn)
        _QUERIES[key] = text
        return text

    def _columns(self, conn: Any, rel: int) -> list[tuple[str, bool]]:
        key = (self.journal.conninfo, rel)
        if key not in _COLUMNS:
            rows = conn.execute(
                "SELECT a.attname, a.atttypid = 'timestamptz'::regtype, pg_get_expr(d.adbin, d.adrelid) "
                "FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
                "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped "
                "AND a.atttypid IN ('timestamptz'::regtype, 'timestamp'::regtype) ORDER BY a.attnum",
                (rel,),
            ).fetchall()
            _COLUMNS[key] = [
                (str(name), bool(tz))
                for name, tz, default in rows
                if not (default and reads_database_clock(str(default)))  # the coverage check's business
            ]
        return _COLUMNS[key]


class DatabaseClock(Control):
    """Watches the world's journal for rows stamped by the database's own clock (see the module)."""

    name: ClassVar[str] = "db_clock"

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self._watches: list[_Watch] = []
        self._found: list[tuple[str, str, str]] = []

    def bind(self, world: World) -> None:
        """Watch ``world`` from its current journal position on."""
        from statekit.postgres.journal import journals_of  # psycopg: not imported with statekit

        self._watches = [_Watch(journal) for journal in journals_of(world)]

    @contextmanager
    def active(self) -> Iterator[None]:
        for watch in self._watches:
            watch.journal.tail.stale()  # the call may write
        yield
        for watch in self._watches:
            self._found += watch.check(self.clock.now)

    def violations(self) -> list[Violation]:
        found, self._found = self._found, []
        if not found:
            return []
        columns = sorted({f"{table}.{column}" for table, column, _ in found})
        table, column, value = found[0]
        return [
            Violation(
                control=self.name,
                code="database_clock",
                message=(
                    f"the real time was written to {table}.{column} = {value} while the episode's clock "
                    f"reads {self.clock.isoformat()} (columns: {', '.join(columns)}). The database's own "
                    "clock stamped it (a column default, a trigger, SQL now()/CURRENT_TIMESTAMP), or an "
                    "application process that reads the machine's clock (statekit.kit.AppProcess gives "
                    "it the episode's): write the time from the application (its clock is virtual), or "
                    "keep the column out of the digest and every observation."
                ),
                detail={"columns": list(columns)},
                visible=False,
            )
        ]
