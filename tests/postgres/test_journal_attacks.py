"""The attack pass on the change journal, replayed on real PostgreSQL through the application's own
connection: every case either rewinds exactly or taints the world and clones; none leaves a rewound
world unequal to its golden (judged here by a full logical dump, independent of the fingerprints the
rewind itself compares). The seven cases that once left a dirty world reported clean are among them:
now each is refused by the server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import statekit
from statekit.checks import check_env
from statekit.checks.journal_attacks import ATTACKS, Attack, check_journal_attacks, journaled_parts
from statekit.postgres.journal import Journal
from statekit.postgres.server import to_conninfo
from statekit.testing.database import first_difference, logical_state
from tests.testing.shelf_adapters import Shelf

ONCE_FAILED = {
    "moving_flag",
    "database_setting",
    "journal_delete",
    "disable_trigger",
    "create_index",
    "create_trigger",
    "alter_sequence",
}
CLONED = {"large_object", "role_setting", "role_setting_in_database", "password", "grant_and_comment"}
"""What the journal cannot express, or what changed outside its sight: the world is replaced."""
REFUSED = {
    "database_setting",
    "journal_delete",
    "journal_functions",
    "replica_role",
    "disable_trigger",
    "create_index",
    "create_trigger",
    "alter_sequence",
    "create_table",
    "other_databases",
    "terminate_statekit",
}
"""Cases the server refuses to the application's role at their decisive statement."""


@pytest.fixture(scope="module")
def env(pg_cluster: object) -> Iterator[statekit.Environment]:
    """On the embedded server (the tests' one), which statekit runs: ``postgres`` and ``template1``
    are closed to world roles there (on a server given by URL, a warning names them instead)."""
    with statekit.make(Shelf) as made:
        yield made


def _admin(env: statekit.Environment) -> str:
    (part,) = journaled_parts(env.world)
    assert isinstance(part.handle, Journal)
    return part.handle.conninfo


@pytest.fixture(scope="module")
def golden(env: statekit.Environment) -> dict[str, Any]:
    env.reset(seed=7)
    return logical_state(_admin(env))


def test_the_suite_holds_the_seven_cases_that_once_failed() -> None:
    names = {attack.name for attack in ATTACKS}
    assert names >= ONCE_FAILED and names >= CLONED | REFUSED


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_no_attack_leaves_a_rewound_world_unlike_its_golden(
    env: statekit.Environment, golden: dict[str, Any], attack: Attack
) -> None:
    (result,) = check_journal_attacks(env, 7, (attack,))
    assert result.problem is None, result.problem
    assert first_difference(logical_state(_admin(env)), golden) is None
    assert result.world == ("recopied" if attack.name in CLONED else "rewound"), result.refused
    if attack.name in REFUSED:
        assert result.refused, f"{attack.name}: the server let the application do it"
        assert all(": 42501 " in line or "CONNECT privilege" in line for line in result.refused), (
            result.refused
        )


def test_the_application_cannot_reach_another_world(env: statekit.Environment) -> None:
    """Two worlds at once: the application's role of one may not connect to the other."""
    env.reset(seed=7)
    with statekit.make(Shelf) as other:
        other.reset(seed=8)
        (theirs,) = journaled_parts(other.world)
        (ours,) = journaled_parts(env.world)
        intruder = psycopg.conninfo.make_conninfo(to_conninfo(ours.location), dbname=theirs.id)
        with pytest.raises(psycopg.OperationalError, match="CONNECT privilege"):
            psycopg.connect(intruder).close()


def test_the_checker_reports_journal_integrity(env: statekit.Environment) -> None:
    report = check_env(
        env, seeds=(7, 8), repeats=1, task_repeats=1, probes=None, walk_steps=4, controls=False
    )
    assert report.journal_integrity is True, report.problems
    assert [case["name"] for case in report.journal_attacks] == [attack.name for attack in ATTACKS]
