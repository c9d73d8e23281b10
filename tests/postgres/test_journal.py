"""The change journal on real PostgreSQL: rewinds and bookmarks restore every row and sequence, the
incremental digest equals a full one, and what the journal cannot express is refused with a reason."""

from __future__ import annotations

import contextlib
import json
import random
import string
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statekit.digest.postgres import postgres_digest
from statekit.digest.spec import DigestSpec
from statekit.errors import RewindError
from statekit.postgres import PostgresServer, audit
from statekit.postgres.journal import Journal, journals_of
from statekit.postgres.server import to_conninfo
from statekit.strategies.base import World
from statekit.strategies.pg_template import PostgresTemplate
from statekit.testing.database import first_difference, logical_state

SCHEMA = """
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE people (
    id serial PRIMARY KEY, name text NOT NULL, born date, score numeric(10,3), ratio float8,
    tags text[], info jsonb, raw json, photo bytea, seen timestamptz, span interval, mood mood, big text
);
CREATE TABLE pets (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    owner int REFERENCES people(id) ON DELETE CASCADE, name text, legs int,
    doubled int GENERATED ALWAYS AS (legs * 2) STORED
);
CREATE TABLE tally (k text, v int);
CREATE TABLE pairs (a int, b text, c text, PRIMARY KEY (a, b));
CREATE TABLE events (id int, kind text, note text, PRIMARY KEY (id, kind)) PARTITION BY LIST (kind);
CREATE TABLE events_a PARTITION OF events FOR VALUES IN ('a');
CREATE TABLE events_b PARTITION OF events FOR VALUES IN ('b');
CREATE SEQUENCE counter;
INSERT INTO people (name, born, score, ratio, tags, info, raw, photo, seen, span, mood, big)
SELECT 'p' || i, date '2000-01-01' + i, i * 1.5, i / 3.0, ARRAY['x' || i, NULL],
       jsonb_build_object('n', i, 'f', 2.50), '{"b": 1,  "a": [1, 2]}', decode(md5(i::text), 'hex'),
       timestamptz '2025-01-06 09:00+01' + i * interval '1 h', i * interval '1 day 2 s', 'ok',
       CASE WHEN i % 8 = 0 THEN repeat(md5(i::text), 200) END
FROM generate_series(1, 40) i;
INSERT INTO pets (owner, name, legs) SELECT 1 + i % 40, 'pet' || i, 4 FROM generate_series(1, 60) i;
INSERT INTO tally VALUES ('a', 1), ('a', 1), ('b', 2);
INSERT INTO pairs SELECT i, 'k' || i, 'v' FROM generate_series(1, 10) i;
INSERT INTO events SELECT i, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, 'n' FROM generate_series(1, 10) i;
SELECT nextval('counter');
"""

SPEC = DigestSpec.from_dict(
    {
        "format": 1,
        "tables": {
            "people": {
                "key": ["id"],
                "include": [
                    "id",
                    "name",
                    "born",
                    "score",
                    "tags",
                    "info",
                    "raw",
                    "photo",
                    "seen",
                    "mood",
                    "big",
                ],
                "exclude": {"ratio": "a float: refused by digests", "span": "an interval: no canonical form"},
            },
            "pets": {"key": ["id"], "include": ["id", "owner", "name", "legs", "doubled"]},
            "tally": {"key": ["k"], "include": ["k", "v"], "ordered": False},
            "pairs": {"key": ["a", "b"], "include": ["a", "b", "c"]},
            "events": {"key": ["id", "kind"], "include": ["id", "kind", "note"]},
        },
        "ignored_tables": {"events_a": "a partition: digested through events", "events_b": "same"},
    }
)


def _fill(world: World) -> None:
    with psycopg.connect(to_conninfo(world.location), autocommit=True) as conn:
        conn.execute(SCHEMA)


