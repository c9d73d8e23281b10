"""The claims world under the default ``rewind`` strategy: worlds are reused and equal their golden,
the application stays warm, what the journal cannot express is copied afresh in place with its reason
(a new clone where bookmarks hold the copy), and forks are bookmarks that survive resets."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import statekit
import statekit.kit
from statekit.checks.walk import harvest, random_action
from statekit.postgres.journal import Journal
from statekit.testing.database import first_difference, logical_state
from statekit_examples.adapters.claims_app import ClaimsAdapter


def _conninfo(env: statekit.Environment) -> str:
    journal = env.world.handle["db"].handle
    assert isinstance(journal, Journal)
    return journal.conninfo


class CountingClaims(ClaimsAdapter):
    """Counts how often the application is built."""

    attached = 0

    def attach(self, world: statekit.kit.World, settings: statekit.kit.EnvSettings) -> Any:
        CountingClaims.attached += 1
        return super().attach(world, settings)


def test_resets_rewind_one_world_and_the_application_stays_warm(pg_url: str) -> None:
    CountingClaims.attached = 0
    with statekit.make(CountingClaims, db_url=pg_url) as env:
        _, first = env.reset(seed=7)
        world = env.world.id
        golden = logical_state(_conninfo(env))
        for _ in range(3):
            for action in env.adapter.reference_actions(env.task):
                env.step(action)
            _, info = env.reset(seed=7)
            assert (env.world.id, info["world"]) == (world, "rewound")
            assert env.state().digest == info["digest"] == first["digest"]
            assert first_difference(logical_state(_conninfo(env)), golden) is None
        assert CountingClaims.attached == 1, "one application for the world, however many episodes"
        assert first["strategy"] == "rewind(composite(db=template,uploads=cow(overlay)))"


def _app_session(env: statekit.Environment) -> tuple[int, str, int]:
    """The claims app's pooled connection: its backend, a session setting, its temporary tables."""
    app = env._live.episode.app  # type: ignore[union-attr]
    with app.engine.connect() as connection:
        raw = connection.connection.driver_connection
        row = raw.execute(
            "SELECT pg_backend_pid(), current_setting('application_name'), "
            "(SELECT count(*) FROM pg_class WHERE relpersistence = 't')"
        ).fetchone()
        raw.rollback()
    return int(row[0]), str(row[1]), int(row[2])


