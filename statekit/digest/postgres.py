"""Read digested state from PostgreSQL: canonical rows, in full or from the world's change journal.

A full digest streams every table (rows arrive in chunks, so memory stays flat) in one
``REPEATABLE READ`` transaction, in whatever order the server returns rows: a table's hash is a
multiset hash, so no ``ORDER BY`` (and no collation) is involved. Given the previous digest of the
same world (``since``), the digest is instead updated from the journal entries between the two:
O(rows changed), and always equal to a full recompute of the same snapshot (tested). Dumps still
order rows (by key, text with ``COLLATE "C"``) because diffs match rows by key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads

from statekit.digest.canonical import canonical_json, canonical_value
from statekit.digest.compute import Digest, TableDigest, combine, encode_row, hash_rows
from statekit.digest.coverage import check_coverage, live_columns
from statekit.digest.dump import StateDump, TableDump
from statekit.digest.multiset import MultisetHash
from statekit.digest.spec import DigestSpec, TableSpec
from statekit.postgres.journal import Cut, Journal, delta

_TEXT_TYPES = {"text", "character varying", "character", "citext"}
KeyedRow = tuple[list[Any], dict[str, Any]]
PART = "db"
"""The key of a database digest's resume state inside ``Digest.resume``."""


@dataclass(frozen=True)
class DatabaseResume:
    """What a database digest needs to be updated from the journal later."""

    spec: str
    cut: Cut
    relations: dict[str, dict[int, str]]


def spec_id(spec: DigestSpec) -> str:
    """A digest can only be updated under the spec it was computed with."""
    body = {
        "schema": spec.schema,
        "tables": {
            name: [list(t.key), list(t.columns), sorted(t.canonical.items()), t.ordered]
            for name, t in sorted(spec.tables.items())
        },
    }
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def connect(conninfo: str) -> psycopg.Connection[Any]:
    """A read connection whose JSON numbers load as Decimal (never float) and clock reads UTC."""
    conn = psycopg.connect(conninfo, row_factory=dict_row, autocommit=True)
    set_json_loads(lambda text: json.loads(text, parse_float=Decimal), conn)
    conn.execute("SET TIME ZONE 'UTC'")
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    conn.read_only = True
    return conn


def canonical_row(raw: dict[str, Any], table: TableSpec) -> KeyedRow:
    """(key values, canonical row) of one raw row: included columns and key, each canonicalised."""

    def canon(col: str) -> Any:
        return canonical_value(raw[col], table.canonical.get(col, "auto"), where=f"{table.name}.{col}")

    return [canon(col) for col in table.key], {col: canon(col) for col in table.columns}


def iter_rows(
    conn: psycopg.Connection[Any],
    spec: DigestSpec,
    table: TableSpec,
    types: dict[str, str],
    *,
    ordered: bool = True,
) -> Iterator[KeyedRow]:
    """(key values, canonical row) of one table; in key (or, for a set, content) order if ``ordered``.

    Text columns sort with ``COLLATE "C"`` so the server's locale cannot change the order.
    """

    def order_term(col: str) -> sql.Composable:
        ident = sql.Identifier(col)
        return sql.SQL('{} COLLATE "C"').format(ident) if types.get(col) in _TEXT_TYPES else ident

    selected = list(dict.fromkeys([*table.key, *table.columns]))
    query = sql.SQL("SELECT {cols} FROM {schema}.{table}").format(
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in selected),
        schema=sql.Identifier(spec.schema),
        table=sql.Identifier(table.name),
    )
    if ordered:
        order = table.key if table.ordered else table.columns
        query = query + sql.SQL(" ORDER BY {}").format(sql.SQL(", ").join(order_term(c) for c in order))
    with conn.cursor(row_factory=dict_row) as cur:
        for raw in cur.stream(query, size=2000):  # one round trip; rows arrive in chunks, memory stays flat
            yield canonical_row(raw, table)


def table_rows(
    conn: psycopg.Connection[Any], spec: DigestSpec, table: TableSpec, types: dict[str, str]
) -> Iterator[KeyedRow]:
    """Rows in dump order. A set table (``ordered = false``) is sorted by its canonical rows here,
    not by SQL: canonically equal values (2.5 and 2.50, sorted arrays) must tie, and the order must
    not depend on the server's collation. Sets are held in memory to sort; ordered tables stream."""
    rows = iter_rows(conn, spec, table, types)
    if table.ordered:
        return rows
    return iter(sorted(rows, key=lambda keyed: canonical_json(keyed[1])))


