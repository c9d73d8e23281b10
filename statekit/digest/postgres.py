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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads

from statekit.digest.canonical import (
    AUTO_AS_IS,
    CANONICALISERS,
    Canonicaliser,
    canonical_json,
    canonicaliser_for,
)
from statekit.digest.compute import Digest, TableDigest, combine, encode_row, hash_rows
from statekit.digest.coverage import check_coverage, digested_sequences, live_columns, live_sequences
from statekit.digest.dump import StateDump, TableDump
from statekit.digest.multiset import MultisetHash
from statekit.digest.spec import DigestSpec, TableSpec
from statekit.postgres.journal import Journal
from statekit.postgres.journal_paths import Cut, delta
from statekit.postgres.server import tuples

KeyedRow = tuple[list[Any], dict[str, Any]]
_AUTO = CANONICALISERS["auto"]
SEQUENCES_PREFIX = "sequences:"
PART = "db"
"""The key of a database digest's resume state inside ``Digest.resume``."""


@dataclass(frozen=True)
class DatabaseResume:
    """What a database digest needs to be updated from the journal later."""

    spec: str
    cut: Cut
    relations: dict[str, dict[int, str]]
    columns: dict[str, dict[str, str]]
    """Column types per table (they choose canonicalisers; no DDL can change them while it is valid)."""
    sequences: list[str]


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


