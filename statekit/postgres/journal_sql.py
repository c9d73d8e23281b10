"""The SQL of the change journal (installed by ``statekit.postgres.journal.install``).

Everything lives in the schema ``_statekit`` of the world's own database, so a template clone carries
it and no other database is involved:

- ``journal(seq, rel, sign, img, xid)``: one row image per change, ``sign`` +1 for an image that
  appeared (insert, the new side of an update) and -1 for one that disappeared. ``img`` is the row's
  record text, produced under fixed output settings so it round-trips exactly through the table's
  own row type (``img::table``), whatever the type (numeric scale, json text, floats, arrays).
- ``tables(rel, key, cols, overriding, undo)``: per journaled table, its primary key, the columns an
  undo inserts (not generated ones), whether identity columns need ``OVERRIDING SYSTEM VALUE``, and
  the name of its generated undo function (static SQL, so its plans are cached per connection).
- ``sequences(rel, last_value, is_called)``: sequence positions of the golden.
- ``meta``: the size bound (set per copy: statekit writes its own bound when it first connects) and
  ``dirty``, the first reason the journal can no longer express the
  world (DDL, a TRUNCATE past the bound, overflow, large objects); a dirty world is discarded.

Every trigger is a row trigger (partitions and inheritance children are covered by the same
mechanism) and ``SECURITY DEFINER``, so an application role without rights on ``_statekit`` still
journals. Rewinds run with ``session_replication_role = replica``: the application's triggers and
foreign-key checks do not fire while rows are put back.
"""

from __future__ import annotations

SCHEMA = "_statekit"
VERSION = 1

# Output settings every image is written and read under: ISO dates, UTC, exact floats, hex bytea.
STABLE_IO = (
    "SET datestyle = 'ISO, YMD' SET intervalstyle = 'postgres' SET timezone = 'UTC' "
    "SET extra_float_digits = 3 SET bytea_output = 'hex' SET search_path = pg_catalog, pg_temp"
)
SESSION_IO = (
    "SET datestyle = 'ISO, YMD'; SET intervalstyle = 'postgres'; SET timezone = 'UTC'; "
    "SET extra_float_digits = 3; SET bytea_output = 'hex'"
)
REPLICA = "SET session_replication_role = replica"
"""statekit's own connection to a world runs with triggers and foreign-key checks off for good: a
move must not fire them, and setting the role per move would throw away every cached plan each time
(PostgreSQL resets its plan cache when this setting changes). Its reads do not depend on it."""

