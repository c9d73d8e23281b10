"""The checker's rewind checks: the physical-order trap is caught and named, and an order-safe
adapter passes; the updated digest equals a full recompute."""

from __future__ import annotations

import statekit
from statekit.checks import check_env, check_incremental_digest, check_rewind_order
from tests.testing.order_adapter import SortedItems, UnsortedItems


def test_an_order_dependent_read_is_caught_and_named(pg_url: str) -> None:
    with statekit.make(UnsortedItems, db_url=pg_url) as env:
        problem = check_rewind_order(env, seed=3)
    assert problem is not None and not problem.startswith("not checked"), problem
    assert "'top' answered differently on a rewound world" in problem
    assert "ORDER BY" in problem and "strategy='template'" in problem


def test_an_ordered_read_passes_and_check_env_reports_it(pg_url: str) -> None:
    with statekit.make(SortedItems, db_url=pg_url) as env:
        assert check_rewind_order(env, seed=3) is None
        report = check_env(env, seeds=(3, 4), repeats=2, task_repeats=1, controls=False)
    assert report.rewind_order is True and report.incremental_digest is True


def test_check_env_fails_an_order_dependent_adapter(pg_url: str) -> None:
    with statekit.make(UnsortedItems, db_url=pg_url) as env:
        report = check_env(env, seeds=(3, 4), repeats=2, task_repeats=1, controls=False)
    assert report.rewind_order is False and not report.ok
    assert any(p.startswith("rewind_order: seed 3") and "'top'" in p for p in report.problems)


def test_a_strategy_that_does_not_rewind_is_not_checked() -> None:
    with statekit.make("statekit.testing.ledger:LedgerAdapter") as env:
        assert str(check_rewind_order(env, seed=1)).startswith("not checked: strategy memory")
        assert check_env(env, repeats=2, task_repeats=1, controls=False).rewind_order is None


def test_the_updated_digest_equals_a_full_one_on_every_step(pg_url: str) -> None:
    with statekit.make("claims_app", db_url=pg_url) as env:
        env.reset(seed=9, options={"task": "file_new_claim"})
        script = env.adapter.reference_actions(env.task)
        assert check_incremental_digest(env, 9, script) is None