class RowCanonicaliser:
    """The canonicalisers of one table's key and included columns, chosen once per read: the spec's
    choice for a column, else its SQL type's default (json and jsonb: ``json``)."""

    def __init__(self, table: TableSpec, types: dict[str, str]) -> None:
        self.table = table
        self._key = [
            (col, canonicaliser_for(table.canonical.get(col), types.get(col, ""))) for col in table.key
        ]
        self._row = [
            (col, canonicaliser_for(table.canonical.get(col), types.get(col, ""))) for col in table.columns
        ]

    def _apply(self, raw: dict[str, Any], col: str, canon: Canonicaliser) -> Any:
        value = raw[col]
        if value is None or (canon is _AUTO and type(value) in AUTO_AS_IS):  # most values: no call
            return value
        return canon.apply(value, f"{self.table.name}.{col}")

    def row(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The canonical included columns (what a digest hashes)."""
        return {col: self._apply(raw, col, canon) for col, canon in self._row}

    def keyed(self, raw: dict[str, Any]) -> KeyedRow:
        """(canonical key values, canonical row)."""
        return [self._apply(raw, col, canon) for col, canon in self._key], self.row(raw)


def _raw_rows(
    conn: psycopg.Connection[Any], spec: DigestSpec, table: TableSpec, columns: list[str]
) -> Iterator[dict[str, Any]]:
    query = sql.SQL("SELECT {cols} FROM {schema}.{table}").format(
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        schema=sql.Identifier(spec.schema),
        table=sql.Identifier(table.name),
    )
    with conn.cursor(row_factory=dict_row) as cur:
        yield from cur.stream(query, size=2000)  # one round trip; rows arrive in chunks, memory stays flat


def iter_rows(
    conn: psycopg.Connection[Any], spec: DigestSpec, table: TableSpec, types: dict[str, str]
) -> Iterator[KeyedRow]:
    """(key values, canonical row) of one table, in whatever order the server returns them."""
    canon = RowCanonicaliser(table, types)
    for raw in _raw_rows(conn, spec, table, list(dict.fromkeys([*table.key, *table.columns]))):
        yield canon.keyed(raw)


def canonical_rows(
    conn: psycopg.Connection[Any], spec: DigestSpec, table: TableSpec, types: dict[str, str]
) -> Iterator[dict[str, Any]]:
    """The canonical rows of one table (what its digest hashes; no key read), in any order."""
    canon = RowCanonicaliser(table, types)
    for raw in _raw_rows(conn, spec, table, list(table.columns)):
        yield canon.row(raw)


def table_rows(
    conn: psycopg.Connection[Any], spec: DigestSpec, table: TableSpec, types: dict[str, str]
) -> list[KeyedRow]:
    """Rows in dump order, sorted here by their canonical key (or, for a set, their canonical row):
    byte order of canonical JSON, so neither the server's collation nor a type's own ordering (citext)
    decides it, and canonically equal values tie."""
    rows = iter_rows(conn, spec, table, types)
    if table.ordered:
        return sorted(rows, key=lambda keyed: canonical_json(keyed[0]))
    return sorted(rows, key=lambda keyed: canonical_json(keyed[1]))


def sequence_rows(conn: psycopg.Connection[Any], schema: str, names: list[str]) -> list[dict[str, Any]]:
    """``{name, last_value, is_called}`` of each sequence (one query for all of them)."""
    if not names:
        return []
    query = sql.SQL(" UNION ALL ").join(
        sql.SQL("SELECT {} AS name, last_value, is_called FROM {}.{}").format(
            sql.Literal(name), sql.Identifier(schema), sql.Identifier(name)
        )
        for name in names
    )
    with conn.cursor(row_factory=dict_row) as cur:
        return [dict(row) for row in cur.execute(query).fetchall()]


def sequences_table(spec: DigestSpec) -> str:
    """The digest table holding the positions of the schema's sequences."""
    return f"{SEQUENCES_PREFIX}{spec.schema}"


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


@dataclass(frozen=True)
class _Schema:
    """What one read learned of the live schema: column types and the sequences a digest covers."""

    columns: dict[str, dict[str, str]]
    sequences: list[str]


@contextmanager
def _reader(
    target: str | Journal, spec: DigestSpec, *, check: bool
) -> Iterator[tuple[psycopg.Connection[Any], _Schema, Cut | None]]:
    """One consistent read: the schema read once and (with ``check``) the spec's coverage checked."""
    with _read(target) as (conn, cut):
        live = live_columns(conn, spec.schema)
        sequences = live_sequences(conn, spec.schema)
        if check:
            check_coverage(conn, spec, live, sequences)
        yield conn, _Schema(live, digested_sequences(sequences, spec)), cut


def postgres_digest(
    target: str | Journal, spec: DigestSpec, *, check: bool = True, since: Digest | None = None
) -> Digest:
    """Digest a database (a conninfo, or a world's ``Journal``): every digested table, plus a table
    of the schema's sequence positions (they decide the next ids).

    With ``since`` (an earlier digest of the same world, through its journal) the digest is updated
    from the journal in O(changes); when that is impossible (no journal, DDL in the episode, another
    spec) it is computed in full. With ``check``, a full digest verifies the spec's coverage first;
    an update needs no check, because the schema cannot change without tainting the journal.
    """
    if since is not None and isinstance(target, Journal):
        updated = _update(target, spec, since)
        if updated is not None:
            return updated
    with _reader(target, spec, check=check) as (conn, schema, cut):
        tables = {
            name: hash_rows(canonical_rows(conn, spec, table, schema.columns.get(name, {})))
            for name, table in spec.tables.items()
        }
        tables[sequences_table(spec)] = hash_rows(sequence_rows(conn, spec.schema, schema.sequences))
        resume = None
        if cut is not None and isinstance(target, Journal):
            relations = Journal.relations(conn, spec.schema)
            resume = {PART: DatabaseResume(spec_id(spec), cut, relations, schema.columns, schema.sequences)}
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
            canon = RowCanonicaliser(table, resume.columns.get(name, {}))
            for rel in sorted(touched & rels.keys()):
                for sign, raw in Journal.changed_rows(conn, d, rel, rels[rel], table.columns):
                    (acc.add if sign > 0 else acc.remove)(encode_row(canon.row(raw)))
            tables[name] = TableDigest.of(acc)
        tables[sequences_table(spec)] = hash_rows(sequence_rows(conn, spec.schema, resume.sequences))
    return combine(
        tables,
        resume={PART: DatabaseResume(resume.spec, cut, resume.relations, resume.columns, resume.sequences)},
    )


def postgres_dump(target: str | Journal, spec: DigestSpec) -> StateDump:
    """The rows the digest is computed from, table by table, in canonical key order (coverage is
    checked first), with the sequences' positions."""
    with _reader(target, spec, check=True) as (conn, schema, _):
        tables = {
            name: TableDump(
                key=list(table.key),
                ordered=table.ordered,
                rows=[
                    {"key": key, "row": row}
                    for key, row in table_rows(conn, spec, table, schema.columns.get(name, {}))
                ],
            )
            for name, table in spec.tables.items()
        }
        positions = sequence_rows(conn, spec.schema, schema.sequences)
        tables[sequences_table(spec)] = TableDump(
            key=["name"], ordered=True, rows=[{"key": [row["name"]], "row": row} for row in positions]
        )
    return StateDump(tables=tables)


def postgres_changes(
    journal: Journal, spec: DigestSpec, golden: Digest
) -> tuple[StateDump, StateDump] | None:
    """The digested rows a world changed since its golden, read from its journal in O(changes): two
    partial dumps (the golden's side, the world's side) holding only rows that differ, so diffing
    them gives exactly what diffing the full dumps would. ``golden`` is the golden's digest as taken
    through a journal. None when only full dumps can tell (no journal, DDL, another spec)."""
    resume = golden.resume.get(PART) if isinstance(golden.resume, dict) else None
    if not isinstance(resume, DatabaseResume) or resume.spec != spec_id(spec) or resume.cut.path:
        return None
    if journal.unavailable() is not None:
        return None
    with journal.reading() as (conn, cut):
        if conn.execute("SELECT dirty FROM _statekit.meta").fetchone()[0]:  # type: ignore[index]
            return None
        d = delta(resume.cut, cut)
        if d is None:
            return None
        touched = Journal.touched(conn, d)
        then: dict[str, TableDump] = {}
        now: dict[str, TableDump] = {}
        for name, table in spec.tables.items():
            rels = resume.relations.get(name, {})
            if not touched & rels.keys():
                continue
            canon = RowCanonicaliser(table, resume.columns.get(name, {}))
            net: dict[str, tuple[KeyedRow, int]] = {}
            selected = list(dict.fromkeys([*table.key, *table.columns]))
            for rel in sorted(touched & rels.keys()):
                for sign, raw in Journal.changed_rows(conn, d, rel, rels[rel], selected):
                    keyed = canon.keyed(raw)
                    ident = canonical_json([keyed[0], keyed[1]])
                    net[ident] = (keyed, net.get(ident, (keyed, 0))[1] + sign)
            order = 0 if table.ordered else 1
            for side, wanted in ((then, -1), (now, 1)):
                ordered = sorted(
                    (keyed for keyed, n in net.values() for _ in range(max(0, n * wanted))),
                    key=lambda keyed: canonical_json(keyed[order]),
                )
                side[name] = TableDump(
                    key=list(table.key),
                    ordered=table.ordered,
                    rows=[{"key": k, "row": r} for k, r in ordered],
                )
        positions = {row["name"]: row for row in sequence_rows(conn, spec.schema, resume.sequences)}
        recorded = tuples(
            conn,
            "SELECT c.relname, s.last_value, s.is_called FROM _statekit.sequences s "
            "JOIN pg_class c ON c.oid = s.rel JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s",
            (spec.schema,),
        )
        initial = {
            str(n): {"name": str(n), "last_value": v, "is_called": c}
            for n, v, c in recorded
            if str(n) in positions
        }
        moved = sorted(n for n in positions if positions[n] != initial.get(n))
        name = sequences_table(spec)
        for side, at in ((then, initial), (now, positions)):
            side[name] = TableDump(
                key=["name"], ordered=True, rows=[{"key": [n], "row": at[n]} for n in moved if n in at]
            )
    return StateDump(tables=then), StateDump(tables=now)