@contextmanager
def _read(target: str | Journal) -> Iterator[tuple[psycopg.Connection[Any], Cut | None]]:
    """One consistent read (REPEATABLE READ): through a world's journal connection (with the cut it
    sees, for resuming later) or a fresh connection."""
    if isinstance(target, Journal) and target.unavailable() is None:
        with target.reading() as (conn, cut):
            yield conn, cut
        return
    conninfo = target.conninfo if isinstance(target, Journal) else target
    with connect(conninfo) as conn, conn.transaction():
        yield conn, None


@contextmanager
def _reader(
    target: str | Journal, spec: DigestSpec, *, check: bool
) -> Iterator[tuple[Callable[[TableSpec, bool], Iterator[KeyedRow]], psycopg.Connection[Any], Cut | None]]:
    """The schema read once, coverage checked, and each table's rows on demand."""
    with _read(target) as (conn, cut):
        live = live_columns(conn, spec.schema)
        if check:
            check_coverage(conn, spec, live)

        def rows(table: TableSpec, ordered: bool) -> Iterator[KeyedRow]:
            types = live.get(table.name, {})
            return (
                table_rows(conn, spec, table, types)
                if ordered
                else iter_rows(conn, spec, table, types, ordered=False)
            )

        yield rows, conn, cut


def postgres_digest(
    target: str | Journal, spec: DigestSpec, *, check: bool = True, since: Digest | None = None
) -> Digest:
    """Digest a database (a conninfo, or a world's ``Journal``).

    With ``since`` (an earlier digest of the same world, through its journal) the digest is updated
    from the journal in O(changes); when that is impossible (no journal, DDL in the episode, another
    spec) it is computed in full. With ``check``, a full digest verifies the spec's coverage first;
    an update needs no check, because the schema cannot change without tainting the journal.
    """
    if since is not None and isinstance(target, Journal):
        updated = _update(target, spec, since)
        if updated is not None:
            return updated
    with _reader(target, spec, check=check) as (rows, conn, cut):
        tables = {
            name: hash_rows(row for _, row in rows(table, False)) for name, table in spec.tables.items()
        }
        resume = None
        if cut is not None and isinstance(target, Journal):
            resume = {PART: DatabaseResume(spec_id(spec), cut, Journal.relations(conn, spec.schema))}
    return combine(tables, resume=resume)


def _update(journal: Journal, spec: DigestSpec, since: Digest) -> Digest | None:
    """``since`` moved along the journal to now, or None when only a full read can tell."""
    resume = since.resume.get(PART) if isinstance(since.resume, dict) else None
    if not isinstance(resume, DatabaseResume) or resume.spec != spec_id(spec):
        return None
    previous = {name: since.tables.get(name) for name in spec.tables}
    if any(t is None or t.acc is None for t in previous.values()):
        return None
    with journal.reading() as (conn, cut):
        if conn.execute("SELECT dirty FROM _statekit.meta").fetchone()[0]:  # type: ignore[index]
            return None
        d = delta(resume.cut, cut)
        if d is None:
            return None
        touched = Journal.touched(conn, d)
        tables: dict[str, TableDigest] = {}
        for name, table in spec.tables.items():
            before = previous[name]
            assert before is not None and before.acc is not None
            rels = resume.relations.get(name, {})
            if not touched & rels.keys():
                tables[name] = before
                continue
            acc: MultisetHash = before.acc.copy()
            for rel in sorted(touched & rels.keys()):
                for sign, raw in Journal.changed_rows(conn, d, rel, rels[rel], table.columns):
                    (acc.add if sign > 0 else acc.remove)(encode_row(_included(raw, table)))
            tables[name] = TableDigest.of(acc)
    return combine(tables, resume={PART: DatabaseResume(resume.spec, cut, resume.relations)})


def _included(raw: dict[str, Any], table: TableSpec) -> dict[str, Any]:
    """The canonical included columns of a journal row (a digest hashes only those)."""
    return {
        col: canonical_value(raw[col], table.canonical.get(col, "auto"), where=f"{table.name}.{col}")
        for col in table.columns
    }


def postgres_dump(target: str | Journal, spec: DigestSpec) -> StateDump:
    """The rows the digest is computed from, table by table, in key order (coverage is checked first)."""
    with _reader(target, spec, check=True) as (rows, _, _cut):
        tables = {
            name: TableDump(
                key=list(table.key),
                ordered=table.ordered,
                rows=[{"key": key, "row": row} for key, row in rows(table, True)],
            )
            for name, table in spec.tables.items()
        }
    return StateDump(tables=tables)