@pytest.fixture(scope="module")
def strategy(pg_cluster: PostgresServer) -> Iterator[PostgresTemplate]:
    with PostgresTemplate(pg_cluster, prefix="skjrn", journal_bound=5_000) as made:
        made.capture("golden", _fill)
        yield made
    assert pg_cluster.databases("skjrn_e_") == [], "a world was left behind"


@pytest.fixture(scope="module")
def world(strategy: PostgresTemplate) -> Iterator[World]:
    made = strategy.restore("golden")
    yield made
    strategy.discard(made)


@pytest.fixture(scope="module")
def other(strategy: PostgresTemplate) -> Iterator[World]:
    """A second copy of the golden, for changes read from ``world`` (rewound after each use)."""
    made = strategy.restore("golden")
    yield made
    strategy.discard(made)


class State(dict[str, Any]):
    """A logical state whose repr stays short (hypothesis prints fixtures on failure)."""

    def __repr__(self) -> str:
        return f"<logical state of {len(self)} relations>"


@pytest.fixture(scope="module")
def golden_state(world: World) -> dict[str, Any]:
    return State(logical_state(_conninfo(world)))


def _conninfo(world: World) -> str:
    """statekit's own (superuser) connection to a world: what DDL and the journal's reads need."""
    journal = world.handle
    assert isinstance(journal, Journal)
    return journal.conninfo


def _app(world: World) -> str:
    """The application's connection to a world: its own login role, rights on rows only."""
    return to_conninfo(world.location)


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.ascii_letters + "é ✓'\"\\") for _ in range(n))