def test_the_apps_connection_is_reset_and_kept_across_rewinds(pg_url: str) -> None:
    """The episode's end resets the app's pooled session server-side (``keep_pooled``) and the rewind
    spares it: the next episode runs on the same backend with none of the last one's session state,
    and replays stay identical."""
    with statekit.make("claims_app", db_url=pg_url) as env:
        env.reset(seed=7)
        script = env.adapter.reference_actions(env.task)
        first = [env.step(action)[:2] for action in script]
        pid, name, temporary = _app_session(env)
        app = env._live.episode.app  # type: ignore[union-attr]
        with app.engine.connect() as connection:  # what an episode could leave in its session
            raw = connection.connection.driver_connection
            raw.execute("SET application_name = 'left by the episode'")
            raw.execute("CREATE TEMPORARY TABLE leftover (x int)")
            raw.commit()
        assert _app_session(env) == (pid, "left by the episode", temporary + 1)
        _, info = env.reset(seed=7)
        assert info["world"] == "rewound"
        assert _app_session(env) == (pid, name, temporary), "the same backend, its session as new"
        assert [env.step(action)[:2] for action in script] == first


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        ("CREATE INDEX claims_status ON claims (status)", "DDL in the episode: CREATE INDEX"),
        ("TRUNCATE audit_log", "TRUNCATE of public.audit_log"),
        ("UPDATE claims SET description = description || '!'", "journal overflow: more than 100 row changes"),
    ],
)
def test_what_cannot_be_rewound_is_copied_afresh_in_place_with_its_reason(
    pg_url: str, statement: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The same world (id, URL) cloned again from its golden: the application stays attached."""
    CountingClaims.attached = 0
    with statekit.make(CountingClaims, db_url=pg_url, journal_bound=100) as env:
        _, info = env.reset(seed=7)
        golden, world, url = logical_state(_conninfo(env)), env.world.id, env.world.location
        with psycopg.connect(_conninfo(env), autocommit=True) as app:
            app.execute(statement)
        with caplog.at_level(logging.WARNING, logger="statekit.strategies.rewinding"):
            _, again = env.reset(seed=7)
        assert (again["world"], env.world.id, env.world.location) == ("recopied", world, url)
        assert any(reason in r for r in env.strategy.stats.fallbacks), env.strategy.stats.fallbacks
        assert any(reason in record.getMessage() for record in caplog.records)
        assert first_difference(logical_state(_conninfo(env)), golden) is None
        assert env.state().digest == info["digest"]
        for action in env.adapter.reference_actions(env.task):  # the application kept serves it
            env.step(action)
        assert env.state().digest != info["digest"]
        _, after = env.reset(seed=7)
        assert (after["world"], after["digest"]) == ("rewound", info["digest"])
        assert CountingClaims.attached == 1
        assert env.strategy.stats.recopied == 1


def test_a_world_with_bookmarks_that_cannot_be_rewound_is_replaced_by_a_new_clone(pg_url: str) -> None:
    """A bookmark needs the copy's journal, which copying afresh in place would lose."""
    with statekit.make("claims_app", db_url=pg_url) as env:
        _, info = env.reset(seed=7)
        world = env.world.id
        env.snapshot()
        with psycopg.connect(_conninfo(env), autocommit=True) as app:
            app.execute("CREATE INDEX claims_status ON claims (status)")
        _, again = env.reset(seed=7)
        assert again["world"] == "restored" and env.world.id != world
        assert again["digest"] == info["digest"] and env.strategy.stats.recopied == 0


def test_forks_are_bookmarks_that_branch_and_survive_resets(pg_url: str) -> None:
    with statekit.make("claims_app", db_url=pg_url) as env:
        env.reset(seed=9, options={"task": "triage_overdue"})
        triage, note, submit = env.adapter.reference_actions(env.task)
        env.step(triage)
        after_triage = env.snapshot()
        at_triage = env.state()
        env.step(note)
        after_note = env.snapshot()
        at_note = env.state()
        env.restore(after_triage)
        assert env.state().digest == at_triage.digest and env.state().step_count == 1
        env.step({"tool": "add_note", "reference": note["reference"], "body": "another branch"})
        env.restore(after_note)  # taken on the branch that restore(after_triage) left
        assert env.state().digest == at_note.digest
        assert env.step(submit)[1] == 1.0
        env.reset(seed=8)  # another world; the bookmarked one waits, pinned
        env.restore(after_triage)
        assert env.state().digest == at_triage.digest
        assert env.step(note)[0]["status"] == 201


def test_template_strategy_forks_survive_a_reset_as_copies(pg_url: str) -> None:
    with statekit.make("claims_app", strategy="template", db_url=pg_url) as env:
        env.reset(seed=9, options={"task": "triage_overdue"})
        triage = env.adapter.reference_actions(env.task)[0]
        env.step(triage)
        fork = env.snapshot()
        at_fork = env.state()
        env.reset(seed=9)  # the template strategy drops the world: the bookmark is copied first
        env.restore(fork)
        assert env.state().digest == at_fork.digest and env.state().step_count == 1


def _sql_write(conn: psycopg.Connection[Any], rng: random.Random) -> None:
    """A random write straight into the claims database, of the kinds the journal must express."""
    kind = rng.randrange(7)
    if kind == 0:
        conn.execute(
            "UPDATE claims SET description = %s, decision_reason = NULL WHERE id = "
            "(SELECT id FROM claims ORDER BY reference OFFSET %s LIMIT 1)",
            ("".join(rng.choice("abcdef é✓") for _ in range(rng.choice([5, 4000]))), rng.randrange(50)),
        )
    elif kind == 1:
        conn.execute(
            "UPDATE jobs SET payload = payload || '{\"extra\": [1, 2.50, null]}' WHERE id %% 7 = %s",
            (rng.randrange(7),),
        )
    elif kind == 2:
        conn.execute(
            "DELETE FROM claim_notes WHERE id = (SELECT id FROM claim_notes ORDER BY id OFFSET %s LIMIT 1)",
            (rng.randrange(20),),
        )
    elif kind == 3:  # a row deleted and inserted again under its old key, with other values
        conn.execute(
            "WITH gone AS (DELETE FROM audit_log WHERE id = (SELECT max(id) - %s FROM audit_log) "
            "RETURNING *) INSERT INTO audit_log "
            "SELECT id, actor, 'rewritten', entity, entity_id, detail, created_at FROM gone",
            (rng.randrange(10),),
        )
    elif kind == 4:
        conn.execute("SELECT nextval('claim_reference_seq'), nextval(pg_get_serial_sequence('jobs', 'id'))")
    elif kind == 5:
        conn.execute(
            "UPDATE policies SET deductible = deductible + 0.01 WHERE id IN "
            "(SELECT id FROM policies ORDER BY id OFFSET %s LIMIT 3)",
            (rng.randrange(20),),
        )
    else:
        conn.execute("DELETE FROM payments WHERE id = (SELECT id FROM payments ORDER BY id LIMIT 1)")


@pytest.fixture(scope="module")
def claims_env(pg_url: str) -> Iterator[statekit.Environment]:
    with statekit.make("claims_app", db_url=pg_url) as env:
        yield env


@pytest.mark.parametrize("block", range(4))
def test_random_episodes_rewind_to_the_golden_exactly(claims_env: statekit.Environment, block: int) -> None:
    """50 random episodes per block (200 in all): claims tools and direct SQL writes; after every
    step the updated digest equals a full one, and after every rewind every row and sequence of the
    database equals the golden's."""
    env = claims_env
    seed = 7 + block % 2
    # seed 8 poses no pay_approved: its one approved, unpaid claim would make "pay everything" a solution
    kinds = [k for k in env.adapter.task_kinds() if (seed, k) != (8, "pay_approved")]
    env.reset(seed=seed)
    golden = logical_state(_conninfo(env))
    for episode in range(50):
        rng = random.Random(f"{block}:{episode}")
        seen: set[str] = set()
        obs, info = env.reset(seed=seed, options={"task": rng.choice(kinds)})
        if episode:
            assert info["world"] == "rewound"
            assert first_difference(logical_state(_conninfo(env)), golden) is None, f"episode {episode}"
        harvest(obs, seen)
        with psycopg.connect(_conninfo(env), autocommit=True) as app:
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.4:
                    _sql_write(app, rng)
                else:
                    obs, *_ = env.step(random_action(env.tools, rng, seen, avoid=("submit",)))
                    harvest(obs, seen)
                assert env.state().digest == env.digest_report(full=True).digest
    env.reset(seed=seed)
    assert first_difference(logical_state(_conninfo(env)), golden) is None
    assert not env.strategy.stats.fallbacks


def test_changes_read_from_the_journal_equal_the_full_dump_diff(pg_url: str) -> None:
    """``env.changes()`` reads an episode's changes from the journal in O(changes); they must be
    exactly what diffing the golden's full dump with the world's gives, for every task kind."""
    from statekit.collateral import ChangeSet

    seen = 0
    with statekit.make("claims_app", db_url=pg_url) as env:
        for seed in (7, 8):
            golden = env._golden_dump(seed)  # the slow path's input, computed once per seed
            for kind in env.adapter.task_kinds():
                try:
                    env.reset(seed=seed, options={"task": kind})
                except statekit.StatekitError:
                    continue  # this seed poses no such task
                rng, seen_values = random.Random(seed), set[str]()
                for action in env.adapter.reference_actions(env.task)[:-1]:
                    harvest(env.step(action)[0], seen_values)
                for _ in range(4):  # and writes no reference script makes
                    action = random_action(env.tools, rng, seen_values, avoid=("submit",))
                    harvest(env.step(action)[0], seen_values)
                fast = env.adapter.dump_changes(env.world, env._goldens[env._live.key], env.digest_report())
                full = ChangeSet.between(golden, env.dump())
                if fast is None:  # an upload changed the directory: full dumps it is
                    assert any(c.table.startswith("files:") for c in full), kind
                    continue
                assert sorted(map(str, ChangeSet.between(*fast))) == sorted(map(str, full)), kind
                seen += 1
    assert seen >= 6, "the journal path was taken for most episodes"
