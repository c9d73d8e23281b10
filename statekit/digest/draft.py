"""A first digest spec from a live schema (``statekit spec init``): every table and column, with the
ones that look like noise marked for the author to decide.

Nothing is left out silently: a column is either included or excluded, and every exclusion, ignored
table and set table carries a reason that starts with ``DECIDE:`` and says what it looked like:

- audit timestamps: a timestamp column named like ``created_at``/``updated_at``, or filled by the
  database clock (``DEFAULT now()``);
- random ids: a column whose default draws randomness (``gen_random_uuid()``, ``random()``);
- counters: an integer named like ``*_count``, ``version``, ``hits``;
- session rows: a table named like ``sessions``, ``tokens``, ``*_sessions``.

Keys are each table's primary key, else a unique index over NOT NULL columns; a table with neither is
written as a set (``ordered = false``). Review every ``DECIDE:`` line, then keep the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import psycopg

from statekit.digest.coverage import live_columns
from statekit.digest.spec import DEFAULT_SCHEMA
from statekit.postgres.server import tuples

_AUDIT_NAME = re.compile(r"^(created|updated|modified|inserted|deleted|changed)(_at|_on|_time|_date)?$|_at$")
_CLOCK = re.compile(
    r"\b(now|clock_timestamp|statement_timestamp|transaction_timestamp)\s*\(|current_timestamp", re.I
)
_RANDOM = re.compile(r"\b(gen_random_uuid|uuid_generate_v4|random)\s*\(", re.I)
_COUNTER = re.compile(r"(_count|_counter|^count$|^counter$|^version$|^lock_version$|^hits$|^views$)")
_SESSION_TABLE = re.compile(r"(^|_)(sessions?|tokens?|auth_tokens?|login_attempts)$")
_TIMESTAMP_TYPES = {"timestamp with time zone", "timestamp without time zone"}
_INTEGER_TYPES = {"integer", "bigint", "smallint"}


@dataclass
class TableDraft:
    name: str
    key: list[str]
    ordered: bool
    include: list[str] = field(default_factory=list)
    exclude: dict[str, str] = field(default_factory=dict)


@dataclass
class SpecDraft:
    schema: str
    tables: list[TableDraft]
    ignored_tables: dict[str, str]

    def decisions(self) -> int:
        """How many choices the author still has to confirm."""
        reasons = [*self.ignored_tables.values(), *(r for t in self.tables for r in t.exclude.values())]
        return sum(r.startswith("DECIDE:") for r in reasons) + sum(not t.ordered for t in self.tables)

    def toml(self) -> str:
        """The draft as a spec file (format 1), with a comment per decision."""
        out = [
            "# A draft digest spec from `statekit spec init`: every table and column of the schema.",
            "# Review each DECIDE: line (keep the exclusion with your own reason, or include the column),",
            "# then run `statekit check` against it.",
            "format = 1",
            f"schema = {_quote(self.schema)}",
            "",
        ]
        if self.ignored_tables:
            out.append("[ignored_tables]")
            out += [
                f"{_quote(name)} = {_quote(reason)}" for name, reason in sorted(self.ignored_tables.items())
            ]
            out.append("")
        for table in self.tables:
            out.append(f"[tables.{_quote(table.name)}]")
            if not table.ordered:
                out.append(
                    "# DECIDE: no primary key or unique NOT NULL index: the rows are digested as a set"
                )
                out.append("ordered = false")
            out.append(f"key = [{', '.join(_quote(c) for c in table.key)}]")
            out.append(f"include = [{', '.join(_quote(c) for c in table.include)}]")
            if table.exclude:
                pairs = ", ".join(f"{_quote(c)} = {_quote(r)}" for c, r in sorted(table.exclude.items()))
                out.append(f"exclude = {{ {pairs} }}")
            out.append("")
        return "\n".join(out)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _keys(conn: psycopg.Connection[Any], schema: str) -> dict[str, list[str]]:
    """Per table, its primary key, else its first unique index over NOT NULL columns."""
    rows = tuples(
        conn,
        """
        SELECT c.relname, i.indisprimary, array_agg(a.attname ORDER BY k.ord), bool_and(a.attnotnull)
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
        JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
        WHERE n.nspname = %s AND i.indisunique AND i.indpred IS NULL
        GROUP BY c.relname, i.indexrelid, i.indisprimary
        ORDER BY c.relname, i.indisprimary DESC, i.indexrelid
        """,
        (schema,),
    )
    keys: dict[str, list[str]] = {}
    for table, primary, columns, not_null in rows:
        if (primary or not_null) and str(table) not in keys:
            keys[str(table)] = [str(c) for c in columns]
    return keys


def _defaults(conn: psycopg.Connection[Any], schema: str) -> dict[tuple[str, str], str]:
    rows = tuples(
        conn,
        "SELECT table_name, column_name, column_default FROM information_schema.columns "
        "WHERE table_schema = %s AND column_default IS NOT NULL",
        (schema,),
    )
    out: dict[tuple[str, str], str] = {}
    for table, column, default in rows:
        out[(str(table), str(column))] = str(default)
    return out


def draft_spec(conn: psycopg.Connection[Any], schema: str = DEFAULT_SCHEMA) -> SpecDraft:
    """A spec covering every table and column of ``schema`` (partitions through their parent)."""
    live = live_columns(conn, schema)
    partitions = {
        str(r[0])
        for r in tuples(
            conn,
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relispartition",
            (schema,),
        )
    }
    keys, defaults = _keys(conn, schema), _defaults(conn, schema)
    tables: list[TableDraft] = []
    ignored: dict[str, str] = {}
    for name, columns in sorted(live.items()):
        if name in partitions:
            ignored[name] = "a partition: digested through its partitioned table"
            continue
        if _SESSION_TABLE.search(name):
            ignored[name] = (
                "DECIDE: looks like session rows (logins, tokens): ignored unless a task changes them"
            )
            continue
        key = keys.get(name)
        draft = TableDraft(name, key or sorted(columns), ordered=key is not None)
        for column, data_type in columns.items():
            default = defaults.get((name, column), "")
            reason = ""
            if data_type in _TIMESTAMP_TYPES and (_AUDIT_NAME.search(column) or _CLOCK.search(default)):
                reason = "DECIDE: looks like an audit timestamp" + (
                    f" (DEFAULT {default})" if default else ""
                )
            elif _RANDOM.search(default):
                reason = f"DECIDE: a random value (DEFAULT {default}): the database draws it, not statekit"
            elif data_type in _INTEGER_TYPES and _COUNTER.search(column) and column not in (key or []):
                reason = "DECIDE: looks like a counter"
            if reason and column not in (key or []):
                draft.exclude[column] = reason
            else:
                draft.include.append(column)
        if not draft.include:  # a table needs one included column: keep its first one
            first = next(iter(columns))
            draft.exclude.pop(first, None)
            draft.include.append(first)
        tables.append(draft)
    return SpecDraft(schema, tables, ignored)
