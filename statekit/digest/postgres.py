"""Read digested state from PostgreSQL: canonical rows streamed through a server-side cursor.

Memory stays flat as data grows: rows arrive in batches and are hashed as they come.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads

from statekit.digest.canonical import canonical_value
from statekit.digest.compute import Digest, combine, hash_rows
from statekit.digest.coverage import check_coverage, live_columns
from statekit.digest.spec import DigestSpec, TableSpec

_TEXT_TYPES = {"text", "character varying", "character", "citext"}


def connect(conninfo: str) -> psycopg.Connection[Any]:
    """A read connection whose JSON numbers load as Decimal (never float) and clock reads UTC."""
    conn = psycopg.connect(conninfo, row_factory=dict_row, autocommit=True)
    set_json_loads(lambda text: json.loads(text, parse_float=Decimal), conn)
    conn.execute("SET TIME ZONE 'UTC'")
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    conn.read_only = True
    return conn


def iter_rows(conn: psycopg.Connection[Any], spec: DigestSpec, table: TableSpec) -> Iterator[dict[str, Any]]:
    """Canonical rows of one table, ordered by its key (text keys in byte order, whatever the locale)."""
    types = live_columns(conn, spec.schema).get(table.name, {})
    order = [
        sql.SQL('{} COLLATE "C"').format(sql.Identifier(col))
        if types.get(col) in _TEXT_TYPES
        else sql.Identifier(col)
        for col in table.key
    ]
    query = sql.SQL("SELECT {cols} FROM {schema}.{table} ORDER BY {order}").format(
        cols=sql.SQL(", ").join(sql.Identifier(c) for c in table.columns),
        schema=sql.Identifier(spec.schema),
        table=sql.Identifier(table.name),
        order=sql.SQL(", ").join(order),
    )
    with conn.cursor(name=f"digest_{table.name}") as cur:
        cur.itersize = 2000
        cur.execute(query)
        for raw in cur:
            yield {
                col: canonical_value(raw[col], table.canonical.get(col, "auto"), where=f"{table.name}.{col}")
                for col in table.columns
            }


def postgres_digest(conninfo: str, spec: DigestSpec, *, check: bool = True) -> Digest:
    """Digest a live database; with ``check``, the spec's coverage of the schema is verified first."""
    with connect(conninfo) as conn, conn.transaction():
        if check:
            check_coverage(conn, spec)
        tables = {name: hash_rows(iter_rows(conn, spec, table)) for name, table in spec.tables.items()}
    return combine(tables)
