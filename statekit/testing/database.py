"""What "the same database" means when a world is rewound: every row and every sequence position.

A digest covers only what its spec allows; a rewind must restore everything. ``logical_state`` reads
every table of every application schema (system schemas and statekit's own ``_statekit`` aside) as
a sorted list of exact row texts, and every sequence's ``(last_value, is_called)``, so two worlds
compare equal only if a full logical dump of each would.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from statekit.postgres.journal_sql import SESSION_IO

_RELATIONS = """
SELECT format('%I.%I', n.nspname, c.relname), c.relkind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'S') AND c.relpersistence <> 't'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', '_statekit') AND n.nspname NOT LIKE 'pg\\_%'
ORDER BY 1
"""


def logical_state(conninfo: str) -> dict[str, Any]:
    """``{"table:NAME": sorted row texts, "sequence:NAME": [last_value, is_called]}`` of a database."""
    out: dict[str, Any] = {}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(SESSION_IO)
        for name, kind in conn.execute(_RELATIONS).fetchall():
            relation = sql.SQL(name)  # already quoted by format('%I.%I')
            if kind == "S":
                row = conn.execute(
                    sql.SQL("SELECT last_value, is_called FROM {}").format(relation)
                ).fetchone()
                out[f"sequence:{name}"] = list(row or ())
            else:
                rows = conn.execute(sql.SQL("SELECT t::text FROM ONLY {} t").format(relation)).fetchall()
                out[f"table:{name}"] = sorted(str(r[0]) for r in rows)
    return out


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """The first relation where two logical states differ, with a sample of the difference."""
    for name in sorted(a.keys() | b.keys()):
        left, right = a.get(name), b.get(name)
        if left == right:
            continue
        if isinstance(left, list) and isinstance(right, list) and name.startswith("table:"):
            only_a = sorted(set(left) - set(right))[:3]
            only_b = sorted(set(right) - set(left))[:3]
            counts = f"{len(left)} vs {len(right)} rows"
            return f"{name}: only in the first {only_a}, only in the second {only_b} ({counts})"
        return f"{name}: {left!r} vs {right!r}"
    return None