BASE = f"""
DROP EVENT TRIGGER IF EXISTS statekit_ddl;
DROP EVENT TRIGGER IF EXISTS statekit_drop;
DROP SCHEMA IF EXISTS _statekit CASCADE;
CREATE SCHEMA _statekit;
REVOKE ALL ON SCHEMA _statekit FROM PUBLIC;

CREATE TABLE _statekit.journal (
    seq bigserial PRIMARY KEY,
    rel oid NOT NULL,
    sign smallint NOT NULL,
    img text NOT NULL,
    xid xid8 NOT NULL DEFAULT pg_current_xact_id()
);
CREATE TABLE _statekit.tables (
    rel oid PRIMARY KEY,
    key text[],
    cols text[] NOT NULL,
    overriding boolean NOT NULL,
    undo text NOT NULL
);
CREATE TABLE _statekit.sequences (
    rel oid PRIMARY KEY,
    last_value bigint NOT NULL,
    is_called boolean NOT NULL
);
CREATE TABLE _statekit.meta (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    version integer NOT NULL,
    bound bigint NOT NULL,
    dirty text
);

CREATE FUNCTION _statekit.taint(reason text) RETURNS void
LANGUAGE sql SECURITY DEFINER {STABLE_IO} AS $$
    UPDATE _statekit.meta SET dirty = coalesce(dirty, reason)
$$;

CREATE FUNCTION _statekit.capture() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER {STABLE_IO} AS $$
DECLARE
    bound bigint := (SELECT m.bound FROM _statekit.meta m);
BEGIN
    IF (SELECT last_value FROM _statekit.journal_seq_seq) >= bound THEN
        PERFORM _statekit.taint(format('journal overflow: more than %s row changes', bound));
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO _statekit.journal (rel, sign, img) VALUES (TG_RELID, 1, NEW::text);
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO _statekit.journal (rel, sign, img)
        VALUES (TG_RELID, -1, OLD::text), (TG_RELID, 1, NEW::text);
    ELSE
        INSERT INTO _statekit.journal (rel, sign, img) VALUES (TG_RELID, -1, OLD::text);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION _statekit.capture_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER {STABLE_IO} AS $$
DECLARE
    rows bigint;
    used bigint := (SELECT last_value FROM _statekit.journal_seq_seq);
    bound bigint := (SELECT m.bound FROM _statekit.meta m);
BEGIN
    EXECUTE format('SELECT count(*) FROM %s', TG_RELID::regclass) INTO rows;
    IF used + rows > bound THEN
        PERFORM _statekit.taint(format('TRUNCATE of %s (%s rows) exceeds the journal bound of %s',
                                       TG_RELID::regclass, rows, bound));
    ELSE
        EXECUTE format('INSERT INTO _statekit.journal (rel, sign, img) SELECT %s, -1, t::text FROM %s t',
                       TG_RELID, TG_RELID::regclass);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION _statekit.on_ddl() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER {STABLE_IO} AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
        IF c.schema_name IS NULL
           OR (c.schema_name NOT LIKE 'pg\\_temp%' AND c.schema_name <> '_statekit') THEN
            PERFORM _statekit.taint(format('DDL in the episode: %s %s', c.command_tag, c.object_identity));
        END IF;
    END LOOP;
END $$;

CREATE FUNCTION _statekit.on_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER {STABLE_IO} AS $$
DECLARE
    o record;
BEGIN
    FOR o IN SELECT * FROM pg_event_trigger_dropped_objects() LOOP
        IF NOT o.is_temporary AND coalesce(o.schema_name, '') <> '_statekit' THEN
            PERFORM _statekit.taint(
                format('DDL in the episode: DROP %s %s', o.object_type, o.object_identity));
        END IF;
    END LOOP;
END $$;

-- End every other connection to this world (waiting for each to exit) and refuse while prepared
-- transactions are open: nothing of the application's sessions may outlive a move or a mark.
CREATE FUNCTION _statekit.quiet() RETURNS void
LANGUAGE plpgsql {STABLE_IO} AS $$
DECLARE
    me oid := (SELECT oid FROM pg_database WHERE datname = current_database());
BEGIN
    IF pg_stat_get_db_numbackends(me) > 1 THEN  -- the application is still connected
        PERFORM pg_terminate_backend(a.pid, 5000)
        FROM pg_stat_get_activity(NULL) a WHERE a.datid = me AND a.pid <> pg_backend_pid();
    END IF;
    IF EXISTS (SELECT 1 FROM pg_prepared_xact() p WHERE p.dbid = me) THEN
        RAISE EXCEPTION 'statekit-prepared: prepared transactions are open in this world';
    END IF;
END $$;
REVOKE ALL ON FUNCTION _statekit.quiet() FROM PUBLIC;

-- Move the world along the journal: apply the entries in ``fwd`` as recorded and those in ``back``
-- in reverse, table by table (net effect per distinct row image), then set every sequence to
-- ``seqs`` ({{"oid": [last_value, is_called]}}; absent means the golden's); ``reset`` empties the
-- journal afterwards (back at the golden with no bookmark left). One transaction.
CREATE FUNCTION _statekit.move(fwd int8multirange, back int8multirange, seqs jsonb, reset boolean)
RETURNS integer LANGUAGE plpgsql {STABLE_IO} AS $$
DECLARE
    t record;
    s record;
    moved integer := 0;
    n integer;
BEGIN
    PERFORM _statekit.quiet();
    IF (SELECT dirty FROM _statekit.meta) IS NOT NULL THEN
        RAISE EXCEPTION 'statekit-dirty: %', (SELECT dirty FROM _statekit.meta);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_largeobject_metadata) THEN
        RAISE EXCEPTION 'statekit-dirty: large objects exist in this world';
    END IF;
    IF current_setting('session_replication_role') <> 'replica' THEN  -- statekit's connection keeps it on
        PERFORM set_config('session_replication_role', 'replica', true);
    END IF;
    FOR t IN
        SELECT tb.undo FROM _statekit.tables tb
        WHERE tb.rel IN (SELECT DISTINCT j.rel FROM _statekit.journal j WHERE j.seq <@ fwd OR j.seq <@ back)
        ORDER BY tb.rel
    LOOP
        EXECUTE format('SELECT _statekit.%I($1, $2)', t.undo) INTO n USING fwd, back;
        moved := moved + n;
    END LOOP;
    FOR s IN
        SELECT q.rel,
               coalesce((seqs ->> q.rel::text)::jsonb, jsonb_build_array(q.last_value, q.is_called)) AS want
        FROM _statekit.sequences q
    LOOP
        IF (s.want ->> 1)::boolean THEN
            IF pg_sequence_last_value(s.rel) IS DISTINCT FROM (s.want ->> 0)::bigint THEN
                PERFORM setval(s.rel, (s.want ->> 0)::bigint, true);
            END IF;
        ELSE
            PERFORM setval(s.rel, (s.want ->> 0)::bigint, false);
        END IF;
    END LOOP;
    IF reset THEN  -- DELETE, not TRUNCATE: new files for a table, its index and sequence cost milliseconds
        DELETE FROM _statekit.journal;
        PERFORM setval('_statekit.journal_seq_seq', 1, false);
    END IF;
    RETURN moved;
END $$;
REVOKE ALL ON FUNCTION _statekit.move(int8multirange, int8multirange, jsonb, boolean) FROM PUBLIC;

-- A bookmark, once the world is quiet: every sequence's position {{"oid": [last_value, is_called]}}.
CREATE FUNCTION _statekit.sequence_positions() RETURNS jsonb
LANGUAGE plpgsql {STABLE_IO} AS $$
DECLARE
    s record;
    v bigint;
    c boolean;
    out jsonb := '{{}}';
BEGIN
    PERFORM _statekit.quiet();
    FOR s IN SELECT rel FROM _statekit.sequences LOOP
        EXECUTE format('SELECT last_value, is_called FROM %s', s.rel::regclass) INTO v, c;
        out := out || jsonb_build_object(s.rel::text, jsonb_build_array(v, c));
    END LOOP;
    RETURN out;
END $$;
"""