def _op(conn: psycopg.Connection[Any], rng: random.Random) -> None:
    """One random write, of every kind the journal must express."""
    kind = rng.randrange(14)
    person = rng.randrange(1, 60)
    if kind == 0:
        conn.execute(
            "INSERT INTO people (name, score, tags, info, big, mood, seen) "
            "VALUES (%s, %s, %s, %s, %s, %s, now())",
            (
                _text(rng, 8),
                rng.choice([None, "2.500", "-0.001"]),
                [_text(rng, 3), None],
                '{"k": [1, 2.50]}',
                "".join(rng.choice(string.printable) for _ in range(6000)),
                rng.choice(["sad", "happy", None]),
            ),
        )
    elif kind == 1:
        conn.execute(
            "UPDATE people SET score = score + 0.001, info = info || '{\"u\": true}' WHERE id = %s", (person,)
        )
    elif kind == 2:
        conn.execute(
            "UPDATE people SET raw = '{ \"spaced\" :  1 }', photo = NULL, span = NULL WHERE id = %s",
            (person,),
        )
    elif kind == 3:
        conn.execute("DELETE FROM people WHERE id = %s", (person,))  # cascades to pets
    elif kind == 4:  # deleted, then back with other values under the same key
        conn.execute("DELETE FROM pairs WHERE a = %s", (rng.randrange(1, 12),))
        conn.execute(
            "INSERT INTO pairs VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            (rng.randrange(1, 12), f"k{rng.randrange(1, 12)}", _text(rng, 4)),
        )
    elif kind == 5:
        conn.execute(
            "UPDATE pairs SET b = b || 'x' WHERE a = %s", (rng.randrange(1, 12),)
        )  # the key itself moves
    elif kind == 6:
        conn.execute("INSERT INTO tally VALUES ('a', 1), (%s, NULL)", (_text(rng, 2),))
    elif kind == 7:
        conn.execute("DELETE FROM tally WHERE ctid = (SELECT ctid FROM tally WHERE k = 'a' LIMIT 1)")
    elif kind == 8:
        conn.execute("SELECT nextval('counter'), nextval('people_id_seq')")  # positions move, no row does
    elif kind == 9:
        with contextlib.suppress(psycopg.errors.NotNullViolation):  # a failed insert still uses a sequence
            conn.execute("INSERT INTO people (name) VALUES (NULL)")
        conn.execute(
            "INSERT INTO pets (owner, name, legs) VALUES (NULL, 'stray', %s)", (rng.randrange(0, 9),)
        )
    elif kind == 10:
        conn.execute(
            "UPDATE events SET kind = CASE kind WHEN 'a' THEN 'b' ELSE 'a' END WHERE id = %s",
            (rng.randrange(1, 11),),
        )
    elif kind == 11:
        conn.execute("TRUNCATE tally")  # small: journaled row by row
    elif kind == 12:
        conn.execute("UPDATE pets SET legs = legs + 1 WHERE owner = %s", (person,))
    else:
        conn.execute("UPDATE people SET name = name WHERE id = %s", (person,))  # a write that changes nothing


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 8), mark_at=st.integers(0, 8))
def test_rewind_restores_every_row_and_sequence_and_the_digest_stays_exact(
    strategy: PostgresTemplate,
    world: World,
    golden_state: dict[str, Any],
    seed: int,
    steps: int,
    mark_at: int,
) -> None:
    rng = random.Random(seed)
    journal = world.handle
    assert isinstance(journal, Journal)
    digest = golden = postgres_digest(journal, SPEC)
    mark, at_mark = None, None
    app = psycopg.connect(_app(world), autocommit=True)
    try:
        for step in range(steps):
            if step == mark_at:
                mark, at_mark = strategy.mark(world), logical_state(_conninfo(world))
                app.close()  # marking ended the application's connections
                app = psycopg.connect(_app(world), autocommit=True)
            _op(app, rng)
            digest = postgres_digest(journal, SPEC, since=digest)
            assert digest == postgres_digest(_conninfo(world), SPEC), (
                f"incremental digest drifted at step {step}"
            )
    finally:
        app.close()
    if mark is not None:
        strategy.rewind(world, mark)
        assert first_difference(logical_state(_conninfo(world)), at_mark or {}) is None
        strategy.forget(mark)
    strategy.rewind(world)
    assert first_difference(logical_state(_conninfo(world)), golden_state) is None
    assert postgres_digest(journal, SPEC, since=digest) == golden


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 8))
def test_changes_read_from_one_copy_bring_another_to_the_same_rows_and_sequences(
    strategy: PostgresTemplate,
    world: World,
    other: World,
    golden_state: dict[str, Any],
    seed: int,
    steps: int,
) -> None:
    """What an exported episode carries: every row (all columns, not only the digested) and every
    sequence arrives; the copy that took them digests like its source and rewinds to the golden."""
    rng = random.Random(seed)
    with psycopg.connect(_app(world), autocommit=True) as app:
        for _ in range(steps):
            _op(app, rng)
    changes = json.loads(json.dumps(strategy.changes(world)))  # as it travels
    try:
        strategy.apply_changes(other, changes)
        assert first_difference(logical_state(_conninfo(other)), logical_state(_conninfo(world))) is None
        journal = other.handle
        assert isinstance(journal, Journal)
        assert postgres_digest(journal, SPEC) == postgres_digest(_conninfo(world), SPEC)
    finally:
        strategy.rewind(other)
        strategy.rewind(world)
    assert first_difference(logical_state(_conninfo(other)), golden_state) is None


