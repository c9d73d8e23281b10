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
VERSION = 5

# Output settings every image is written and read under: ISO dates, UTC, exact floats, hex bytea,
# C money. Functions that run as the application (SECURITY DEFINER) also pin their search path;
# moves run as statekit with the database's own, so the app's CHECK functions resolve as usual.
STABLE_IO = (
    "SET datestyle = 'ISO, YMD' SET intervalstyle = 'postgres' SET timezone = 'UTC' "
    "SET extra_float_digits = 3 SET bytea_output = 'hex' SET lc_monetary = 'C'"
)
DEFINER_IO = f"{STABLE_IO} SET search_path = pg_catalog, pg_temp"
SESSION_IO = (
    "SET datestyle = 'ISO, YMD'; SET intervalstyle = 'postgres'; SET timezone = 'UTC'; "
    "SET extra_float_digits = 3; SET bytea_output = 'hex'; SET lc_monetary = 'C'"
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
CREATE TABLE _statekit.golden (
    item text PRIMARY KEY,
    value text
);
CREATE TABLE _statekit.meta (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    version integer NOT NULL,
    bound bigint NOT NULL,
    dirty text
);

CREATE FUNCTION _statekit.taint(reason text) RETURNS void
LANGUAGE sql SECURITY DEFINER {DEFINER_IO} AS $$
    UPDATE _statekit.meta SET dirty = coalesce(dirty, reason)
$$;

CREATE FUNCTION _statekit.capture() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER {DEFINER_IO} AS $$
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
LANGUAGE plpgsql SECURITY DEFINER {DEFINER_IO} AS $$
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
LANGUAGE plpgsql SECURITY DEFINER {DEFINER_IO} AS $$
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
LANGUAGE plpgsql SECURITY DEFINER {DEFINER_IO} AS $$
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

-- What shapes the world's sessions from outside its own catalogs, so no event trigger sees it change:
-- settings on the database or on its application role (a role may set its own defaults), and that
-- role's password. Read when a copy is first opened; a move refuses a world where it changed.
CREATE FUNCTION _statekit.outside(app_role name) RETURNS text
-- plpgsql, not sql: a SQL function with SET clauses is planned again on every call (0.4 ms of a move)
LANGUAGE plpgsql STABLE {STABLE_IO} AS $$
BEGIN
    RETURN concat_ws('; ',
        (SELECT string_agg(format('%s settings %s', CASE WHEN s.setrole = 0 THEN 'database' ELSE 'role' END,
                                  array_to_string(s.setconfig, ', ')), '; ' ORDER BY s.setrole, s.setdatabase)
           FROM pg_db_role_setting s
          WHERE s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
             OR s.setrole = (SELECT oid FROM pg_roles WHERE rolname = app_role)),
        (SELECT 'role password ' || md5(coalesce(a.rolpassword, '') || coalesce(a.rolvaliduntil::text, ''))
           FROM pg_authid a WHERE a.rolname = app_role));
END $$;
REVOKE ALL ON FUNCTION _statekit.outside(name) FROM PUBLIC;

-- The world as a few fingerprints: each journaled table's row count and the sum of its rows' hashes
-- (a multiset: no order), each sequence's position and parameters, and the catalog entries the
-- journal relies on (relations, columns, triggers, rules, policies, functions, schemas, event
-- triggers). The golden's are stored at install; a sampled rewind compares (``unlike_golden``).
CREATE FUNCTION _statekit.state_of() RETURNS TABLE (item text, value text)
LANGUAGE plpgsql {STABLE_IO} AS $$
DECLARE
    t record;
    v text;
BEGIN
    FOR t IN SELECT tb.rel, format('%I.%I', n.nspname, c.relname) AS name FROM _statekit.tables tb
             JOIN pg_class c ON c.oid = tb.rel JOIN pg_namespace n ON n.oid = c.relnamespace ORDER BY tb.rel
    LOOP
        EXECUTE format('SELECT count(*) || '' rows, hash '' '
                       '|| coalesce(sum(hashtextextended(x::text, 0)), 0) FROM ONLY %s x', t.name) INTO v;
        item := 'table ' || t.name; value := v; RETURN NEXT;
    END LOOP;
    RETURN QUERY
    SELECT 'sequence ' || format('%I.%I', q.schemaname, q.sequencename),
           concat_ws(' ', q.last_value, q.increment_by, q.min_value, q.max_value, q.start_value, q.cycle,
                     q.cache_size)
    FROM pg_sequences q WHERE q.schemaname NOT IN ('information_schema', '_statekit')
      AND q.schemaname NOT LIKE 'pg\\_%';
    RETURN QUERY
    WITH app AS (SELECT n.oid FROM pg_namespace n WHERE n.nspname NOT IN ('information_schema')
                 AND n.nspname NOT LIKE 'pg\\_%'),
    rels AS (SELECT c.oid FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM app)
             AND c.relpersistence <> 't'),
    parts(item, line) AS (
        SELECT 'relations', concat_ws(' ', c.oid, c.relname, c.relnamespace, c.relkind, c.relowner, c.relacl,
                                      c.relrowsecurity, c.relforcerowsecurity, c.reloptions, c.relreplident)
        FROM pg_class c WHERE c.oid IN (SELECT oid FROM rels)
        UNION ALL
        SELECT 'columns', concat_ws(' ', a.attrelid, a.attnum, a.attname, a.atttypid, a.atttypmod,
                                    a.attnotnull, a.atthasdef, a.attidentity, a.attgenerated, a.attisdropped,
                                    a.attacl)
        FROM pg_attribute a WHERE a.attrelid IN (SELECT oid FROM rels) AND a.attnum > 0
        UNION ALL
        SELECT 'defaults', concat_ws(' ', d.adrelid, d.adnum, pg_get_expr(d.adbin, d.adrelid))
        FROM pg_attrdef d WHERE d.adrelid IN (SELECT oid FROM rels)
        UNION ALL
        SELECT 'constraints', concat_ws(' ', k.conrelid, k.conname, k.contype, pg_get_constraintdef(k.oid))
        FROM pg_constraint k WHERE k.connamespace IN (SELECT oid FROM app)
        UNION ALL
        SELECT 'triggers', concat_ws(' ', g.tgrelid, g.tgname, g.tgenabled, g.tgfoid, g.tgtype)
        FROM pg_trigger g WHERE g.tgrelid IN (SELECT oid FROM rels)
        UNION ALL
        SELECT 'rules', concat_ws(' ', r.ev_class, r.rulename, r.ev_enabled, md5(r.ev_action::text))
        FROM pg_rewrite r WHERE r.ev_class IN (SELECT oid FROM rels)
        UNION ALL
        SELECT 'policies', concat_ws(' ', p.polrelid, p.polname, p.polcmd, p.polpermissive)
        FROM pg_policy p WHERE p.polrelid IN (SELECT oid FROM rels)
        UNION ALL
        SELECT 'functions', concat_ws(' ', f.oid, f.proname, f.pronamespace, f.proowner, f.prosecdef,
                                      f.proconfig, f.proacl, md5(f.prosrc))
        FROM pg_proc f WHERE f.pronamespace IN (SELECT oid FROM app)
        UNION ALL
        SELECT 'schemas', concat_ws(' ', n.oid, n.nspname, n.nspowner, n.nspacl)
        FROM pg_namespace n WHERE n.oid IN (SELECT oid FROM app)
        UNION ALL
        SELECT 'event triggers', concat_ws(' ', e.evtname, e.evtevent, e.evtenabled, e.evtfoid)
        FROM pg_event_trigger e
        UNION ALL
        SELECT 'extensions', concat_ws(' ', x.extname, x.extversion) FROM pg_extension x
    )
    SELECT 'catalog: ' || p.item, md5(string_agg(p.line, E'\\n' ORDER BY p.line))
    FROM parts p GROUP BY p.item;
