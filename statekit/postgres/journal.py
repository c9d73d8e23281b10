"""The change journal of a PostgreSQL world: rewind, bookmarks and incremental digests in O(changes).

``install(conninfo)`` puts capture on every table of a golden before it is published (see
``journal_sql`` for what is installed and why), so every clone starts with an empty journal. A
``Journal`` is statekit's own connection to one world plus the world's *path*: the journal entries
(closed ``seq`` ranges) that lead from the golden to the current state. A bookmark (``Mark``) is a
path plus the sequence positions at that moment; moving the world to another path applies the
entries on the target path only forwards and those on the current path only backwards, as one net
multiset of row images per table (``_statekit.move``). Entries are kept while bookmarks may need
them, so a bookmark taken before an earlier one was restored still works (the paths form a tree).

Nothing of the application's connections survives a move or a mark: every other backend connected
to the world is terminated first (``pg_terminate_backend`` waits for it), which ends its open
transactions, prepared statements, temporary tables, advisory locks and session settings.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads

from statekit.errors import RewindError
from statekit.postgres import journal_sql as q
from statekit.postgres import roles
from statekit.postgres.audit import Audit, auditor
from statekit.postgres.journal_paths import OPEN_END, Cut, Delta, Ranges, minus, multirange
from statekit.postgres.journal_tables import row_trigger, truncate_trigger, undo_function
from statekit.postgres.server import rollback_prepared, tuples
from statekit.postgres.tail import Tail
from statekit.world import World

DEFAULT_BOUND = 200_000
"""Row changes a world's journal may hold before the world is discarded instead of rewound."""

NEEDS_SUPERUSER = "the journal needs a superuser connection (event triggers, session_replication_role)"


@dataclass(frozen=True)
class Mark:
    """A bookmark: a quiet cut plus every sequence's position then."""

    cut: Cut
    sequences: dict[str, list[Any]]


def install(conninfo: str, *, bound: int = DEFAULT_BOUND) -> str | None:
    """Install (or reinstall, emptying it) the journal in one database; None, or why it cannot be.

    Needs a superuser: event triggers and ``session_replication_role`` are superuser-only. The
    application's rights go to the world group role (``statekit.postgres.roles``) at the same time:
    a journaled world is only ever handed to the application under a role of its own.
    """
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        if not row or not row[0]:
            return NEEDS_SUPERUSER
        roles.ensure_group(conn)
        with conn.transaction():
            # before our own triggers exist: anything of the app's that would fire during a rewind
            unrewindable = [str(r[0]) for r in conn.execute(q.UNREWINDABLE).fetchall()]
            conn.execute(q.BASE)
            tables = conn.execute(q.TABLES).fetchall()
            for oid, name, relkind, is_partition, key, cols, overriding in tables:
                if relkind == "r":  # rows live here (partitions included): undo and TRUNCATE capture
                    undo = f"undo_{oid}"
                    conn.execute(undo_function(undo, name, oid, key, list(cols or []), overriding))
                    conn.execute(
                        "INSERT INTO _statekit.tables (rel, key, cols, overriding, undo) "
                        "VALUES (%s, %s, %s, %s, %s)",
                        (oid, key, list(cols or []), overriding, undo),
                    )
                    conn.execute(truncate_trigger(name))
                if not is_partition:
                    conn.execute(row_trigger(name))
            for oid, name in conn.execute(q.SEQUENCES).fetchall():
                value, called = conn.execute(
                    sql.SQL("SELECT last_value, is_called FROM {}").format(sql.SQL(name))
                ).fetchone() or (1, False)
                conn.execute("INSERT INTO _statekit.sequences VALUES (%s, %s, %s)", (oid, value, called))
            dirty = "; ".join(unrewindable) or None
            if conn.execute("SELECT EXISTS (SELECT 1 FROM pg_largeobject_metadata)").fetchone()[0]:  # type: ignore[index]
                dirty = "the world holds large objects, which the journal cannot capture"
            conn.execute(
                "INSERT INTO _statekit.meta (version, bound, dirty) VALUES (%s, %s, %s)",
                (q.VERSION, bound, dirty),
            )
            roles.grant_to_group(conn)  # before the event triggers, which would take a GRANT for DDL
            conn.execute(q.EVENT_TRIGGERS)
            conn.execute(q.GOLDEN)
    return None