def test_changes_are_refused_with_the_reason_and_leave_the_copy_at_its_golden(
    strategy: PostgresTemplate, golden_state: dict[str, Any]
) -> None:
    source, other = strategy.restore("golden"), strategy.restore("golden")
    try:
        _sql(
            _conninfo(source),
            "UPDATE people SET name = 'moved' WHERE id = 1",
            "DELETE FROM pairs WHERE a = 2",
            "INSERT INTO people (name) VALUES ('new')",  # a sequence moves too: it must not on a refusal
        )
        changes = strategy.changes(source)
        missing = {**changes, "rows": [*changes["rows"], ["public.people", -1, "(999,ghost,,,,,,,,,,,)"]]}
        with pytest.raises(RewindError, match="golden is not the one"):
            strategy.apply_changes(other, missing)  # a row to delete that this golden does not hold
        unknown = {**changes, "rows": [*changes["rows"], ["public.nowhere", 1, "(1)"]]}
        with pytest.raises(RewindError, match=r"no journaled table public\.nowhere"):
            strategy.apply_changes(other, unknown)
        with pytest.raises(RewindError, match="not a journal's changes"):
            strategy.apply_changes(other, {"rows": 7})
        assert first_difference(logical_state(_conninfo(other)), golden_state) is None
        strategy.apply_changes(other, changes)
        with pytest.raises(RewindError, match="at its golden only"):
            strategy.apply_changes(other, changes)  # twice: the copy is no longer at its golden
        assert first_difference(logical_state(_conninfo(other)), logical_state(_conninfo(source))) is None
    finally:
        strategy.discard(source)
        strategy.discard(other)


def test_bookmarks_form_a_tree(strategy: PostgresTemplate, golden_state: dict[str, Any]) -> None:
    """A bookmark taken before an earlier one was restored still works: the journal keeps both branches."""
    world = strategy.restore("golden")
    try:
        url = _conninfo(world)
        _sql(url, "UPDATE people SET name = 'root-change' WHERE id = 1")
        root = strategy.mark(world)
        at_root = logical_state(url)
        _sql(url, "DELETE FROM pets WHERE id < 10")
        left = strategy.mark(world)
        at_left = logical_state(url)
        strategy.rewind(world, root)
        _sql(url, "INSERT INTO tally VALUES ('right', 3)")
        right = strategy.mark(world)
        at_right = logical_state(url)
        for mark, expected in [(left, at_left), (root, at_root), (right, at_right), (left, at_left)]:
            strategy.rewind(world, mark)
            assert first_difference(logical_state(url), expected) is None
        for mark in (root, left, right):
            strategy.forget(mark)
        strategy.rewind(world)
        assert first_difference(logical_state(url), golden_state) is None
    finally:
        strategy.discard(world)


