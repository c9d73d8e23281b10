"""The coverage check: every live column is included or excluded, the spec names nothing extra, every
sequence is digested or ignored with a reason, and every table's key is proven unique by the schema."""

from __future__ import annotations

import re
from typing import Any

import psycopg

from statekit.digest.spec import DigestSpec
from statekit.errors import CoverageError, SpecError
from statekit.postgres.server import tuples


def live_columns(conn: psycopg.Connection[Any], schema: str) -> dict[str, dict[str, str]]:
    """``{table: {column: data_type}}`` for the base tables of ``schema``."""
    rows = tuples(
        conn,
        """
        SELECT c.table_name, c.column_name, c.data_type
        FROM information_schema.columns c
        JOIN information_schema.tables t
          ON t.table_schema = c.table_schema AND t.table_name = c.table_name
        WHERE c.table_schema = %s AND t.table_type = 'BASE TABLE'
        ORDER BY c.table_name, c.ordinal_position
        """,
        (schema,),
    )
    out: dict[str, dict[str, str]] = {}
    for table, column, dtype in rows:
        out.setdefault(str(table), {})[str(column)] = str(dtype)
    return out


def live_sequences(conn: psycopg.Connection[Any], schema: str) -> dict[str, str | None]:
    """``{sequence: owning table or None}`` for the sequences of ``schema`` (serial and identity
    sequences are owned by their table; a free-standing one by none)."""
    rows = tuples(
        conn,
        """
        SELECT s.relname AS sequence,
               (SELECT t.relname FROM pg_depend d JOIN pg_class t ON t.oid = d.refobjid
                 WHERE d.classid = 'pg_class'::regclass AND d.objid = s.oid
                   AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i') LIMIT 1) AS owner
        FROM pg_class s JOIN pg_namespace n ON n.oid = s.relnamespace
        WHERE s.relkind = 'S' AND n.nspname = %s
        ORDER BY 1
        """,
        (schema,),
    )
    out: dict[str, str | None] = {}
    for name, owner in rows:
        out[str(name)] = str(owner) if owner else None
    return out


def digested_sequences(sequences: dict[str, str | None], spec: DigestSpec) -> list[str]:
    """The sequences a digest covers: all of the schema's, but those of ignored tables and those
    ``[ignored_sequences]`` names."""
    ignored = spec.ignored_sequences or {}
    return sorted(
        name for name, owner in sequences.items() if name not in ignored and owner not in spec.ignored_tables
    )


def unproven_keys(conn: psycopg.Connection[Any], spec: DigestSpec) -> list[str]:
    """Ordered tables whose ``key`` no unique index (primary key, or unique over NOT NULL columns,
    not partial) of the live schema proves unique: rows could tie, and diffs match rows by key."""
    rows = tuples(
        conn,
        """
        SELECT c.relname, array_agg(a.attname ORDER BY a.attname) AS cols,
               bool_and(a.attnotnull) OR bool_or(i.indisprimary) OR bool_or(i.indnullsnotdistinct) AS not_null
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)
        WHERE n.nspname = %s AND i.indisunique AND i.indpred IS NULL AND NOT (0 = ANY(i.indkey))
        GROUP BY c.relname, i.indexrelid
        """,
        (spec.schema,),
    )
    unique: dict[str, list[set[str]]] = {}
    for table, cols, not_null in rows:
        if not_null:
            unique.setdefault(str(table), []).append({str(c) for c in cols})
    problems = []
    for name, table in sorted(spec.tables.items()):
        if table.ordered and not any(index <= set(table.key) for index in unique.get(name, [])):
            problems.append(f"{name}.key {list(table.key)}")
    return problems


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
    rows = tuples(
        conn,
        "SELECT table_name, column_name, column_default FROM information_schema.columns "
        "WHERE table_schema = %s AND column_default IS NOT NULL",
        (spec.schema,),
    )
    leaks = []
    for table, column, default in rows:
        tspec = spec.tables.get(str(table))
        hashed_or_ordering = tspec is not None and (column in tspec.include or column in tspec.key)
        if hashed_or_ordering and _DB_CLOCK.search(str(default)):
            leaks.append(f"{table}.{column} (DEFAULT {default})")
    return sorted(leaks)


def check_coverage(
    conn: psycopg.Connection[Any],
    spec: DigestSpec,
    live: dict[str, dict[str, str]] | None = None,
    sequences: dict[str, str | None] | None = None,
) -> None:
    """Raise SpecError for names the schema lacks, keys it does not prove unique, or digested columns
    filled by the database clock, and CoverageError for live columns the spec misses. ``live`` and
    ``sequences`` save reading the schema again."""
    uncovered, unknown = coverage_problems(
        live if live is not None else live_columns(conn, spec.schema), spec
    )
    present = sequences if sequences is not None else live_sequences(conn, spec.schema)
    unknown += [f"{name} (sequence)" for name in sorted(spec.ignored_sequences or {}) if name not in present]
    if unknown:
        raise SpecError(
            f"{spec.source}: the spec names what schema {spec.schema!r} lacks: {', '.join(unknown)}"
        )
    if uncovered:
        raise CoverageError(uncovered)
    keys = unproven_keys(conn, spec)
    if keys:
        raise SpecError(
            f"{spec.source}: no unique index of schema {spec.schema!r} proves these keys unique, so rows "
            f"could tie: {', '.join(keys)}. Use a primary key or unique NOT NULL columns as the key, or "
            "`ordered = false` if the table is a set."
        )
    leaks = database_clock_columns(conn, spec)
    if leaks:
        raise SpecError(
            f"{spec.source}: digested column(s) filled by the database's clock, which the virtual clock "
            f"cannot reach: {', '.join(leaks)}. Exclude them with a reason, or have the app set them."
        )
