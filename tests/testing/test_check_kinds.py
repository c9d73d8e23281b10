"""The checker plays every task kind's reference script and a seeded random walk, reports the ignored
tables each kind writes, and says "not checked" where it cannot judge (never "passed")."""

from __future__ import annotations

import psycopg

import statekit
from statekit.checks import (
    check_env,
    check_kind,
    check_random_walk,
    controls_not_checked,
    coverage_not_checked,
)
from statekit.checks.blind_spots import CONTENTS, WriteWatch
from statekit.container_mode import ContainerAdapter
from statekit.kit import StateDumps
from statekit.testing.ledger import LedgerAdapter
from tests.containers.test_container_mode import ContainedLedger
from tests.testing.recycling import RecyclingLedger
from tests.testing.shelf_adapters import NoisyShelf, Shelf


def test_every_kind_is_replayed_and_the_ignored_tables_it_writes_are_reported(pg_url: str) -> None:
    with statekit.make(Shelf, db_url=pg_url) as env:
        report = check_env(env, seeds=(7, 8), repeats=2, task_repeats=1, probes=None, controls=False)
    assert report.ok and report.random_walk is True, report.problems
    bump, blind = report.kinds["bump"], report.kinds["bump_blind"]
    assert (bump.seed, blind.seed) == (7, 8)
    for played in (bump, blind):
        assert played.deterministic is True and played.reset_restores_initial is True
        assert played.ignored_writes_seen_by == "journal"
    assert bump.ignored_writes == {"visits": "a row per look at the shelf: never task state"}
    assert blind.ignored_writes == {}, "bumping without looking writes no ignored table"
    assert report.findings == [
        "ignored_writes: task 'bump' (seed 7) writes the ignored table 'visits' (a row per look at the "
        "shelf: never task state): a change the digest is blind to; digest the table if a task's outcome "
        "can depend on it"
    ]


def test_a_noisy_tool_fails_its_kind_and_the_random_walk(pg_url: str) -> None:
    """The bump's answer carries the database process's id: replays differ, at that observation."""
    with statekit.make(NoisyShelf, db_url=pg_url) as env:
        played = check_kind(env, "bump_blind", seed=7, repeats=2)
        walk = check_random_walk(env, seed=7)
    assert played.deterministic is False
    assert played.problems["deterministic"].startswith(
        "task 'bump_blind' (seed 7), run 2 vs run 1: observation 1 differs"
    )
    assert walk is not None and walk.startswith("seed 7, replay vs first walk: observation "), walk
    assert "the walk's first actions" in walk


def test_a_kind_whose_reset_serves_a_used_copy_fails() -> None:
    with statekit.make(RecyclingLedger) as env:
        played = check_kind(env, "transfer", seed=7, repeats=2)
    assert played.reset_restores_initial is False
    problem = played.problems["reset_restores_initial"]
    assert problem.startswith("task 'transfer' (seed 7): digest after reset"), problem


def test_without_a_usable_journal_the_ignored_tables_contents_are_compared(pg_url: str) -> None:
    """DDL taints the world's journal; the watch then hashes the ignored tables before and after."""
    with statekit.make(Shelf, db_url=pg_url) as env:
        env.reset(seed=7, options={"task": "bump"})
        journal = env.world.handle["db"].handle  # statekit's own connection: the app may not do DDL
        with psycopg.connect(journal.conninfo, autocommit=True) as conn:
            conn.execute("CREATE TABLE scratch (x int)")
        watch = WriteWatch.start(env)
        assert not isinstance(watch, str) and watch.method == CONTENTS
        env.step({"tool": "bump", "name": "item-1"})
        assert watch.written() == {}
        env.step({"tool": "shelf"})
        assert watch.written() == {"visits": "a row per look at the shelf: never task state"}


def test_what_cannot_be_watched_or_covered_is_not_checked() -> None:
    with statekit.make(LedgerAdapter) as env:
        report = check_env(env, repeats=2, task_repeats=1, probes=None, controls=False)
    assert report.kinds["transfer"].ignored_writes is None
    note = "ignored_writes: not checked for task 'transfer': adapter 'ledger' has no digest spec"
    assert note in report.notes[0]
    assert report.coverage is True, "the ledger compares its store with its dump"


class UncoveredLedger(LedgerAdapter):
    """A ledger whose adapter never compares its digest with its state."""

    check_schema = StateDumps.check_schema


def test_coverage_of_an_adapter_without_check_schema_is_not_checked() -> None:
    with statekit.make(UncoveredLedger) as env:
        report = check_env(env, repeats=2, task_repeats=1, probes=None, controls=False)
    assert report.coverage is None and report.ok
    note = "coverage: not checked: adapter 'ledger' does not implement StateDumps.check_schema"
    assert note in report.notes[0]


def test_coverage_and_controls_in_container_mode_are_not_checked() -> None:
    """The harness inside digests with the adapter's own spec; from outside, neither the live schema
    nor the controls can be reached (``check_env`` reports coverage as null with this reason)."""
    contained = ContainerAdapter(ContainedLedger())
    assert str(coverage_not_checked(contained)).startswith("container mode: 'ledger' runs inside")
    assert "in-process strategy of ['memory']" in str(controls_not_checked(contained))
    assert coverage_not_checked(LedgerAdapter()) is None and controls_not_checked(LedgerAdapter()) is None