def _sql(conninfo: str, *statements: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.mark.parametrize(
    ("statement", "bound", "reason"),
    [
        ("CREATE TABLE extra (x int)", 5_000, "DDL in the episode: CREATE TABLE public.extra"),
        ("ALTER TABLE people ADD COLUMN extra int", 5_000, "DDL in the episode: ALTER TABLE public.people"),
        ("DROP TABLE tally", 5_000, "DDL in the episode: DROP "),
        ("TRUNCATE pets", 50, "TRUNCATE of public.pets (60 rows) exceeds the journal bound of 50"),
        ("INSERT INTO tally SELECT 'x', i FROM generate_series(1, 6000) i", 5_000, "journal overflow"),
        ("SELECT lo_create(0)", 5_000, "large objects exist in this world"),
    ],
)
def test_what_the_journal_cannot_express_is_refused_with_its_reason(
    pg_cluster: PostgresServer, statement: str, bound: int, reason: str
) -> None:
    with PostgresTemplate(pg_cluster, prefix="skjrx", journal_bound=bound) as made:
        made.capture(f"bound{bound}", _fill)  # goldens outlive strategies: one per bound
        world = made.restore(f"bound{bound}")
        _sql(_conninfo(world), statement)
        with pytest.raises(RewindError) as refused:
            made.rewind(world)
        assert reason in refused.value.reason
        made.discard(world)


def test_temporary_tables_are_not_ddl_of_the_world(
    strategy: PostgresTemplate, golden_state: dict[str, Any]
) -> None:
    world = strategy.restore("golden")
    try:
        _sql(_conninfo(world), "CREATE TEMP TABLE scratch (x int)", "INSERT INTO people (name) VALUES ('t')")
        strategy.rewind(world)
        assert first_difference(logical_state(_conninfo(world)), golden_state) is None
    finally:
        strategy.discard(world)


def test_no_connection_level_leftover_survives_a_rewind(
    strategy: PostgresTemplate, golden_state: dict[str, Any]
) -> None:
    """Open transactions, temp tables, advisory locks, prepared statements and settings of the app's
    connections, and prepared (two-phase) transactions, are all gone after a rewind."""
    world = strategy.restore("golden")
    url = _conninfo(world)
    try:
        app = psycopg.connect(_app(world), autocommit=True)
        app.execute("CREATE TEMP TABLE scratch (x int)")
        app.execute("SELECT pg_advisory_lock(42)")
        app.execute("SET statement_timeout = '1s'")
        app.execute("PREPARE lookup AS SELECT name FROM people WHERE id = $1")
        app.execute("BEGIN")
        app.execute("UPDATE people SET name = 'uncommitted' WHERE id = 2")
        two_phase = psycopg.connect(_app(world))
        two_phase.execute("INSERT INTO tally VALUES ('2pc', 1)")
        two_phase.execute("PREPARE TRANSACTION 'left-behind'")
        two_phase.close()
        strategy.rewind(world)
        assert app.closed or app.broken or _dead(app), "the app's connection was ended"
        with psycopg.connect(url, autocommit=True) as fresh:
            assert fresh.execute("SELECT count(*) FROM pg_prepared_xacts").fetchone() == (0,)
            assert fresh.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone() == (
                0,
            )
        assert first_difference(logical_state(url), golden_state) is None
    finally:
        strategy.discard(world)


def test_a_session_named_to_keep_survives_one_rewind_only_and_only_while_idle(
    strategy: PostgresTemplate, golden_state: dict[str, Any]
) -> None:
    """``Journal.keep``: a reset session named for the next rewind stays connected and sees the
    golden; one named but inside a transaction is ended; the naming holds for one rewind."""
    world = strategy.restore("golden")
    url = _conninfo(world)
    journal = next(journals_of(world))
    try:
        kept = psycopg.connect(_app(world), autocommit=True)
        busy = psycopg.connect(_app(world), autocommit=True)
        other = psycopg.connect(_app(world), autocommit=True)
        kept.execute("INSERT INTO people (name) VALUES ('episode')")
        busy.execute("BEGIN")
        busy.execute("UPDATE people SET name = 'uncommitted' WHERE id = 2")
        kept.execute("DISCARD ALL")
        journal.keep([kept.info.backend_pid, busy.info.backend_pid])
        strategy.rewind(world)
        assert _dead(busy) and _dead(other), "only the idle session named to keep is spared"
        assert kept.execute("SELECT count(*) FROM people WHERE name = 'episode'").fetchone() == (0,)
        assert first_difference(logical_state(url), golden_state) is None
        strategy.rewind(world)  # not named again: ended like any other
        assert _dead(kept)
    finally:
        strategy.discard(world)


def test_sessions_named_to_keep_are_forgotten_by_a_move_that_fails(strategy: PostgresTemplate) -> None:
    """The failed move's rollback would restore the names for the next move: they are cleared."""
    world = strategy.restore("golden")
    journal = next(journals_of(world))
    try:
        _sql(_conninfo(world), "CREATE TABLE scratch (x int)")  # DDL: the journal cannot rewind it now
        with psycopg.connect(_app(world), autocommit=True) as app:
            journal.keep([app.info.backend_pid])
            with pytest.raises(RewindError):
                journal.move(None)
            named = journal.connection().execute("SELECT current_setting('statekit.keep', true)").fetchone()
            assert named == ("",)
    finally:
        strategy.discard(world)


def _dead(conn: psycopg.Connection[Any]) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False


def test_an_incremental_digest_counts_a_transaction_that_commits_after_it(
    strategy: PostgresTemplate,
) -> None:
    """A write in flight while a digest is read, committed later, is counted by the next update."""
    world = strategy.restore("golden")
    url = _conninfo(world)
    journal = world.handle
    assert isinstance(journal, Journal)
    try:
        before = postgres_digest(journal, SPEC)
        slow = psycopg.connect(url)
        slow.execute("UPDATE people SET name = 'late' WHERE id = 3")  # holds a journal entry, uncommitted
        quick = threading.Thread(target=_sql, args=(url, "UPDATE people SET name = 'early' WHERE id = 4"))
        quick.start()
        quick.join()
        middle = postgres_digest(journal, SPEC, since=before)  # sees 'early', not 'late'
        assert middle == postgres_digest(url, SPEC)
        slow.commit()
        slow.close()
        after = postgres_digest(journal, SPEC, since=middle)
        assert after == postgres_digest(url, SPEC) and after != middle
    finally:
        strategy.discard(world)


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        (
            "CREATE FUNCTION bump() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$; "
            "CREATE TRIGGER audit BEFORE UPDATE ON people FOR EACH ROW EXECUTE FUNCTION bump(); "
            "ALTER TABLE people ENABLE ALWAYS TRIGGER audit",
            "trigger audit on people is enabled ALWAYS",
        ),
        (
            "CREATE FUNCTION bump() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$; "
            "CREATE TRIGGER mirror BEFORE UPDATE ON pets FOR EACH ROW EXECUTE FUNCTION bump(); "
            "ALTER TABLE pets ENABLE REPLICA TRIGGER mirror",
            "trigger mirror on pets is enabled REPLICA",
        ),
        (
            "CREATE RULE no_delete AS ON DELETE TO tally DO INSTEAD NOTHING; "
            "ALTER TABLE tally ENABLE ALWAYS RULE no_delete",
            "rule no_delete on tally is enabled ALWAYS",
        ),
    ],
)
def test_what_would_fire_during_a_rewind_refuses_the_journal_at_install(
    pg_cluster: PostgresServer, statement: str, reason: str
) -> None:
    """A trigger or rule the rewind's replica role cannot silence would rewrite the undo: refused."""

    def fill(world: World) -> None:
        _fill(world)
        _sql(to_conninfo(world.location), statement)

    name = reason.split()[1].replace("_", "")
    with PostgresTemplate(pg_cluster, prefix="skjrf", journal_bound=5_000) as made:
        made.capture(f"fires{name}", fill)
        world = made.restore(f"fires{name}")
        try:
            with pytest.raises(RewindError) as refused:
                made.rewind(world)
            assert reason in refused.value.reason
        finally:
            made.discard(world)


