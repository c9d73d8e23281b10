"""The coverage check: every live column is included or excluded, and the spec names nothing extra."""

from __future__ import annotations

import re
from typing import Any

import psycopg

from statekit.digest.spec import DigestSpec
from statekit.errors import CoverageError, SpecError


def live_columns(conn: psycopg.Connection[Any], schema: str) -> dict[str, dict[str, str]]:
    """``{table: {column: data_type}}`` for the base tables of ``schema``."""
    rows = conn.execute(
        """
        SELECT c.table_name, c.column_name, c.data_type
        FROM information_schema.columns c
        JOIN information_schema.tables t
          ON t.table_schema = c.table_schema AND t.table_name = c.table_name
        WHERE c.table_schema = %s AND t.table_type = 'BASE TABLE'
        ORDER BY c.table_name, c.ordinal_position
        """,
        (schema,),
    ).fetchall()
    out: dict[str, dict[str, str]] = {}
    for row in rows:
        table, column, dtype = (
            (row["table_name"], row["column_name"], row["data_type"]) if isinstance(row, dict) else row
        )
        out.setdefault(str(table), {})[str(column)] = str(dtype)
    return out


def coverage_problems(live: dict[str, dict[str, str]], spec: DigestSpec) -> tuple[list[str], list[str]]:
    """(uncovered live columns, spec names the schema lacks), each as sorted ``table.column`` strings."""
    uncovered: list[str] = []
    unknown: list[str] = []
    for table, columns in live.items():
        if table in spec.ignored_tables:
            continue
        tspec = spec.tables.get(table)
        if tspec is None:
            uncovered.extend(f"{table}.{col}" for col in columns)
            continue
        known = set(tspec.include) | set(tspec.exclude)
        uncovered.extend(f"{table}.{col}" for col in columns if col not in known)
    for name in [*spec.tables, *spec.ignored_tables]:
        if name not in live:
            unknown.append(f"{name} (table)")
    for name, tspec in spec.tables.items():
        present = live.get(name)
        if present is None:
            continue
        for col in [*tspec.include, *tspec.exclude, *tspec.key]:
            if col not in present:
                unknown.append(f"{name}.{col}")
    return sorted(set(uncovered)), sorted(set(unknown))


_DB_CLOCK = re.compile(
    r"\b(now|clock_timestamp|statement_timestamp|transaction_timestamp|timeofday|random|"
    r"gen_random_uuid|uuid_generate_v[14])\s*\(|"
    r"\b(current_timestamp|current_date|current_time|localtimestamp|localtime)\b",
    re.IGNORECASE,
)
"""Defaults the database computes from its own clock or randomness, which no Python patch reaches."""


def database_clock_columns(conn: psycopg.Connection[Any], spec: DigestSpec) -> list[str]:
    """Included columns whose default reads the database's own clock, which no Python patch reaches."""
    rows = conn.execute(
        "SELECT table_name, column_name, column_default FROM information_schema.columns "
        "WHERE table_schema = %s AND column_default IS NOT NULL",
        (spec.schema,),
    ).fetchall()
    leaks = []
    for row in rows:
        table, column, default = (
            (row["table_name"], row["column_name"], row["column_default"]) if isinstance(row, dict) else row
        )
        tspec = spec.tables.get(str(table))
        hashed_or_ordering = tspec is not None and (column in tspec.include or column in tspec.key)
        if hashed_or_ordering and _DB_CLOCK.search(str(default)):
            leaks.append(f"{table}.{column} (DEFAULT {default})")
    return sorted(leaks)


def check_coverage(
    conn: psycopg.Connection[Any], spec: DigestSpec, live: dict[str, dict[str, str]] | None = None
) -> None:
    """Raise SpecError for names the schema lacks or digested columns filled by the database clock,
    and CoverageError for live columns the spec misses. ``live`` saves reading the schema again."""
    uncovered, unknown = coverage_problems(
        live if live is not None else live_columns(conn, spec.schema), spec
    )
    if unknown:
        raise SpecError(
            f"{spec.source}: the spec names what schema {spec.schema!r} lacks: {', '.join(unknown)}"
        )
    if uncovered:
        raise CoverageError(uncovered)
    leaks = database_clock_columns(conn, spec)
    if leaks:
        raise SpecError(
            f"{spec.source}: digested column(s) filled by the database's clock, which the virtual clock "
            f"cannot reach: {', '.join(leaks)}. Exclude them with a reason, or have the app set them."
        )