_SNAPSHOT = sql.SQL("coalesce(nullif(%(snap)s, '')::pg_snapshot, pg_current_snapshot())")
"""The old cut's snapshot; a cut without one (a quiet mark) saw every committed entry."""


class Journal:
    """statekit's own connection to one world, and that world's place on its journal.

    Not shared between threads at the same time (an internal lock serialises calls). The connection
    opens lazily and ``close()`` releases it; ``move`` never terminates it.
    """

    def __init__(self, conninfo: str, *, bound: int = DEFAULT_BOUND, role: str | None = None) -> None:
        self.conninfo = conninfo
        """statekit's own (superuser) connection string to the world."""
        self.database = str(conninfo_to_dict(conninfo).get("dbname"))
        """The world's database name."""
        self.bound = bound
        self.role = role
        """The application's login role on this world (``statekit.postgres.roles``), if it has one."""
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.RLock()
        self.generation = 0
        self._base: Ranges = ()
        self._open_from = 1
        self._available: str | bool | None = True  # True: not known yet; None: available; str: why not
        self._outside = ""
        """``_statekit.outside(role)`` when the copy was first opened, before any episode touched it."""
        self._keeping = False
        """Whether sessions named to keep wait for the next move or mark (``keep``)."""
        self.tail = Tail(self, None)
        """What the journal gained lately, shared by the controls that watch it (``tail.py``)."""
        self._audit: Audit | None = None
        self._auditor: psycopg.Connection[Any] | None = None

    # -- connection -------------------------------------------------------------------------------
    def connection(self) -> psycopg.Connection[Any]:
        """The open connection (autocommit; stable output settings; JSON numbers as Decimal)."""
        if self._conn is None or self._conn.closed:
            conn = psycopg.connect(self.conninfo, autocommit=True, application_name="statekit")
            set_json_loads(lambda text: json.loads(text, parse_float=Decimal), conn)
            conn.execute(f"{q.SESSION_IO}; {q.REPLICA}")
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ  # for reads: their BEGIN says so
            conn.read_only = True  # (moves and marks run outside transactions, in autocommit)
            self._conn = conn
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._audit is not None:
                self._audit.cancel(self._terminate)
            if self._auditor is not None:
                self._auditor.close()
            conn, self._conn, self._audit, self._auditor = self._conn, None, None, None
        if conn is not None and not conn.closed:
            conn.close()

    def _terminate(self, pid: int) -> None:
        """End one backend of this world (statekit's own: an audit that would not stop)."""
        with suppress(psycopg.Error):
            self.connection().execute("SELECT pg_terminate_backend(%s)", (pid,))

    def unavailable(self) -> str | None:
        """Why this world has no usable journal (None when it has one). Asked once per world, which
        is also when this copy's bound is set (a golden may have been built under another)."""
        with self._lock:
            if self._available is True:
                conn = self.connection()
                row = conn.execute("SELECT to_regclass('_statekit.meta') IS NOT NULL").fetchone()
                self._available = None if row and row[0] else "no journal is installed in this world"
                if self._available is None:
                    conn.execute("UPDATE _statekit.meta SET bound = %s WHERE bound <> %s", [self.bound] * 2)
                    found = conn.execute("SELECT _statekit.outside(%s)", (self.role,)).fetchone()
                    self._outside = str(found[0]) if found else ""
            return self._available if isinstance(self._available, str) else None

    @property
    def outside(self) -> str:
        """What ``_statekit.outside`` said when the copy was first opened (a move compares with it)."""
        return self._outside

    # -- where the world is ---------------------------------------------------------------------
    def audit(self) -> None:
        """Check the world against its golden's fingerprints in full, on a snapshot of it as it is now,
        beside the next episode (``audit.py``); a failure refuses the next move or mark."""
        with self._lock:
            self._audited()
            if self._auditor is None or self._auditor.closed:  # first audit, or its backend was ended
                self._auditor = auditor(self.conninfo)
            spare = "SELECT set_config('statekit.spare', %s, false)"  # quiet() spares it from now on
            self.connection().execute(spare, (str(self._auditor.info.backend_pid),))
            self._audit = Audit(self._auditor, self.database)

    def keep(self, pids: Sequence[int]) -> None:
        """Spare these application sessions through the next move or mark only, if each is then idle
        outside a transaction (``_statekit.quiet``); any other is ended as usual. The caller has reset
        each server-side (``DISCARD ALL``: ``DjangoProject.keep``), so nothing of the episode's session
        outlives the rewind but the warm backend itself."""
        with self._lock:
            self.connection().execute(
                "SELECT set_config('statekit.keep', %s, false)", (",".join(str(int(pid)) for pid in pids),)
            )
            self._keeping = bool(pids)

    def _audited(self) -> str | None:
        """Why the last sampled check refused the world (waiting for it), or None."""
        return self._audit.result() if self._audit is not None else None

    def dirty(self) -> str | None:
        """Why the journal no longer describes the world (DDL, overflow, ...), or None."""
        missing = self.unavailable() or self._audited()
        if missing:
            return missing
        row = self.connection().execute("SELECT dirty FROM _statekit.meta").fetchone()
        return str(row[0]) if row and row[0] else None

    def _path_to(self, next_seq: int) -> Ranges:
        if next_seq > self._open_from:
            return (*self._base, (self._open_from, next_seq - 1))
        return self._base

    def cut(self, conn: psycopg.Connection[Any] | None = None) -> Cut:
        """The current cut, read on ``conn`` (inside the caller's transaction) or the own connection."""
        conn = conn or self.connection()
        (row,) = tuples(
            conn,
            "SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END, pg_current_snapshot()::text "
            "FROM _statekit.journal_seq_seq",
        )
        return Cut(self.generation, self._path_to(int(row[0])), str(row[1]))

    @contextmanager
    def connected(self) -> Iterator[psycopg.Connection[Any]]:
        """The own connection (autocommit), held under the journal's lock for a few statements."""
        with self._lock:
            yield self.connection()

    @contextmanager
    def reading(self) -> Iterator[tuple[psycopg.Connection[Any], Cut]]:
        """A consistent read of the world (REPEATABLE READ, read only) with the cut it sees."""
        with self._lock:
            conn = self.connection()
            with conn.transaction():  # BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY
                yield conn, self.cut(conn)

    # -- marks and moves ------------------------------------------------------------------------
    def mark(self) -> Mark:
        """A bookmark of the world as it is now. The application's connections are ended first so no
        transaction straddles the mark."""
        with self._lock, self._kept_once():
            reason = self.dirty()
            if reason:
                raise RewindError(reason)
            row = self._call(
                f"SELECT _statekit.sequence_positions(), ({q.NEXT_SEQ})",
                (),
                roll_back_prepared=False,  # they are part of the world being marked: copy it instead
            )
            return Mark(Cut(self.generation, self._path_to(int(row[1]))), dict(row[0]))

    def _call(self, query: str, params: Sequence[Any], *, roll_back_prepared: bool = True) -> tuple[Any, ...]:
        """Run one of the journal's functions: prepared transactions left in the world are rolled back
        (then it runs again) when ``roll_back_prepared``; a tainted journal is a RewindError with its
        reason, any other failure (the connection's included) too."""
        for attempt in (1, 2):
            try:
                conn = self.connection()
                row = conn.execute(query, params).fetchone()
            except psycopg.Error as exc:
                if "statekit-prepared" in _first_line(exc) and roll_back_prepared and attempt == 1:
                    rollback_prepared(conn)
                    continue  # (the kept sessions, restored by the rollback, are for this try too)
                raise _rewind_error(exc) from exc
            assert row is not None
            self._keeping = False  # quiet() took them
            return tuple(row)
        raise AssertionError("unreachable")

    @contextmanager
    def _kept_once(self) -> Iterator[None]:
        """Sessions named to keep (``keep``) are for the move or mark in the block only: forgotten when
        it fails, before or in ``quiet()`` (whose clearing the failed call's rollback undid)."""
        try:
            yield
        except BaseException:
            if self._keeping:
                self._keeping = False
                with suppress(psycopg.Error):
                    self.connection().execute("SELECT set_config('statekit.keep', '', false)")
            raise

    def move(self, to: Mark | None, *, reset: bool = False, verify: bool = False) -> int:
        """Put the world at ``to`` (None: the golden). ``reset`` (only with ``to=None``) also empties the
        journal: allowed when no bookmark on this world is still wanted. ``verify`` (only with
        ``to=None``) then compares every row, sequence and catalog entry with the golden's
        fingerprints (O(rows): for a sample of rewinds). Returns rows moved.

        Raises RewindError when the journal cannot express what happened, or the world is not what the
        journal says (the world must then be discarded); the world is unchanged by a failed move (one
        transaction) except that the application's connections are gone.
        """
        if (reset or verify) and to is not None:
            raise ValueError("reset and verify are for a move to the golden only")
        with self._lock, self._kept_once():
            missing = self.unavailable() or self._audited()
            if missing:
                raise RewindError(missing)
            target: Ranges = () if to is None else to.cut.path
            if to is not None and to.cut.generation != self.generation:
                raise RewindError("the bookmark is older than the journal (it was emptied since)")
            current = (*self._base, (self._open_from, OPEN_END))  # no need to ask where it ends
            fwd, back = minus(target, current), minus(current, target)
            seqs = json.dumps(to.sequences if to is not None else {})
            row = self._call(
                "SELECT _statekit.move(%s::int8multirange, %s::int8multirange, %s::jsonb, %s, %s, %s, %s), "
                f"({q.NEXT_SEQ})",
                (multirange(fwd), multirange(back), seqs, reset, self.role, self._outside, verify),
            )
            if reset:
                self.generation += 1
                self._base, self._open_from = (), 1
            else:
                self._base, self._open_from = target, int(row[1])
            self.tail = Tail(self, int(row[1]) - 1 if not reset else 0)
            return int(row[0])

    # -- moving a world's changes to another copy of its golden -------------------------------
    def changes(self) -> dict[str, Any]:
        """The world's net changes since its golden, as data ``apply_changes`` applies to another copy
        of the same golden (in another process or on another machine): per table, by qualified name,
        each distinct row image with its net count, and every sequence's position. O(changes)."""
        with self._lock:
            mark = self.mark()  # the application's connections end first: nothing straddles the read
            path = multirange(mark.cut.path)
            (found,) = tuples(self.connection(), q.CHANGES, (path, json.dumps(mark.sequences)))
        return {"rows": found[0], "sequences": found[1]}

    def apply_changes(self, changes: dict[str, Any]) -> int:
        """Bring this copy, which must be at its golden, to ``changes`` (what ``changes`` read from
        another copy of the golden): they enter its journal as if its own episode had written them, so
        it rewinds as usual. Each change must land (every row to delete found), so the copy ends
        exactly where the one they were read from was, given the same golden. One transaction, the
        sequences set last: a refused apply leaves the copy at its golden (one that fails while setting
        the sequences may leave some moved: rewind it). Returns rows moved; RewindError says why not."""
        try:
            rows, seqs = list(changes["rows"]), dict(changes["sequences"])
            flat: list[tuple[str, int, str]] = [(str(t), int(n), str(img)) for t, n, img in rows]
        except (KeyError, TypeError, ValueError) as exc:
            raise RewindError(f"not a journal's changes: {exc}") from exc
        with self._lock, self._kept_once():
            missing = self.unavailable() or self._audited()  # a tainted journal: the move below refuses
            if missing:
                raise RewindError(missing)
            conn = self.connection()
            conn.read_only = False
            try:
                with conn.transaction():
                    ((unknown, moved_on),) = tuples(
                        conn, q.TAKE_CHECK, (sorted({r[0] for r in flat}), json.dumps(seqs), self._open_from)
                    )
                    if self._base or moved_on:
                        raise RewindError("changes are taken by a copy at its golden only")
                    if unknown:
                        raise RewindError(f"this world has no journaled {', '.join(unknown)}")
                    conn.execute(q.TAKE_ROWS, (json.dumps(flat),))
                    (moved,) = tuples(  # rows only: the sequences stay the golden's for now
                        conn,
                        "SELECT _statekit.move(%s::int8multirange, '{}', '{}', false, %s, %s, false), "
                        f"({q.NEXT_SEQ})",
                        (multirange([(self._open_from, OPEN_END)]), self.role, self._outside),
                    )
                    expected = sum(abs(n) for _, n, _ in flat)
                    if int(moved[0]) != expected:  # a row to delete was not there: another golden
                        raise RewindError(
                            f"{expected} row changes to apply, {moved[0]} applied: this copy's golden is not "
                            "the one the changes were read against"
                        )
                    # last: a sequence's position does not roll back with the transaction
                    conn.execute(q.SET_SEQUENCES, (json.dumps(seqs),))
            except psycopg.Error as exc:
                raise _rewind_error(exc) from exc
            finally:
                if not conn.closed:
                    conn.read_only = True
            self.tail = Tail(self, int(moved[1]) - 1)
            return int(moved[0])

    # -- reading changes --------------------------------------------------------------------------
    @staticmethod
    def relations(conn: psycopg.Connection[Any], schema: str) -> dict[str, dict[int, str]]:
        """``{table: {oid: qualified name}}`` for the tables of ``schema``: every table holding its rows
        (itself when it is a plain table, its partitions, its inheritance children), which is where
        their journal entries are recorded and what a full read of the table sees."""
        rows = tuples(
            conn,
            "WITH RECURSIVE tree(root, relid) AS ("
            "  SELECT c.oid, c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            "  WHERE n.nspname = %s AND c.relkind IN ('r', 'p')"
            "  UNION SELECT t.root, i.inhrelid FROM tree t JOIN pg_inherits i ON i.inhparent = t.relid) "
            "SELECT r.relname, k.oid, k.oid::regclass::text FROM tree t "
            "JOIN pg_class r ON r.oid = t.root JOIN pg_class k ON k.oid = t.relid WHERE k.relkind = 'r'",
            (schema,),
        )
        out: dict[str, dict[int, str]] = {}
        for name, oid, qualified in rows:
            out.setdefault(str(name), {})[int(oid)] = str(qualified)
        return out

    @staticmethod
    def touched(conn: psycopg.Connection[Any], d: Delta) -> set[int]:
        """Relations with an entry in ``d``."""
        rows = tuples(
            conn,
            "SELECT DISTINCT rel FROM _statekit.journal WHERE seq <@ %s::int8multirange "
            "OR seq <@ %s::int8multirange OR (seq <@ %s::int8multirange "
            "AND NOT pg_visible_in_snapshot(xid, %s::pg_snapshot))",
            (multirange(d.fwd), multirange(d.back), multirange(d.late), d.old_snapshot or "1:1:"),
        )
        return {int(r[0]) for r in rows}

    @staticmethod
    def changed_rows(
        conn: psycopg.Connection[Any], d: Delta, rel: int, table: str, columns: Sequence[str]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(sign, row)`` for each entry of ``rel`` in ``d``: +1 rows to add to a digest, -1 to remove.

        Rows are decoded through the table's own row type (``table``: its qualified, quoted name as
        ``Journal.relations`` gives it), so they carry exactly the values a full read would.
        """
        picked = sql.SQL(", ").join(
            sql.SQL("(x.r).{} AS {}").format(sql.Identifier(c), sql.Identifier(c)) for c in columns
        )
        query = sql.SQL(
            "SELECT CASE WHEN j.seq <@ %(back)s::int8multirange THEN -j.sign ELSE j.sign END "
            "AS statekit_sign, "
            "{picked} FROM _statekit.journal j "
            "CROSS JOIN LATERAL (SELECT j.img::{table} AS r OFFSET 0) x "
            "WHERE j.rel = %(rel)s AND (j.seq <@ %(fwd)s::int8multirange "
            "OR (j.seq <@ %(back)s::int8multirange AND pg_visible_in_snapshot(j.xid, {snap})) "
            "OR (j.seq <@ %(late)s::int8multirange AND NOT pg_visible_in_snapshot(j.xid, {snap})))"
        ).format(picked=picked, table=sql.SQL(table), snap=_SNAPSHOT)
        params = {
            "back": multirange(d.back),
            "fwd": multirange(d.fwd),
            "late": multirange(d.late),
            "rel": rel,
            "snap": d.old_snapshot,
        }
        with conn.cursor(row_factory=dict_row) as cur:
            for row in cur.execute(query, params):
                sign = int(row.pop("statekit_sign"))
                yield sign, row


def _first_line(exc: psycopg.Error) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else repr(exc)


def _rewind_error(exc: psycopg.Error) -> RewindError:
    """A failed journal statement as a RewindError: a tainted journal's reason, or the failure."""
    message = _first_line(exc)
    if "statekit-dirty: " in message:
        return RewindError(message.split("statekit-dirty: ", 1)[1])
    return RewindError(f"the journal failed: {message}")


def journals_of(world: World) -> Iterator[Journal]:
    """Every change journal among a world's parts (a composite world holds one world per part)."""
    if isinstance(world.handle, Journal):
        yield world.handle
    elif isinstance(world.handle, dict):
        for part in world.handle.values():
            if isinstance(part, World):
                yield from journals_of(part)