def test_the_application_cannot_take_the_replica_role_in_which_capture_stands_aside(
    strategy: PostgresTemplate, golden_state: dict[str, Any]
) -> None:
    """Capture is enabled as triggers are by default, so statekit's moves (in the replica role) are
    not journaled; the application's role may not take that role, so its writes always are."""
    world = strategy.restore("golden")
    try:
        with psycopg.connect(_app(world), autocommit=True) as app:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="session_replication_role"):
                app.execute("SET session_replication_role = replica")
            app.execute("UPDATE people SET name = 'hidden' WHERE id = 5")
        strategy.rewind(world)
        assert first_difference(logical_state(_conninfo(world)), golden_state) is None
    finally:
        strategy.discard(world)


def test_a_superuser_write_in_the_replica_role_escapes_capture_but_not_the_verification(
    pg_cluster: PostgresServer, strategy: PostgresTemplate
) -> None:
    """Only a superuser can write unjournaled (the replica role); a verified rewind compares every
    row with the golden's fingerprints and refuses the world, naming the table."""
    with PostgresTemplate(pg_cluster, prefix="skjrn", journal_bound=5_000, verify_every=1) as made:
        world = made.restore("golden")
        try:
            _sql(
                _conninfo(world),
                "SET session_replication_role = replica",
                "UPDATE people SET name = 'hidden' WHERE id = 5",
            )
            with pytest.raises(RewindError) as refused:
                made.rewind(world)
            assert refused.value.reason.startswith(
                "after the rewind the world is not its golden: table public.people: 40 rows, hash "
            ), refused.value.reason
        finally:
            made.discard(world)


