"""Where two rollouts part (``statekit diverge``) and what an app upgrade changed (``statekit drift``).

The first divergence is found by walking both rollouts in lockstep and comparing digests after
every step, not by binary search: a later step can make two worlds equal again, so "diverged at k"
does not imply "diverged after k", and a bisection could report the wrong step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from statekit.capabilities import StateDumps, capability
from statekit.contract import JSON
from statekit.digest.diff import StateDiff, diff_dumps
from statekit.env import Environment
from statekit.errors import SpecError


@dataclass
class Divergence:
    """``step`` is the first step after which the digests differ (0: the initial worlds), or None."""

    step: int | None
    digests: list[tuple[str, str]]
    diff: StateDiff | None = None
    actions: tuple[JSON, JSON] = (None, None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "digests": [list(pair) for pair in self.digests],
            "actions": list(self.actions),
            "diff": self.diff.as_dict() if self.diff else None,
        }


def first_divergence(
    env_a: Environment,
    env_b: Environment,
    *,
    seed: int,
    actions_a: Sequence[dict[str, JSON]],
    actions_b: Sequence[dict[str, JSON]],
    options: dict[str, JSON] | None = None,
) -> Divergence:
    """Play both scripts from the same seed side by side; stop at the first differing digest."""
    env_a.reset(seed=seed, options=options)
    env_b.reset(seed=seed, options=options)
    digests: list[tuple[str, str]] = []
    done_a = done_b = False
    for step in range(max(len(actions_a), len(actions_b)) + 1):
        action_a = actions_a[step - 1] if 0 < step <= len(actions_a) else None
        action_b = actions_b[step - 1] if 0 < step <= len(actions_b) else None
        if action_a is not None and not done_a:
            _, _, term, trunc, _ = env_a.step(action_a)
            done_a = term or trunc
        if action_b is not None and not done_b:
            _, _, term, trunc, _ = env_b.step(action_b)
            done_b = term or trunc
        pair = (env_a.digest_now(), env_b.digest_now())
        digests.append(pair)
        if pair[0] != pair[1]:
            return Divergence(step, digests, diff_dumps(env_a.dump(), env_b.dump()), (action_a, action_b))
    return Divergence(None, digests)


def schema_changes(old: dict[str, dict[str, str]], new: dict[str, dict[str, str]]) -> list[str]:
    """Tables and columns added, removed or retyped between two live schemas, as readable lines."""
    lines = [f"added table {t}" for t in sorted(new.keys() - old.keys())]
    lines += [f"removed table {t}" for t in sorted(old.keys() - new.keys())]
    for table in sorted(old.keys() & new.keys()):
        before, after = old[table], new[table]
        lines += [f"added column {table}.{c} ({after[c]})" for c in sorted(after.keys() - before.keys())]
        lines += [f"removed column {table}.{c} ({before[c]})" for c in sorted(before.keys() - after.keys())]
        lines += [
            f"retyped column {table}.{c}: {before[c]} -> {after[c]}"
            for c in sorted(before.keys() & after.keys())
            if before[c] != after[c]
        ]
    return lines


@dataclass
class DriftReport:
    schema: list[str] = field(default_factory=list)
    coverage: list[str] = field(default_factory=list)
    digests: dict[int, tuple[str, str]] = field(default_factory=dict)

    @property
    def drifted(self) -> bool:
        return bool(self.schema or self.coverage or any(a != b for a, b in self.digests.values()))

    def as_dict(self) -> dict[str, Any]:
        return {
            "drifted": self.drifted,
            "schema": self.schema,
            "coverage": self.coverage,
            "digests": {
                str(seed): {"old": a, "new": b, "equal": a == b} for seed, (a, b) in self.digests.items()
            },
        }


def _initial_digest(env: Environment, seed: int) -> tuple[str, dict[str, dict[str, str]], list[str]]:
    dumps = capability(env.adapter, StateDumps, why="drift compares live schemas")
    with env.open_world(seed) as world:
        schema = dumps.live_schema(world)
        problems = dumps.check_schema(world)
        try:
            digest = env.adapter.digest(world).digest
        except SpecError as exc:
            digest, problems = f"unavailable: {exc}", [*problems, str(exc)]
    return digest, schema, problems


def drift(old: Environment, new: Environment, seeds: Sequence[int]) -> DriftReport:
    """Compare two builds of an application: live schemas, the spec's coverage of the new one, and
    the initial digests of ``seeds``."""
    report = DriftReport()
    for i, seed in enumerate(seeds):
        digest_old, schema_old, _ = _initial_digest(old, seed)
        digest_new, schema_new, problems = _initial_digest(new, seed)
        if i == 0:
            report.schema = schema_changes(schema_old, schema_new)
            report.coverage = sorted(set(problems))
        report.digests[seed] = (digest_old, digest_new)
    return report