END $$;
REVOKE ALL ON FUNCTION _statekit.state_of() FROM PUBLIC;

-- The first fingerprint in which the world differs from its golden, or NULL; items LIKE ``skipped``
-- are left out (the sampled check beside an episode leaves out the sequences: postgres/audit.py).
CREATE FUNCTION _statekit.unlike_golden(skipped text DEFAULT NULL) RETURNS text
LANGUAGE sql {STABLE_IO} AS $$
    SELECT format('%s: %s in the golden, %s now', coalesce(g.item, n.item), coalesce(g.value, 'nothing'),
                  coalesce(n.value, 'nothing'))
    FROM _statekit.golden g FULL JOIN _statekit.state_of() n ON n.item = g.item
    WHERE g.value IS DISTINCT FROM n.value
      AND (skipped IS NULL OR coalesce(g.item, n.item) NOT LIKE skipped)
    ORDER BY coalesce(g.item, n.item) LIMIT 1
$$;
REVOKE ALL ON FUNCTION _statekit.unlike_golden(text) FROM PUBLIC;

-- End every other connection to this world (waiting for each to exit) and refuse while prepared
-- transactions are open: nothing of the application's sessions may outlive a move or a mark, except
-- the sessions its adapter reset (DISCARD ALL) and named for this one move (``Journal.keep``), while
-- they are idle outside a transaction.
CREATE FUNCTION _statekit.quiet() RETURNS void
LANGUAGE plpgsql {STABLE_IO} AS $$
DECLARE
    me oid := (SELECT oid FROM pg_database WHERE datname = current_database());
    -- statekit's own idle auditor (postgres/audit.py), named by statekit's own session only
    spare int := nullif(current_setting('statekit.spare', true), '')::int;
    -- the application's reset sessions (Journal.keep), named by statekit's own session for one move
    kept int[] := coalesce(string_to_array(nullif(current_setting('statekit.keep', true), ''), ',')::int[],
                           '{{}}');
    pids int[];
