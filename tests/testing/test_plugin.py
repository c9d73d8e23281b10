"""The pytest plugin's generated tests, run by pytest itself (pytester) against a healthy adapter and
one whose strategy is broken: the generated tests call the checker's own functions, so they fail
exactly where ``statekit check`` does."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

ADAPTERS = '''
from typing import Any

from statekit.strategies.base import World
from statekit.strategies.memory import InMemory
from statekit.testing.ledger import LedgerAdapter


class RecyclingMemory(InMemory):
    """A pool that hands a discarded copy to the next restore of its key, used as it is."""

    def __init__(self) -> None:
        super().__init__()
        self.used: dict[str, list[World]] = {}

    def discard(self, world: World) -> None:
        key = self._keys.get(world.id)
        if key is not None:
            self.used.setdefault(key, []).append(world)

    def restore(self, key: str) -> World:
        if self.used.get(key):
            return self.used[key].pop()
        return super().restore(key)


class RecyclingLedger(LedgerAdapter):
    name = "recycling_ledger"
    strategies = ("memory",)

    def make_strategy(self, name: str, **options: Any) -> InMemory:
        return RecyclingMemory()
'''


def _run(pytester: pytest.Pytester, adapter: str) -> pytest.RunResult:
    pytester.makepyfile(ledgers=ADAPTERS)
    pytester.makefile(".py", test_nothing="def test_nothing() -> None:\n    assert True\n")
    pytester.makeini(
        f"""
[pytest]
pythonpath = .
statekit_adapters = {adapter}
statekit_seeds = 7,8
"""
    )
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "not exploits", "-q")


def test_the_generated_tests_pass_on_a_healthy_adapter(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "statekit.testing.ledger:LedgerAdapter")
    result.assert_outcomes(passed=4)


def test_the_restore_test_fails_on_a_pool_that_hands_out_used_copies(pytester: pytest.Pytester) -> None:
    """The golden's cached digest would say all is well; the world hashed afresh does not."""
    result = _run(pytester, "ledgers:RecyclingLedger")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: seed 7: *", "FAILED *::test_reset_restores_initial*"])
