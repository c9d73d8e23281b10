"""Read digested state from PostgreSQL: canonical rows streamed through a server-side cursor.

Memory stays flat as data grows: rows arrive in batches and are hashed as they come. The same
rows feed the digest and the dump, so a digest and a diff can never disagree.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads

from statekit.digest.canonical import canonical_json, canonical_value
from statekit.digest.compute import Digest, combine, hash_rows
from statekit.digest.coverage import check_coverage, live_columns
from statekit.digest.dump import StateDump, TableDump
from statekit.digest.spec import DigestSpec, TableSpec

_TEXT_TYPES = {"text", "character varying", "character", "citext"}
KeyedRow = tuple[list[Any], dict[str, Any]]


def connect(conninfo: str) -> psycopg.Connection[Any]:
    """A read connection whose JSON numbers load as Decimal (never float) and clock reads UTC."""
    conn = psycopg.connect(conninfo, row_factory=dict_row, autocommit=True)
    set_json_loads(lambda text: json.loads(text, parse_float=Decimal), conn)
    conn.execute("SET TIME ZONE 'UTC'")
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    conn.read_only = True
    return conn


def iter_rows(
    conn: psycopg.Connection[Any], spec: DigestSpec, table: TableSpec, types: dict[str, str]
) -> Iterator[KeyedRow]:
    """(key values, canonical row) of one table in digest order: by key, or by content for a set.

    Text columns sort with ``COLLATE "C"`` so the server's locale cannot change the order.
    """

    def order_term(col: str) -> sql.Composable:
        ident = sql.Identifier(col)
        return sql.SQL('{} COLLATE "C"').format(ident) if types.get(col) in _TEXT_TYPES else ident

    selected = list(dict.fromkeys([*table.key, *table.columns]))
    order = table.key if table.ordered else table.columns
    query = sql.SQL("SELECT {cols} FROM {schema}.{table} ORDER BY {order}").format(
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in selected),
        schema=sql.Identifier(spec.schema),
        table=sql.Identifier(table.name),
        order=sql.SQL(", ").join(order_term(c) for c in order),
    )
    with conn.cursor(name=f"digest_{table.name}") as cur:
        cur.itersize = 2000
        cur.execute(query)
        for raw in cur:
            row = {
                col: canonical_value(raw[col], table.canonical.get(col, "auto"), where=f"{table.name}.{col}")
                for col in table.columns
            }
            key = [
                canonical_value(raw[col], table.canonical.get(col, "auto"), where=f"{table.name}.{col}")
                for col in table.key
            ]
            yield key, row


def table_rows(
    conn: psycopg.Connection[Any], spec: DigestSpec, table: TableSpec, types: dict[str, str]
) -> Iterator[KeyedRow]:
    """Rows in digest order. A set table (``ordered = false``) is sorted by its canonical rows here,
    not by SQL: canonically equal values (2.5 and 2.50, sorted arrays) must tie, and the order must
    not depend on the server's collation. Sets are held in memory to sort; ordered tables stream."""
    rows = iter_rows(conn, spec, table, types)
    if table.ordered:
        return rows
    return iter(sorted(rows, key=lambda keyed: canonical_json(keyed[1])))


@contextmanager
def _reader(
    conninfo: str, spec: DigestSpec, *, check: bool
) -> Iterator[Callable[[TableSpec], Iterator[KeyedRow]]]:
    """One consistent read of a database (a single REPEATABLE READ transaction): the schema is read
    once, coverage checked, and the result gives each table's rows in digest order."""
    with connect(conninfo) as conn, conn.transaction():
        live = live_columns(conn, spec.schema)
        if check:
            check_coverage(conn, spec, live)
        yield lambda table: table_rows(conn, spec, table, live.get(table.name, {}))


def postgres_digest(conninfo: str, spec: DigestSpec, *, check: bool = True) -> Digest:
    """Digest a live database; with ``check``, the spec's coverage of the schema is verified first."""
    with _reader(conninfo, spec, check=check) as rows:
        tables = {name: hash_rows(row for _, row in rows(table)) for name, table in spec.tables.items()}
    return combine(tables)


def postgres_dump(conninfo: str, spec: DigestSpec) -> StateDump:
    """The rows the digest is computed from, table by table (coverage is checked first)."""
    with _reader(conninfo, spec, check=True) as rows:
        tables = {
            name: TableDump(
                key=list(table.key),
                ordered=table.ordered,
                rows=[{"key": key, "row": row} for key, row in rows(table)],
            )
            for name, table in spec.tables.items()
        }
    return StateDump(tables=tables)
