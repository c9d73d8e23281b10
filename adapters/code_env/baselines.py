"""Baseline players: do nothing, act at random, replay the reference. The floor and the ceiling.

A trainer's first sanity check: doing nothing and acting at random must score 0 on every task (if
they do not, the reward leaks), and the reference must score 1 (if it does not, the task is
broken). ``python -m statekit_examples.adapters.code_env baselines`` prints all three side by side;
the LLM baseline (``llm_baseline.py``) is the player in between.

A policy maps (observation, info of the reset, a seeded RNG) to the next action.
"""

from __future__ import annotations

import multiprocessing
import random
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

Action = dict[str, Any]
Policy = Callable[[Any, dict[str, Any], random.Random], Action]
TRIVIAL_BODIES = (
    "return 0",
    "return None",
    "return ''",
    "return []",
    "return {}",
    "return True",
    "return args[0]",
)
RANDOM_PATHS = ("solution.py", "test_visible.py", "missing.py", "../outside.py", "/etc/passwd", "sub/new.py")


class Env(Protocol):
    """What a baseline needs: ``statekit.Environment`` and ``statekit.client.RemoteEnvironment`` fit."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict]: ...

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]: ...


def do_nothing(observation: Any, info: dict[str, Any], rng: random.Random) -> Action:
    """Submit the untouched start."""
    return {"tool": "submit"}


def random_walk(observation: Any, info: dict[str, Any], rng: random.Random) -> Action:
    """A random tool with random arguments; writes put a trivial body under the name the task
    mentions first (a lucky guess at the function's name, never an implementation)."""
    tool = rng.choice([t["name"] for t in info["tools"]])
    if tool in ("view_file", "write_file"):
        path = rng.choice(RANDOM_PATHS)
        if tool == "view_file":
            return {"tool": tool, "path": path}
        name = _function_name(info.get("prompt", "")) if rng.random() < 0.7 else "_f"
        body = rng.choice(TRIVIAL_BODIES)
        return {"tool": tool, "path": path, "content": f"def {name}(*args, **kwargs):\n    {body}\n"}
    return {"tool": tool}


def _function_name(prompt: str) -> str:
    match = re.search(r"`(\w+)\(", prompt)
    return match.group(1) if match else "solution"


POLICIES: dict[str, Policy] = {"do_nothing": do_nothing, "random": random_walk}


@dataclass(frozen=True)
class EpisodeResult:
    seed: int
    task: str
    reward: float
    steps: int
    truncated: bool
    digest: str = ""
    """The world's digest when the episode ended (filled by ``play``)."""


def run_episode(
    env: Env, policy: Policy, seed: int, *, options: dict[str, Any] | None = None, max_steps: int = 30
) -> EpisodeResult:
    """Play ``policy`` from ``reset(seed)`` until the episode ends (the policy's RNG is seeded too)."""
    rng = random.Random(f"policy:{seed}")
    observation, info = env.reset(seed=seed, options=options)
    context = {**info, "prompt": observation.get("task", "") if isinstance(observation, dict) else ""}
    reward, steps, truncated = 0.0, 0, False
    for steps in range(1, max_steps + 1):  # noqa: B007 - steps is reported after the loop
        observation, reward, terminated, truncated, _ = env.step(policy(observation, context, rng))
        if terminated or truncated:
            break
    return EpisodeResult(seed, str(info["task_id"]), reward, steps, truncated)


def run_script(
    env: Env, seed: int, actions: list[Action], *, options: dict[str, Any] | None = None
) -> EpisodeResult:
    """Play a fixed action list (the reference, or any recorded script)."""
    _, info = env.reset(seed=seed, options=options)
    reward, steps, truncated = 0.0, 0, False
    for action in actions:
        _, reward, terminated, truncated, _ = env.step(action)
        steps += 1
        if terminated or truncated:
            break
    return EpisodeResult(seed, str(info["task_id"]), reward, steps, truncated)


KINDS = ("do_nothing", "random", "reference")
"""The scripts ``play`` knows: two policies and the reference (which needs the in-process adapter)."""


def play(env: Any, seed: int, kind: str, *, options: dict[str, Any] | None = None) -> EpisodeResult:
    """One episode of ``kind`` from ``reset(seed)``, with the final world digest."""
    if kind == "reference":
        env.reset(seed=seed, options=options)
        result = run_script(env, seed, env.adapter.reference_actions(env.task), options=options)
    else:
        result = run_episode(env, POLICIES[kind], seed, options=options)
    return EpisodeResult(**{**result.__dict__, "digest": env.state().digest})


def play_all(
    pairs: Sequence[tuple[int, str]], make_options: dict[str, Any] | None = None
) -> list[EpisodeResult]:
    """Play (seed, kind) pairs one after another in one environment of this process."""
    import statekit

    with statekit.make("code_env", **(make_options or {})) as env:
        return [play(env, seed, kind) for seed, kind in pairs]


def play_in_parallel(
    pairs: Sequence[tuple[int, str]], workers: int, make_options: dict[str, Any] | None = None
) -> list[EpisodeResult]:
    """The same, split over ``workers`` processes (each with its own environment), in input order.

    Processes, not threads: statekit's determinism controls patch process-wide names and take turns
    within a process.
    """
    shares = [list(pairs[i::workers]) for i in range(workers)]
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no inherited locks or mounts
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        done = list(pool.map(play_all, shares, [make_options] * workers))
    results: list[EpisodeResult | None] = [None] * len(pairs)
    for i, share in enumerate(done):
        for j, result in enumerate(share):
            results[i + j * workers] = result
    return [r for r in results if r is not None]