def test_a_sampled_check_runs_beside_the_next_episode_on_the_rewound_state_and_refuses_the_world_after(
    strategy: PostgresTemplate,
) -> None:
    """The one rewind in ``verify_every`` that is checked in full is checked on a snapshot taken at the
    rewind, while the next episode writes: its writes pass, an unjournaled change left by the last
    episode is found, and the world's next move is refused, naming the table."""
    world = strategy.restore("golden")
    journal = world.handle
    assert isinstance(journal, Journal)
    try:
        journal.audit()  # the world is its golden: the episode's own writes below are not seen
        _sql(
            _app(world),
            "UPDATE people SET name = 'seen by the episode only' WHERE id = 3",
            "INSERT INTO people (name) VALUES ('new')",  # its nextval is not transactional: no matter
        )
        with psycopg.connect(_app(world), autocommit=True) as app:
            journal.move(None, reset=True)  # statekit's auditor is spared, the application's are not
            assert _dead(app)
        ours = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        assert tuple(journal.connection().execute(ours).fetchone() or ()) == (1,), "the auditor, kept"
        hidden = "UPDATE pets SET legs = 9 WHERE id = 2"
        _sql(journal.conninfo, "SET session_replication_role = replica", hidden)
        journal.move(None, reset=True)  # the journal cannot undo what it never saw
        journal.audit()
        with pytest.raises(RewindError) as refused:
            journal.move(None, reset=True)
        assert refused.value.reason.startswith(
            "after the rewind the world is not its golden: table public.pets: 60 rows, hash "
        ), refused.value.reason
        with pytest.raises(RewindError, match="not its golden"):
            journal.mark()
    finally:
        strategy.discard(world)


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE INDEX sneaky ON people (name)",
        "ALTER TABLE people DISABLE TRIGGER statekit_capture",
        "ALTER SEQUENCE counter INCREMENT BY 7",
        "CREATE FUNCTION sneaky() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$",
    ],
)
def test_ddl_in_the_replica_role_still_taints_the_journal(
    pg_cluster: PostgresServer, strategy: PostgresTemplate, statement: str
) -> None:
    """statekit's event triggers are enabled ALWAYS: DDL is seen whatever the session's replication
    role (before, a session in the replica role made it unseen)."""
    with PostgresTemplate(pg_cluster, prefix="skjrn", journal_bound=5_000) as made:
        world = made.restore("golden")
        try:
            _sql(_conninfo(world), "SET session_replication_role = replica", statement)
            with pytest.raises(RewindError, match="DDL in the episode"):
                made.rewind(world)
        finally:
            made.discard(world)


def test_a_mark_refuses_open_prepared_transactions_and_keeps_them(strategy: PostgresTemplate) -> None:
    """A prepared transaction is part of the world being marked: the mark is refused (the caller copies
    the world instead) and the transaction is left as it was."""
    world = strategy.restore("golden")
    url = _conninfo(world)
    try:
        two_phase = psycopg.connect(_app(world))
        two_phase.execute("INSERT INTO tally VALUES ('2pc', 1)")
        two_phase.execute("PREPARE TRANSACTION 'kept'")
        two_phase.close()
        with pytest.raises(RewindError, match="prepared transactions"):
            strategy.mark(world)
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall() == [("kept",)]
    finally:
        strategy.discard(world)