BEGIN
    IF kept <> '{{}}' THEN  -- once: a session named for this move is ended by the next
        PERFORM set_config('statekit.keep', '', false);
    END IF;
    FOR pass IN 1..2 LOOP
        PERFORM pg_stat_clear_snapshot();  -- the list of backends is otherwise read once per transaction
        IF pg_stat_get_db_numbackends(me) > 1 THEN  -- the application may still be connected
            SELECT array_agg(a.pid) INTO pids FROM pg_stat_get_activity(NULL) a
            WHERE a.datid = me AND a.pid <> pg_backend_pid() AND a.pid IS DISTINCT FROM spare
              AND NOT (a.pid = ANY(kept) AND a.state = 'idle' AND a.xact_start IS NULL);
        ELSE
            pids := NULL;
        END IF;
        IF pids IS NOT NULL THEN
            PERFORM pg_terminate_backend(p) FROM unnest(pids) p;
            -- wait (5 s at most) until none is in a transaction or holds a lock (an advisory lock
            -- included), looking every millisecond: pg_terminate_backend's own wait looks every 100 ms.
            -- A terminated backend that was idle and holds nothing can only exit (its next read from
            -- its client ends it), so its exit, milliseconds of clean-up on a busy machine, is not
            -- waited for
            FOR i IN 1..5000 LOOP
                PERFORM pg_stat_clear_snapshot();
                EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_stat_get_activity(NULL) a WHERE a.pid = ANY(pids)
                                      AND (a.state IS DISTINCT FROM 'idle' OR a.xact_start IS NOT NULL))
                      AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = ANY(pids));
                IF i = 5000 THEN
                    RAISE WARNING 'statekit: backends % did not end within 5 s of being terminated', pids;
                END IF;
                PERFORM pg_sleep(0.001);
            END LOOP;
        END IF;
        -- checked before the lock, which a prepared transaction's journal entries would block
        IF EXISTS (SELECT 1 FROM pg_prepared_xact() p WHERE p.dbid = me) THEN
            RAISE EXCEPTION 'statekit-prepared: prepared transactions are open in this world';
        END IF;
        IF pass = 1 THEN  -- a connection made from here on cannot write: its capture waits for us
            PERFORM set_config('lock_timeout', '10s', true);
            LOCK TABLE _statekit.journal IN EXCLUSIVE MODE;
        END IF;
    END LOOP;