# Journaled relations: ordinary tables (partitions included) in application schemas.
TABLES = """
SELECT c.oid, format('%I.%I', n.nspname, c.relname) AS name, c.relkind, c.relispartition,
       (SELECT array_agg(a.attname ORDER BY k.ord)
          FROM pg_index i
          CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
          JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
         WHERE i.indrelid = c.oid AND i.indisprimary) AS key,
       (SELECT array_agg(a.attname ORDER BY a.attnum) FROM pg_attribute a
         WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '') AS cols,
       EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0
                AND NOT a.attisdropped AND a.attidentity = 'a') AS overriding
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', '_statekit') AND n.nspname NOT LIKE 'pg\\_%'
ORDER BY c.oid
"""

SEQUENCES = """
SELECT c.oid, format('%I.%I', n.nspname, c.relname) AS name
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'S' AND c.relpersistence <> 't'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', '_statekit') AND n.nspname NOT LIKE 'pg\\_%'
ORDER BY c.oid
"""

ALWAYS_TRIGGERS = """
SELECT format('%s on %s', t.tgname, t.tgrelid::regclass) FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE t.tgenabled = 'A' AND NOT t.tgisinternal AND n.nspname <> '_statekit'
ORDER BY 1
"""


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
    return f"""
CREATE FUNCTION _statekit.{ident(name)}(fwd int8multirange, back int8multirange) RETURNS integer
LANGUAGE plpgsql {STABLE_IO} AS $undo$
DECLARE
    removed integer;
    added integer;
BEGIN
    {delete}
    GET DIAGNOSTICS removed = ROW_COUNT;
    {insert}
    GET DIAGNOSTICS added = ROW_COUNT;
    RETURN removed + added;
END $undo$;
REVOKE ALL ON FUNCTION _statekit.{ident(name)}(int8multirange, int8multirange) FROM PUBLIC;
"""


def row_trigger(table: str) -> str:
    """Capture every row written to ``table`` (on a partitioned table, PostgreSQL clones it into each
    partition, so images are recorded against the partition that holds the row)."""
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


EVENT_TRIGGERS = """
CREATE EVENT TRIGGER statekit_ddl ON ddl_command_end EXECUTE FUNCTION _statekit.on_ddl();
CREATE EVENT TRIGGER statekit_drop ON sql_drop EXECUTE FUNCTION _statekit.on_drop();
"""
