"""Rollouts: a scripted episode recorded with exactly what determinism is judged on (digests,
observations, rewards), and where two of them part."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from statekit.capabilities import StateDumps, reference_actions
from statekit.contract import JSON
from statekit.digest.canonical import canonical_json
from statekit.digest.diff import changed_columns, diff_dumps
from statekit.digest.dump import StateDump
from statekit.env import Environment

Action = dict[str, JSON]


@dataclass(frozen=True)
class Rollout:
    """What one scripted episode produced: the exact things determinism is judged on."""

    seed: int
    initial_digest: str
    state_digest: str
    observations: list[JSON]
    rewards: list[float]
    noted: list[str] = field(default_factory=list)
    """What the determinism controls reported along the way (``info["determinism"]``): not compared,
    but a control check with every control on fails on any."""
    final_dump: StateDump | None = field(default=None, compare=False)
    """The world's rows at the end (``dump=True``, for an adapter with ``StateDumps``): not compared,
    but where two final digests differ, ``first_difference`` names the table, row and column."""


def fresh_digest(env: Environment) -> str:
    """The world's digest recomputed from every row: a check must not trust reset's cached golden
    digest, nor a digest updated from the journal (a strategy could break either)."""
    return env.digest_report(full=True).digest


def rollout(
    env: Environment,
    *,
    seed: int,
    actions: Sequence[Action],
    options: dict[str, JSON] | None = None,
    digests: bool = True,
    dump: bool = False,
) -> Rollout:
    """Reset to ``seed``, play ``actions`` until the episode ends, and record everything (``digests``:
    hash the world afresh at the start and the end; ``dump``: keep its rows at the end too)."""
    obs, _ = env.reset(seed=seed, options=options)
    return play(env, seed=seed, first=obs, actions=actions, digests=digests, dump=dump)


def play(
    env: Environment,
    *,
    seed: int,
    first: JSON,
    actions: Sequence[Action],
    digests: bool = True,
    dump: bool = False,
) -> Rollout:
    """``rollout`` on an episode already reset (``first``: its first observation), for a check that
    must look at the world between the reset and the first step."""
    initial = fresh_digest(env) if digests else ""
    observations, rewards, noted = [first], [], []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(obs)
        rewards.append(reward)
        noted += _noted(info)
        if terminated or truncated:
            break
    final = fresh_digest(env) if digests else ""
    rows = env.dump() if dump and isinstance(env.adapter, StateDumps) else None
    return Rollout(seed, initial, final, observations, rewards, noted, rows)


def _noted(info: dict[str, Any]) -> list[str]:
    return [f"{n.get('control')}: {n.get('message')}" for n in info.get("determinism") or []]


def first_difference(a: Rollout, b: Rollout) -> str | None:
    """Where two rollouts part: the digest, the first differing step's observation, or a reward."""
    if a.initial_digest != b.initial_digest:
        return f"initial digests differ: {a.initial_digest[:12]} vs {b.initial_digest[:12]}"
    for i, (x, y) in enumerate(zip(a.observations, b.observations, strict=False)):
        if x != y:
            left, right = canonical_json(x)[:300], canonical_json(y)[:300]
            return f"observation {i} differs:\n  {left}\n  {right}"
    if len(a.observations) != len(b.observations):
        return f"episode lengths differ: {len(a.observations) - 1} vs {len(b.observations) - 1} steps"
    if a.rewards != b.rewards:
        return f"rewards differ: {a.rewards} vs {b.rewards}"
    if a.state_digest != b.state_digest:
        where = _where(a.final_dump, b.final_dump)
        return f"final digests differ: {a.state_digest[:12]} vs {b.state_digest[:12]}{where}"
    return None


def _where(a: StateDump | None, b: StateDump | None) -> str:
    """``: in TABLE, row KEY, column COLUMN: A vs B`` for the first difference of two dumps (a row
    only one has, when no row changed), or "" without both."""
    if a is None or b is None:
        return ""
    for name, table in sorted(diff_dumps(a, b).tables.items()):
        if table.changed:
            first = table.changed[0]
            column, (left, right) = next(iter(first["columns"].items()))
            return (
                f": in {name}, row {canonical_json(first['key'])}, column {column}: "
                f"{canonical_json(left)[:120]} vs {canonical_json(right)[:120]}"
            )
        if table.removed and table.added:  # rows no key matched (a set, or keys one side lacks): pair firsts
            left, right = table.removed[0]["row"], table.added[0]["row"]
            columns = ", ".join(changed_columns(left, right))
            shown = f"{canonical_json(left)[:200]} vs {canonical_json(right)[:200]}"
            return (
                f": in {name}, a row of the first run is not in the second, whose first unmatched row "
                f"differs in column(s) {columns}: {shown}"
            )
        if table.added or table.removed:
            row = (table.removed or table.added)[0]
            side = "the first run" if table.removed else "the second run"
            return f": in {name}, a row only {side} has: {canonical_json(row.get('row'))[:240]}"
    return ""


def reference_script(env: Environment, seed: int, options: dict[str, JSON] | None = None) -> list[Action]:
    """The adapter's reference actions for the task that ``seed`` poses."""
    env.reset(seed=seed, options=options)
    return reference_actions(env.adapter, env.task)


def replays_differ(
    env: Environment,
    first: Rollout,
    script: Sequence[Action],
    repeats: int,
    *,
    label: str,
    options: dict[str, JSON] | None = None,
) -> str | None:
    """Replay ``script`` until there are ``repeats`` runs in all; the first run that parts from
    ``first`` (``"{label}, run N vs run 1: ..."``), or None. The replays keep their final rows when
    ``first`` did, so a differing end is named to the column."""
    dump = first.final_dump is not None
    for run in range(2, repeats + 1):
        again = rollout(env, seed=first.seed, actions=script, options=options, dump=dump)
        diff = first_difference(first, again)
        if diff:
            return f"{label}, run {run} vs run 1: {diff}"
    return None


def reset_differs(
    env: Environment, seed: int, initial: str, *, label: str, options: dict[str, JSON] | None = None
) -> str | None:
    """Reset twice, hashing the world itself each time: a strategy that recycles used copies without
    resetting them serves a mutated one to a later reset, not necessarily the next one. The first
    reset whose digest is not ``initial`` (``"{label}: digest after reset is ..."``), or None."""
    for _ in range(2):
        env.reset(seed=seed, options=options)
        again = fresh_digest(env)
        if again != initial:
            return f"{label}: digest after reset is {again[:12]}, initial was {initial[:12]}"
    return None


def probe_rollout(
    env: Environment, *, seed: int, actions: Sequence[Action], options: dict[str, JSON] | None, pause: float
) -> tuple[Rollout, bool]:
    """A rollout that also watches the world between steps: (rollout, whether state moved in a pause).

    State must change only inside ``step``; a background job firing between steps shows up here (with
    ``pause`` 0 nothing is watched, and moved is False).
    """
    obs, _ = env.reset(seed=seed, options=options)
    initial = fresh_digest(env)
    observations, rewards, noted, moved = [obs], [], [], False
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(obs)
        rewards.append(reward)
        noted += _noted(info)
        if pause:
            before = fresh_digest(env)
            time.sleep(pause)
            moved = moved or fresh_digest(env) != before
        if terminated or truncated:
            break
    return Rollout(seed, initial, fresh_digest(env), observations, rewards, noted), moved