END $$;
REVOKE ALL ON FUNCTION _statekit.quiet() FROM PUBLIC;

-- Move the world along the journal: apply the entries in ``fwd`` as recorded and those in ``back``
-- in reverse, table by table (net effect per distinct row image), then set every sequence to
-- ``seqs`` ({{"oid": [last_value, is_called]}}; absent means the golden's); ``reset`` empties the
-- journal afterwards (back at the golden with no bookmark left). One transaction.
CREATE FUNCTION _statekit.move(fwd int8multirange, back int8multirange, seqs jsonb, reset boolean,
                               app_role name, outside text, verify boolean)
RETURNS integer LANGUAGE plpgsql {STABLE_IO} AS $$
DECLARE
    t record;
    moved integer := 0;
    n integer;
    now_outside text;
    differs text;
BEGIN
    PERFORM _statekit.quiet();
    IF (SELECT dirty FROM _statekit.meta) IS NOT NULL THEN
        RAISE EXCEPTION 'statekit-dirty: %', (SELECT dirty FROM _statekit.meta);
    END IF;
    IF EXISTS (SELECT 1 FROM pg_largeobject_metadata) THEN
        RAISE EXCEPTION 'statekit-dirty: large objects exist in this world';
    END IF;
    now_outside := _statekit.outside(app_role);
    IF now_outside IS DISTINCT FROM outside THEN
        RAISE EXCEPTION 'statekit-dirty: the episode changed what the journal cannot see: now %; before %',
            coalesce(nullif(array_to_string(ARRAY(SELECT unnest(string_to_array(now_outside, '; '))
                EXCEPT SELECT unnest(string_to_array(outside, '; '))), '; '), ''), 'nothing'),
            coalesce(nullif(array_to_string(ARRAY(SELECT unnest(string_to_array(outside, '; '))
                EXCEPT SELECT unnest(string_to_array(now_outside, '; '))), '; '), ''), 'nothing');
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
    -- one statement, not a loop (a plpgsql loop paid its expressions per sequence): a called sequence
    -- is set only when its value differs, one not called always (its value cannot be read cheaply)
    PERFORM setval(w.rel, w.value, w.called)
    FROM (SELECT q.rel, (x.want ->> 0)::bigint AS value, (x.want ->> 1)::boolean AS called
          FROM _statekit.sequences q,
               LATERAL (SELECT coalesce((seqs ->> q.rel::text)::jsonb,
                                        jsonb_build_array(q.last_value, q.is_called)) AS want) x) w
    WHERE NOT w.called OR pg_sequence_last_value(w.rel) IS DISTINCT FROM w.value;
    IF verify THEN  -- back at the golden: every row, sequence and catalog entry must say so
        SELECT _statekit.unlike_golden() INTO differs;
        IF differs IS NOT NULL THEN
            RAISE EXCEPTION 'statekit-dirty: after the rewind the world is not its golden: %', differs;
        END IF;
    END IF;
    IF reset THEN  -- DELETE, not TRUNCATE: new files for a table, its index and sequence cost milliseconds
        DELETE FROM _statekit.journal;
        PERFORM setval('_statekit.journal_seq_seq', 1, false);
    END IF;
    RETURN moved;
END $$;
REVOKE ALL ON FUNCTION _statekit.move(int8multirange, int8multirange, jsonb, boolean, name, text, boolean)
FROM PUBLIC;

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

UNREWINDABLE = """
SELECT format('trigger %s on %s is enabled %s: it would fire during a rewind', t.tgname, t.tgrelid::regclass,
              CASE t.tgenabled WHEN 'A' THEN 'ALWAYS' ELSE 'REPLICA' END)
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE t.tgenabled IN ('A', 'R') AND NOT t.tgisinternal AND t.tgname NOT LIKE 'statekit\\_%'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', '_statekit')
UNION ALL
SELECT format('rule %s on %s is enabled %s: it would fire during a rewind', r.rulename, r.ev_class::regclass,
              CASE r.ev_enabled WHEN 'A' THEN 'ALWAYS' ELSE 'REPLICA' END)
FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE r.ev_enabled IN ('A', 'R') AND r.rulename <> '_RETURN'
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', '_statekit')
UNION ALL
SELECT format('column %s.%s is a virtual generated column: a trigger cannot see its value',
              c.oid::regclass, a.attname)
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE a.attgenerated = 'v' AND NOT a.attisdropped AND c.relkind IN ('r', 'p')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', '_statekit') AND n.nspname NOT LIKE 'pg\\_%'
ORDER BY 1
"""


EVENT_TRIGGERS = """
CREATE EVENT TRIGGER statekit_ddl ON ddl_command_end EXECUTE FUNCTION _statekit.on_ddl();
CREATE EVENT TRIGGER statekit_drop ON sql_drop EXECUTE FUNCTION _statekit.on_drop();
ALTER EVENT TRIGGER statekit_ddl ENABLE ALWAYS;
ALTER EVENT TRIGGER statekit_drop ENABLE ALWAYS;
"""
"""Enabled ALWAYS: event triggers enabled as by default stand aside in the replica role, so DDL by
a session that takes it (a superuser's) would otherwise go unseen."""

GOLDEN = "INSERT INTO _statekit.golden SELECT * FROM _statekit.state_of()"
"""Fingerprint the golden being published (after everything else is installed)."""

NEXT_SEQ = "SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM _statekit.journal_seq_seq"
"""The ``seq`` the journal's next entry gets."""

# Moving a world's changes to another copy of its golden (``Journal.changes`` and ``Journal.apply_changes``):
# tables and sequences travel by qualified name, row images as their text, net counts per image.
CHANGES = """
SELECT (SELECT coalesce(jsonb_agg(jsonb_build_array(format('%%I.%%I', n.nspname, c.relname), x.c, x.img)
                                  ORDER BY c.oid, x.img), '[]')
        FROM (SELECT j.rel, j.img, sum(j.sign)::integer AS c FROM _statekit.journal j
              WHERE j.seq <@ %s::int8multirange GROUP BY j.rel, j.img HAVING sum(j.sign) <> 0) x
        JOIN pg_class c ON c.oid = x.rel JOIN pg_namespace n ON n.oid = c.relnamespace),
       (SELECT coalesce(jsonb_object_agg(format('%%I.%%I', n.nspname, c.relname), s.value), '{}')
        FROM jsonb_each(%s::jsonb) s JOIN pg_class c ON c.oid = s.key::oid
        JOIN pg_namespace n ON n.oid = c.relnamespace)
"""
"""The net row images on a path (per table, each distinct image with its count) and the sequences'
positions ({oid: position}) by qualified name."""
SET_SEQUENCES = (
    "SELECT count(setval(to_regclass(s.key), (s.value ->> 0)::bigint, (s.value ->> 1)::boolean)) "
    "FROM jsonb_each(%s::jsonb) s"
)
TAKE_CHECK = """
SELECT (SELECT array_agg(DISTINCT u.what ORDER BY u.what) FROM (
    SELECT 'table ' || t AS what FROM unnest(%s::text[]) t
    WHERE to_regclass(t) IS NULL OR to_regclass(t)::oid NOT IN (SELECT rel FROM _statekit.tables)
    UNION ALL
    SELECT 'sequence ' || s.key FROM jsonb_each(%s::jsonb) s
    WHERE to_regclass(s.key) IS NULL OR to_regclass(s.key)::oid NOT IN (SELECT rel FROM _statekit.sequences)
) u), EXISTS (SELECT 1 FROM _statekit.journal WHERE seq >= %s)
"""
"""What of the changes to take this world lacks (tables, sequences), and whether it has entries on its
open path (since its last move: then it is not at the point the changes start from)."""
TAKE_ROWS = """
INSERT INTO _statekit.journal (rel, sign, img)
SELECT to_regclass(r ->> 0)::oid, sign((r ->> 1)::integer), r ->> 2
FROM jsonb_array_elements(%s::jsonb) r CROSS JOIN generate_series(1, abs((r ->> 1)::integer))
"""
