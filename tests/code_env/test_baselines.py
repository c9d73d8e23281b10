"""The floor and the ceiling: doing nothing, random walks and degenerate schema-driven policies score
0 on every task; the reference scores 1. And parallel episodes score exactly what serial ones do."""

from __future__ import annotations

import random
from typing import Any

import statekit
from statekit_examples.adapters.code_env import CodeEnvAdapter
from statekit_examples.adapters.code_env.baselines import (
    KINDS,
    do_nothing,
    play_all,
    play_in_parallel,
    random_walk,
    run_episode,
)


def test_doing_nothing_scores_zero_on_every_task(
    code_env: statekit.Environment, adapter: CodeEnvAdapter
) -> None:
    for task in adapter.task_kinds():
        assert run_episode(code_env, do_nothing, 0, options={"task": task}).reward == 0.0


def test_random_walks_score_zero(code_env: statekit.Environment) -> None:
    results = [run_episode(code_env, random_walk, seed) for seed in range(24)]
    assert {r.reward for r in results} == {0.0}
    assert len({r.task for r in results}) > 5 and max(r.steps for r in results) > 3


def schema_probe(info: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """A degenerate policy derived from the tool schemas alone: every tool once with placeholder
    arguments (what a checker can build without knowing the task), in a seeded order, then submit."""
    actions = []
    for tool in rng.sample(info["tools"], len(info["tools"])):
        properties = tool["input_schema"].get("properties", {})
        filler = rng.choice(["", "x", "solution.py"])
        actions.append({"tool": tool["name"], **{name: filler or "x" for name in properties}})
    return [*actions, {"tool": "submit"}]


def test_degenerate_schema_policies_score_zero(
    code_env: statekit.Environment, adapter: CodeEnvAdapter
) -> None:
    for seed, task in enumerate(adapter.task_kinds()):
        _, info = code_env.reset(seed=seed, options={"task": task})
        reward = 0.0
        for action in schema_probe(info, random.Random(seed)):
            _, reward, terminated, truncated, _ = code_env.step(action)
            if terminated or truncated:
                break
        assert reward == 0.0, (task, schema_probe(info, random.Random(seed)))


def test_the_reference_solves_every_task(code_env: statekit.Environment, adapter: CodeEnvAdapter) -> None:
    for task in adapter.task_kinds():
        code_env.reset(seed=2, options={"task": task})
        reward = 0.0
        for action in adapter.reference_actions(code_env.task):
            _, reward, *_ = code_env.step(action)
        assert reward == 1.0, task


def test_parallel_rewards_equal_serial_for_64_episodes(code_env: statekit.Environment) -> None:
    """The same 64 (seed, script) pairs, in one process and split over two: the same rewards and the
    same final worlds, pair for pair (no shared directory, port or task between environments)."""
    pairs = [(seed, KINDS[seed % len(KINDS)]) for seed in range(64)]
    serial = play_all(pairs)
    parallel = play_in_parallel(pairs, workers=2)
    assert [(r.seed, r.task, r.reward, r.digest) for r in serial] == [
        (r.seed, r.task, r.reward, r.digest) for r in parallel
    ]
    assert {r.reward for r in serial} >= {0.0, 1.0}
