"""The per-table part of the change journal (``journal_sql`` holds the per-world part): capture
triggers on each journaled table and its undo function, static SQL generated at install."""

from __future__ import annotations

from statekit.postgres.journal_sql import STABLE_IO


def undo_function(
    name: str, table: str, rel: int, key: list[str] | None, cols: list[str], overriding: bool
) -> str:
    """A per-table undo with static SQL: delete the images whose net count is negative, insert those
    whose net count is positive. Rows are found by primary key, or (no key) by their whole image."""

    def ident(column: str) -> str:
        return '"' + column.replace('"', '""') + '"'

    net = (
        "SELECT j.img, sum(CASE WHEN j.seq <@ fwd THEN j.sign ELSE -j.sign END) AS c "
        f"FROM _statekit.journal j WHERE j.rel = {rel} AND (j.seq <@ fwd OR j.seq <@ back) GROUP BY j.img"
    )
    col_list = ", ".join(ident(c) for c in cols)
    picked = ", ".join(f"(s.r).{ident(c)}" for c in cols)
    override = "OVERRIDING SYSTEM VALUE" if overriding else ""
    if key:
        match = " AND ".join(f"t.{ident(k)} = (d.r).{ident(k)}" for k in key)
        delete = (
            f"DELETE FROM {table} t USING (SELECT (x.img::{table}) AS r FROM ({net}) x "
            f"WHERE x.c < 0 OFFSET 0) d WHERE {match};"
        )
        insert = (
            f"INSERT INTO {table} ({col_list}) {override} SELECT {picked} "
            f"FROM (SELECT (x.img::{table}) AS r FROM ({net}) x WHERE x.c > 0 OFFSET 0) s;"
        )
    else:
        delete = (
            f"DELETE FROM {table} WHERE ctid IN (SELECT z.ctid FROM "
            "(SELECT t.ctid, t::text AS img, row_number() OVER (PARTITION BY t::text) AS k "
            f"FROM {table} t) z "
            f"JOIN ({net}) x ON x.img = z.img WHERE x.c < 0 AND z.k <= -x.c);"
        )
        insert = (
            f"INSERT INTO {table} ({col_list}) {override} SELECT {picked} "
            f"FROM (SELECT (x.img::{table}) AS r, x.c FROM ({net}) x WHERE x.c > 0 OFFSET 0) s "
            "CROSS JOIN generate_series(1, s.c);"
        )
    body = f"{delete}{insert}"
    tag = "$undo$"
    while tag in body:
        tag = f"$undo{len(tag)}$"
    return f"""
CREATE FUNCTION _statekit.{ident(name)}(fwd int8multirange, back int8multirange) RETURNS integer
LANGUAGE plpgsql {STABLE_IO} AS {tag}
DECLARE
    removed integer;
    added integer;
BEGIN
    {delete}
    GET DIAGNOSTICS removed = ROW_COUNT;
    {insert}
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN removed + added;
END {tag};
REVOKE ALL ON FUNCTION _statekit.{ident(name)}(int8multirange, int8multirange) FROM PUBLIC;
"""


def row_trigger(table: str) -> str:
    """Capture every row written to ``table`` (on a partitioned table, PostgreSQL clones it into each
    partition, so images are recorded against the partition that holds the row). Enabled as
    triggers are by default (``ORIGIN``): statekit's own moves run in the replica role, so capture
    stands aside for them and only for them, since no one else may take that role (superuser only;
    the application connects as a role of its own, ``statekit.postgres.roles``)."""
    return (
        f"CREATE TRIGGER statekit_capture AFTER INSERT OR UPDATE OR DELETE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION _statekit.capture();"
    )


def truncate_trigger(table: str) -> str:
    """Journal the rows of a truncated table (or taint the journal when they would not fit)."""
    return (
        f"CREATE TRIGGER statekit_truncate BEFORE TRUNCATE ON {table} "
        "FOR EACH STATEMENT EXECUTE FUNCTION _statekit.capture_truncate();"
    )