def test_an_incremental_digest_sees_rows_of_inheritance_children(pg_cluster: PostgresServer) -> None:
    """A full read of a parent table includes its children's rows; so does the incremental digest."""
    spec = DigestSpec.from_dict(
        {
            "format": 1,
            "tables": {"animal": {"key": ["id"], "include": ["id", "name"]}},
            "ignored_tables": {"dog": "digested through animal"},
        }
    )

    def fill(world: World) -> None:
        _sql(
            to_conninfo(world.location),
            "CREATE TABLE animal (id int PRIMARY KEY, name text)",
            "CREATE TABLE dog (barks bool) INHERITS (animal)",
            "INSERT INTO animal VALUES (1, 'cat')",
            "INSERT INTO dog VALUES (2, 'rex', true)",
        )

    with PostgresTemplate(pg_cluster, prefix="skjri", journal_bound=5_000) as made:
        made.capture("inherits", fill)
        world = made.restore("inherits")
        journal = world.handle
        assert isinstance(journal, Journal)
        try:
            before = postgres_digest(journal, spec)
            _sql(
                journal.conninfo,
                "UPDATE dog SET name = 'fido' WHERE id = 2",
                "INSERT INTO dog VALUES (3, 'b', false)",
            )
            after = postgres_digest(journal, spec, since=before)
            assert after == postgres_digest(journal.conninfo, spec) and after != before
        finally:
            made.discard(world)


def test_the_tail_keeps_a_tables_additions_across_reads_that_find_only_deletions(
    strategy: PostgresTemplate,
) -> None:
    """The jobs and database-clock controls share one read of the journal (``journal.tail``); a drain
    reads it again between a step's insert and the clock's check, and finding only a deletion then
    must not hide the insert from the check."""
    world = strategy.restore("golden")
    try:
        journal = world.handle
        assert isinstance(journal, Journal)
        tail = journal.tail
        start = tail.position()
        with psycopg.connect(_conninfo(world)) as conn:
            row = conn.execute("SELECT 'tally'::regclass::oid").fetchone()
        assert row is not None
        rel = int(row[0])
        _sql(_app(world), "INSERT INTO tally VALUES ('tail', 7)")
        tail.stale()
        assert tail.since(start)[rel][1] > start
        _sql(_app(world), "DELETE FROM tally WHERE k = 'tail'")
        tail.stale()
        top, added, name = tail.since(start)[rel]
        assert start < added < top and name == "tally"
        assert tail.since(top) == {}
        journal.move(None)  # the tail starts again where the move leaves the journal
        assert journal.tail.since(journal.tail.position()) == {}
    finally:
        strategy.discard(world)


@pytest.mark.parametrize("cancel", ["answered", "lost"])
def test_closing_a_world_stops_its_blocked_sampled_check_without_waiting_out_its_timeout(
    strategy: PostgresTemplate, monkeypatch: pytest.MonkeyPatch, cancel: str
) -> None:
    """A check blocked (here on a lock on the golden's fingerprints) is cancelled when its world goes
    away; one the cancel request missed ("lost": it came before the query began) has its backend ended."""
    if cancel == "lost":
        monkeypatch.setattr(psycopg.Connection, "cancel_safe", lambda self, timeout=0: None)
        monkeypatch.setattr(audit, "CANCEL_WAIT", 0.5)
    world = strategy.restore("golden")
    journal = world.handle
    assert isinstance(journal, Journal)
    try:
        with psycopg.connect(journal.conninfo) as blocker:
            blocker.execute("LOCK TABLE _statekit.golden IN ACCESS EXCLUSIVE MODE")
            journal.audit()
            auditor = journal._auditor
            assert auditor is not None
            pid = auditor.info.backend_pid
            waiting = "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s"
            for _ in range(200):
                row = blocker.execute(waiting, (pid,)).fetchone()
                if row and row[0] == "Lock":
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the sampled check never waited for the lock")
            closing = threading.Thread(target=journal.close)
            closing.start()
            closing.join(timeout=30)  # not the audit's 60 s statement timeout
            assert not closing.is_alive(), "closing the world waited for its blocked check"
        with psycopg.connect(journal.conninfo, autocommit=True) as look:
            for _ in range(100):  # a closed backend leaves pg_stat_activity a moment later
                if look.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone() == (0,):
                    break
                time.sleep(0.05)
            else:
                pytest.fail("the auditor's backend outlived its world")
    finally:
        strategy.discard(world)
