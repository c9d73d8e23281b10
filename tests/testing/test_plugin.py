"""The pytest plugin's generated tests, run by pytest itself (pytester) against healthy adapters and
deliberately broken ones (a strategy, an observation, a world builder, a verifier): the generated
tests call the checker's own functions, so they fail exactly where ``statekit check`` does. Each
broken adapter runs beside its healthy twin, so a failure is the breakage's and nothing else's."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
REPO = Path(__file__).resolve().parents[2]


def _run(pytester: pytest.Pytester, adapter: str) -> pytest.RunResult:
    pytester.makefile(".py", test_nothing="def test_nothing() -> None:\n    assert True\n")
    pytester.makeini(
        f"""
[pytest]
pythonpath = . {REPO}
statekit_adapters = {adapter}
statekit_seeds = 7,8
"""
    )
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "not exploits", "-q")


def test_the_generated_tests_pass_on_a_healthy_adapter(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "statekit.testing.ledger:LedgerAdapter")
    result.assert_outcomes(passed=11)  # test_nothing, and every step of the plan but the probes


def test_the_restore_test_fails_on_a_pool_that_hands_out_used_copies(pytester: pytest.Pytester) -> None:
    """The golden's cached digest would say all is well; the world hashed afresh does not."""
    result = _run(pytester, "tests.testing.recycling:RecyclingLedger")
    # The steps share one environment while they pass, as ``statekit check`` runs them: the copies the
    # steps before it used are handed to the walk's replays (they differ) and the reference's
    # transfer, handed out again, fails the task too.
    result.assert_outcomes(passed=8, failed=3)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: reset_restores_initial: seed 7: *",
            "FAILED *::test_reset_restores_initial*",
            "FAILED *::test_random_walk_replays*",
        ]
    )


LEDGER = "statekit.testing.ledger:LedgerAdapter"
SHELVES = "tests.testing.shelf_adapters"


def _run_ids(
    pytester: pytest.Pytester, adapters: list[str], *args: str, inprocess: bool = False
) -> pytest.RunResult:
    """A run of the generated tests named by ``args`` (node ids), nothing else collected; in this
    process when ``inprocess`` (quick, for the in-memory ledger), else in a fresh one."""
    listed = "\n    ".join(adapters)
    pytester.makeini(
        f"""
[pytest]
pythonpath = . {REPO}
statekit_adapters =
    {listed}
statekit_seeds = 7,8
statekit_probe_entities = 10
statekit_probe_walk = 20
"""
    )
    run = pytester.runpytest_inprocess if inprocess else pytester.runpytest_subprocess
    return run("-p", "no:cacheprovider", "-q", *args)


def test_a_generated_test_is_selected_by_its_node_id(pytester: pytest.Pytester) -> None:
    """Alone, or beside a test file (which alone would leave the generated tests out); a prefix
    selects a group (the weak-verifier test below names every kind's probes by one)."""
    pytester.makefile(".py", test_nothing="def test_nothing() -> None:\n    assert True\n")
    one = _run_ids(pytester, [LEDGER], f"statekit[{LEDGER}]::test_seeds_differ", inprocess=True)
    one.assert_outcomes(passed=1)
    one.stdout.fnmatch_lines(["1 passed*"])
    beside = _run_ids(
        pytester,
        [LEDGER],
        "test_nothing.py",
        f"statekit[{LEDGER}]::test_reset_is_deterministic",
        inprocess=True,
    )
    beside.assert_outcomes(passed=2)
    unknown = _run_ids(pytester, [LEDGER], f"statekit[{LEDGER}]::test_nope", inprocess=True)
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["*::test_nope: no such generated test;*::test_seeds_differ, *"])


def _beside_healthy(pytester: pytest.Pytester, pg_url: str, broken: str, test: str) -> pytest.RunResult:
    """Run generated test ``test`` for the healthy shelf and for the ``broken`` one, by node id."""
    healthy, other = (f"{SHELVES}:{name}" for name in ("Shelf", broken))
    return _run_ids(
        pytester,
        [healthy, other],
        f"statekit[{healthy}]::{test}",
        f"statekit[{other}]::{test}",
        "--statekit-db-url",
        pg_url,
    )


def test_the_determinism_test_fails_when_an_observation_carries_noise(
    pytester: pytest.Pytester, pg_url: str
) -> None:
    """The bump's answer names the database process that served it: no control makes that repeat."""
    test = "test_reset_is_deterministic"
    result = _beside_healthy(pytester, pg_url, "NoisyShelf", test)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: deterministic: seed 7, run 2 vs run 1: observation 2 differs:*",
            f"FAILED statekit[[]{SHELVES}:NoisyShelf]::{test}*",
        ]
    )


def test_the_seeds_test_fails_when_the_builder_ignores_the_seed(
    pytester: pytest.Pytester, pg_url: str
) -> None:
    test = "test_seeds_differ"
    result = _beside_healthy(pytester, pg_url, "SeedlessShelf", test)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*the seed is ignored somewhere*", f"FAILED statekit[[]{SHELVES}:SeedlessShelf]::{test}*"]
    )


def test_the_exploit_test_fails_on_a_weak_verifier(pytester: pytest.Pytester, pg_url: str) -> None:
    """The weak verifier checks only that the target went up: bumping every item wins, on both kinds."""
    test = "test_rewards_resist_exploits"
    result = _beside_healthy(pytester, pg_url, "WeakShelf", test)
    result.assert_outcomes(passed=2, failed=2)
    weak = f"{SHELVES}:WeakShelf"
    result.stdout.fnmatch_lines(
        [
            "*probe 'every_entity[[]bump]' scored 1.0 (floor 0.0)*",
            f"FAILED statekit[[]{weak}]::{test}[[]bump]*",
            f"FAILED statekit[[]{weak}]::{test}[[]bump_blind]*",
        ]
    )
