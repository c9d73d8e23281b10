"""The environment contract on the in-memory strategy (fast) with the ledger adapter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import statekit
import statekit.kit
from statekit.checks import check_env, check_reset_restores, rollout
from statekit.errors import ConfigError, EnvironmentClosed, ResetNeeded
from statekit.strategies.memory import InMemory
from statekit.testing.ledger import LedgerAdapter


@pytest.fixture
def env() -> Iterator[statekit.Environment]:
    with statekit.make(LedgerAdapter) as made:
        yield made


def test_step_before_reset_is_a_clear_error(env: statekit.Environment) -> None:
    with pytest.raises(ResetNeeded, match=r"call reset\(seed=\.\.\.\) first"):
        env.step({"tool": "balances"})
    with pytest.raises(ResetNeeded):
        env.state()


def test_reset_returns_observation_and_info(env: statekit.Environment) -> None:
    obs, info = env.reset(seed=3)
    assert "Move" in obs["task"]
    assert info["seed"] == 3 and info["task_kind"] == "transfer"
    assert len(info["digest"]) == 64 and info["clock"].endswith("Z")
    assert [t["name"] for t in env.tools] == ["balances", "transfer", "submit"]
    assert env.state().step_count == 0


@pytest.mark.parametrize(
    ("action", "code"),
    [
        ("transfer", "malformed_action"),
        ({"name": "balances"}, "malformed_action"),
        ({"tool": "rm -rf"}, "unknown_tool"),
        ({"tool": "transfer", "source": 1}, "invalid_arguments"),
        ({"tool": "transfer", "source": "a", "target": "b", "cents": -5}, "invalid_arguments"),
        ({"tool": "balances", "extra": True}, "invalid_arguments"),
    ],
)
def test_bad_actions_become_error_observations(env: statekit.Environment, action: object, code: str) -> None:
    _, info = env.reset(seed=1)
    obs, reward, terminated, truncated, _ = env.step(action)
    assert obs["error"]["code"] == code
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.state().digest == info["digest"], "a rejected action must change nothing"


def test_submit_terminates_and_the_step_cap_truncates(env: statekit.Environment) -> None:
    env.reset(seed=2, options={"max_steps": 3})
    results = [env.step({"tool": "balances"}) for _ in range(3)]
    assert [r[2:4] for r in results] == [(False, False), (False, False), (False, True)]
    with pytest.raises(ResetNeeded, match="has ended"):
        env.step({"tool": "balances"})
    env.reset(seed=2)
    _, reward, terminated, truncated, _ = env.step({"tool": "submit"})
    assert (reward, terminated, truncated) == (0.0, True, False)


def test_reference_scores_one_and_clock_advances(env: statekit.Environment) -> None:
    _, info = env.reset(seed=4)
    script = env.adapter.reference_actions(env.task)
    rewards = [env.step(a)[1] for a in script]
    assert rewards[-1] == 1.0
    assert env.state().clock > info["clock"]


def test_snapshot_restore_forks_the_world(env: statekit.Environment) -> None:
    env.reset(seed=5)
    script = env.adapter.reference_actions(env.task)
    fork = env.snapshot()
    before = env.state()
    first = env.step(script[0])
    env.restore(fork)
    assert env.state().digest == before.digest and env.state().clock == before.clock
    again = env.step(script[0])
    assert again[:4] == first[:4], "the same action from the same fork gives the same result"
    assert again[4]["step"] == first[4]["step"]


def test_seeds_give_different_worlds_and_same_seed_same_world(env: statekit.Environment) -> None:
    a = rollout(env, seed=7, actions=[{"tool": "balances"}])
    b = rollout(env, seed=7, actions=[{"tool": "balances"}])
    c = rollout(env, seed=8, actions=[{"tool": "balances"}])
    assert a == b
    assert a.state_digest != c.state_digest


def test_checker_passes_a_good_env(env: statekit.Environment) -> None:
    report = check_env(env, repeats=2, task_repeats=2, controls=False)
    assert report.ok, report.problems


class SeedIgnoringLedger(LedgerAdapter):
    """A deliberately broken adapter: every seed builds the same world."""

    def build_world(self, world: statekit.kit.World, seed: int) -> None:
        world.handle.update(accounts={"alice": 5000, "bob": 5000}, journal=[])

    def start_episode(self, world, *, seed, options, task, app, settings):  # type: ignore[no-untyped-def]
        return super().start_episode(world, seed=0, options=options, task=task, app=app, settings=settings)


class ClockLeakingLedger(LedgerAdapter):
    """A deliberately broken adapter: its observation reads a clock statekit does not control."""

    def start_episode(self, world, *, seed, options, task, app, settings):  # type: ignore[no-untyped-def]
        import time

        episode = super().start_episode(
            world, seed=seed, options=options, task=task, app=app, settings=settings
        )
        episode.observe = lambda: {"task": episode.task.prompt, "t": time.perf_counter_ns()}  # type: ignore[method-assign]
        return episode


def test_checker_names_an_ignored_seed() -> None:
    with statekit.make(SeedIgnoringLedger) as env:
        report = check_env(env, repeats=2, task_repeats=1, script=[{"tool": "balances"}], controls=False)
    assert not report.seeds_differ
    assert any(p.startswith("seeds_differ: seeds [7, 8] give equal digests") for p in report.problems)


def test_checker_shows_the_first_differing_observation() -> None:
    with statekit.make(ClockLeakingLedger) as env:
        report = check_env(env, repeats=2, task_repeats=1, controls=False)
    assert not report.deterministic
    assert any("observation 0 differs" in p for p in report.problems)


def test_unknown_adapter_and_strategy_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="unknown adapter 'nope': registered adapters are"):
        statekit.make("nope")
    with pytest.raises(ConfigError, match=r"cannot import adapter module 'no_such_pkg.mod'"):
        statekit.make("no_such_pkg.mod:Thing")
    with pytest.raises(ConfigError, match="offers strategies \\['memory', 'rewind'\\], not 'container'"):
        statekit.make(LedgerAdapter, strategy="container")


class StaleCopies(InMemory):
    """A deliberately broken strategy: it hands back the last discarded (already used) copy."""

    def __init__(self) -> None:
        super().__init__()
        self.last: statekit.kit.World | None = None

    def restore(self, key: str) -> statekit.kit.World:
        return self.last if self.last is not None else super().restore(key)

    def discard(self, world: statekit.kit.World) -> None:
        self.last = world


class StaleLedger(LedgerAdapter):
    def make_strategy(self, name: str, **options: object) -> statekit.kit.ResetStrategy:
        return StaleCopies()


def test_checker_catches_a_strategy_that_does_not_reset() -> None:
    with statekit.make(StaleLedger) as env:
        env.reset(seed=4)
        script = env.adapter.reference_actions(env.task)
        problem = check_reset_restores(env, 4, script)
    assert problem is not None and "digest after reset is" in problem


class BrokenLedger(LedgerAdapter):
    """The application raises inside a tool call (a crashed dependency, a bug)."""

    def start_episode(self, world, *, seed, options, task, app, settings):  # type: ignore[no-untyped-def]
        episode = super().start_episode(
            world, seed=seed, options=options, task=task, app=app, settings=settings
        )

        def call(tool: str, arguments: dict) -> statekit.kit.Outcome:  # type: ignore[type-arg]
            raise RuntimeError("database connection lost")

        episode.call = call  # type: ignore[method-assign]
        return episode


def test_an_environment_failure_in_step_ends_the_episode_with_an_error_observation() -> None:
    with statekit.make(BrokenLedger) as env:
        env.reset(seed=1)
        obs, reward, terminated, truncated, info = env.step({"tool": "balances"})
        assert (
            obs["error"]["code"] == "environment_error"
            and "database connection lost" in obs["error"]["message"]
        )
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert info["error"] == obs
        with pytest.raises(ResetNeeded):
            env.step({"tool": "balances"})


def test_a_fork_of_a_finished_episode_stays_finished(env: statekit.Environment) -> None:
    env.reset(seed=2)
    env.step({"tool": "submit"})
    fork = env.snapshot()
    env.restore(fork)
    with pytest.raises(ResetNeeded, match="has ended"):
        env.step({"tool": "balances"})


def test_a_refused_reset_keeps_the_episode_it_would_have_replaced(env: statekit.Environment) -> None:
    """Options are checked by starting the new episode before the old one ends: a refusal loses nothing."""
    env.reset(seed=5)
    env.step({"tool": "balances"})
    before = env.state()
    with pytest.raises(ValueError):
        env.reset(seed=6, options={"max_steps": "lots"})
    assert env.state() == before, "the refused reset must leave the live episode exactly as it was"
    assert env.step({"tool": "balances"})[4]["step"] == 2
    assert isinstance(env.strategy, InMemory)
    assert env.strategy.live_count == 1, "the refused copy is discarded"


def test_a_closed_environment_refuses_everything_and_creates_nothing() -> None:
    env = statekit.make(LedgerAdapter)
    env.reset(seed=1)
    fork = env.snapshot()
    env.close()
    strategy = env.strategy
    assert isinstance(strategy, InMemory)
    goldens = dict(strategy._goldens)
    calls = {
        "reset": lambda: env.reset(seed=2),
        "step": lambda: env.step({"tool": "balances"}),
        "state": env.state,
        "snapshot": env.snapshot,
        "restore": lambda: env.restore(fork),
        "prefetch": lambda: env.prefetch([3]),
    }
    for name, call in calls.items():
        with pytest.raises(EnvironmentClosed, match=r"closed.*statekit\.make"):
            call()
        assert strategy.live_count == 0, f"{name} after close restored a copy"
        assert strategy._goldens == goldens, f"{name} after close built a golden"
    env.close()  # still safe twice


def test_a_refused_reset_to_the_live_worlds_seed_keeps_the_episode_under_rewind() -> None:
    """With ``rewind`` a reset to the same seed reuses the live world, so the adapter's check_options
    refuses bad options before the episode ends."""
    with statekit.make(LedgerAdapter, strategy="rewind") as env:
        env.reset(seed=5)
        world = env.world.id
        env.step({"tool": "balances"})
        before = env.state()
        with pytest.raises(ValueError, match="max_steps"):
            env.reset(seed=5, options={"max_steps": "lots"})
        assert env.state() == before and env.world.id == world
        _, info = env.reset(seed=5)
        assert (env.world.id, info["world"]) == (world, "rewound"), "a good reset still rewinds in place"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"bogus": 1},
            r"adapter 'ledger' takes no reset option\(s\) \['bogus'\]; it takes \['max_steps', 'task'\]",
        ),
        ({"task": "mortgage"}, r"unknown task kind 'mortgage'; kinds are \['transfer'\]"),
        ({"task": 7}, r"reset option 'task': 7 is not of type 'string'"),
    ],
)
def test_reset_options_are_checked_against_what_the_adapter_declares(
    env: statekit.Environment, options: dict[str, object], message: str
) -> None:
    """The same rule for every adapter (``Adapter.reset_options``): an option it does not declare, or
    a value its schema refuses, is a ConfigError before any world is touched; the episode stays."""
    env.reset(seed=3)
    before = env.state()
    with pytest.raises(ConfigError, match=message):
        env.reset(seed=4, options=options)  # type: ignore[arg-type]
    assert env.state() == before
