"""Exploit probes: degenerate policies, derived from the tools' schemas alone, that must not score.

If the reward can go up without the task getting done, an optimiser will find the way. So for every
task kind and seed the checker plays policies that do no task at all, with a generous step budget
(truncation must not be the defence), and demands that each scores at most the kind's floor
(``CheckHints.exploit_floors``, default 0):

- ``do_nothing``: never calls a tool (each step an empty action) until the step budget runs out;
- ``submit_at_once[T]``: calls ``T`` first, for every tool that needs no entity; a tool that ends the
  episode this way is a *terminal* tool (how the other policies finish);
- ``every_entity[T]``: applies ``T`` to every entity seen while looking around, then finishes, for
  every tool that writes (no ``readOnlyHint``) and takes an entity argument: "deny every claim",
  "pay every claim", "write every file". The first ``ProbeSettings.entities`` are tried; a win among
  them is re-played with every entity before it counts (the task's own target comes first, so a cap
  alone could turn the policy into the solution);
- ``random_walk``: looks around, then a seeded walk of random tool calls with random arguments.

The look-around of ``random_walk`` is reused by each ``every_entity`` episode of the same seed and
task when it called only read-only tools (they change nothing, so they are not repeated).

Nothing here knows an application. Arguments come from the tools' JSON Schemas: ``const``, ``enum``
and ``default`` values; integers at their largest allowed value (generous pages), booleans true,
free text a filler. An *entity* argument is a string whose value must come from the world: one with
a ``pattern`` takes every string (or word of a string) seen in an observation that matches it; one
without takes the values seen under a key of the same name (``policy_number`` in a listing feeds
``policy_number`` of ``file_claim``). Entities are tried most relevant first: those named in the
first observation (the task prompt), then those in an object that also holds a value the prompt
names, then the rest in the order seen. "Looking around" calls each read-only tool (MCP's
``readOnlyHint``; without any, every tool that needs no entity) once with the base arguments and once
per ``enum`` value and boolean of its optional arguments.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from statekit.capabilities import exploit_floors
from statekit.checks.arguments import (
    FILLER,
    NOTHING,
    Harvest,
    ToolView,
    argument_tuples,
    bounded,
    entity_args,
    fillable,
    fixed_value,
    may_take_entity,
    random_action,
)
from statekit.contract import JSON
from statekit.env import Environment
from statekit.errors import ConfigError

Action = dict[str, JSON]


@dataclass(frozen=True)
class ProbeSettings:
    """How hard the probes push. The defaults are what ``statekit check`` uses."""

    budget: int = 1000
    """The step cap during probes: generous, so a policy is never saved by running out of steps."""
    entities: int = 30
    """At most this many entities (or argument tuples) per tool in ``every_entity``, most relevant
    first: enough to include the task's own target and strays around it."""
    walk_steps: int = 50
    """Random tool calls in ``random_walk`` before it finishes."""

    def __post_init__(self) -> None:
        if self.budget < 2 or self.entities < 1 or self.walk_steps < 0:
            raise ValueError(f"ProbeSettings needs budget >= 2, entities >= 1, walk_steps >= 0; got {self}")


DEFAULT_PROBES = ProbeSettings()


@dataclass(frozen=True)
class ProbeRun:
    """One probe episode: which policy, on which task and seed, what it earned and did."""

    kind: str
    seed: int
    policy: str
    reward: float
    floor: float
    terminated: bool
    actions: tuple[Action, ...]
    changed: bool = False
    """The world's digest at the end differed from the reset's: some call acted on it."""
    entities: int = 0
    """Entities (argument tuples) an ``every_entity`` policy applied its tool to."""

    @property
    def exploit(self) -> bool:
        return self.reward > self.floor

    @property
    def calls(self) -> int:
        """Tool calls made (an empty action calls nothing)."""
        return sum(1 for action in self.actions if action.get("tool"))

    def describe(self, shown: int = 4) -> str:
        """One line: the policy, its reward and the actions that won (the first and last few)."""
        acts = [_short(a) for a in self.actions]
        if len(acts) > 2 * shown:
            acts = [*acts[:shown], f"... {len(acts) - 2 * shown} more ...", *acts[-shown:]]
        return (
            f"task {self.kind!r} (seed {self.seed}): probe {self.policy!r} scored {self.reward} "
            f"(floor {self.floor}) with {len(self.actions)} actions: {'; '.join(acts)}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "seed": self.seed,
            "policy": self.policy,
            "reward": self.reward,
            "floor": self.floor,
            "terminated": self.terminated,
            "actions": list(self.actions),
            "changed": self.changed,
            "entities": self.entities,
        }

    def summary(self) -> dict[str, Any]:
        """What the probe did, without its actions: the check report lists one per run."""
        return {
            "seed": self.seed,
            "policy": self.policy,
            "calls": self.calls,
            "entities": self.entities,
            "changed_the_world": self.changed,
            "reached_the_verifier": self.terminated,
            "reward": self.reward,
        }


def _short(action: Action) -> str:
    args = ", ".join(f"{k}={str(v)[:24]}" for k, v in sorted(action.items()) if k != "tool")
    return f"{action.get('tool', '(no tool)')}({args})"


@dataclass
class ProbeReport:
    runs: list[ProbeRun] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the probes could not do (a seed with no such task, no terminal tool), so it is not passed."""

    @property
    def exploits(self) -> list[ProbeRun]:
        return [run for run in self.runs if run.exploit]

    @property
    def exploited_kinds(self) -> dict[str, str]:
        """``{kind: why}`` for every task kind some probe won: the winning policies and their seeds,
        then the first winner's actions."""
        won: dict[str, dict[str, list[int]]] = {}
        first: dict[str, ProbeRun] = {}
        for run in self.exploits:
            won.setdefault(run.kind, {}).setdefault(run.policy, []).append(run.seed)
            first.setdefault(run.kind, run)
        return {
            kind: (
                f"task {kind!r} is won by "
                + ", ".join(
                    f"{policy} (seeds {', '.join(map(str, seeds))})" for policy, seeds in policies.items()
                )
                + f"; {first[kind].describe()}"
            )
            for kind, policies in won.items()
        }

    def by_kind(self) -> dict[str, list[ProbeRun]]:
        """The runs of each task kind, kinds in the order played."""
        out: dict[str, list[ProbeRun]] = {}
        for run in self.runs:
            out.setdefault(run.kind, []).append(run)
        return out

    def unexercised(self) -> dict[str, str]:
        """``{kind: why}`` for every kind the probes did not put to the test: none of its runs changed the
        world and reached the verifier, so its reward was never asked to judge an act (robust there
        means nothing; the kind is reported null with this reason)."""
        out: dict[str, str] = {}
        for kind, runs in self.by_kind().items():
            if any(run.exploit or (run.changed and run.terminated) for run in runs):
                continue  # a kind some probe won was tested (and failed)
            if not any(run.changed for run in runs):
                why = "no probe changed the world (their calls found nothing to act on)"
            elif not any(run.terminated for run in runs):
                why = "no probe reached the verifier (none ended the episode)"
            else:
                why = "no probe that changed the world reached the verifier"
            out[kind] = f"{why}: {len(runs)} runs, {sum(run.calls for run in runs)} calls"
        return out

    def rewards(self) -> dict[str, dict[str, dict[int, float]]]:
        """``{kind: {policy: {seed: reward}}}``: the table a closing note quotes. Keyed by seed, since
        not every policy plays on every seed (``every_entity[T]`` only where ``T`` found an entity)."""
        table: dict[str, dict[str, dict[int, float]]] = {}
        for run in self.runs:
            table.setdefault(run.kind, {}).setdefault(run.policy, {})[run.seed] = run.reward
        return table


# -- one probe episode -------------------------------------------------------------------------
class _Episode:
    """A probe's episode: reset, act, harvest what is shown, remember what was done."""

    def __init__(self, env: Environment, seed: int, options: dict[str, JSON], budget: int) -> None:
        self.env, self.budget = env, budget
        obs, info = env.reset(seed=seed, options=options)
        self.initial = info.get("digest")
        self.tools = [ToolView.of(t) for t in info["tools"]]
        self.harvest = Harvest()
        self.harvest.add(obs, first=True)
        self.actions: list[Action] = []
        self.reward = 0.0
        self.done = self.terminated = False

    @property
    def room(self) -> int:
        """Steps left before the budget, keeping the last one for finishing."""
        return self.budget - len(self.actions) - 1

    def act(self, action: Action) -> None:
        if self.done:
            return
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self.actions.append(action)
        self.reward += reward
        self.harvest.add(obs)
        self.done, self.terminated = terminated or truncated, terminated

    def call(self, tool: ToolView, extra: Mapping[str, Any] | None = None) -> bool:
        """Call ``tool`` with its fixed arguments plus ``extra``; False if they cannot all be filled."""
        args = dict(extra or {})
        for name in tool.required:
            if name not in args:
                value = fixed_value(tool.properties.get(name, {}), name)
                if value is NOTHING:
                    return False
                args[name] = value
        self.act({"tool": tool.name, **args})
        return True

    def look_around(self, terminal: set[str]) -> Harvest | None:
        """Call every read-only tool (or, if none says so, every tool that needs no entity) once with
        its base arguments and once per optional enum value and boolean. Returns a copy of what was
        seen when only read-only tools were called (another episode of the same world may reuse it)."""
        tools = [t for t in self.tools if t.name not in terminal]
        readers = [t for t in tools if t.read_only] or tools
        for tool in readers:
            base = {  # optional page sizes at their largest allowed value, cursors at their lowest
                name: fixed_value(schema, name)
                for name, schema in tool.properties.items()
                if name not in tool.required and bounded(schema)
            }
            variants = [base]
            for name, schema in tool.properties.items():
                if name in tool.required:
                    continue
                options = schema.get("enum") or ([True, False] if schema.get("type") == "boolean" else [])
                variants += [{**base, name: value} for value in options]
            for extra in variants:
                if self.room <= 0 or self.done or not self.call(tool, extra):
                    break
        return copy.deepcopy(self.harvest) if all(t.read_only for t in readers) and not self.done else None

    def finish(self, terminal: Sequence[ToolView]) -> None:
        for tool in terminal:
            if self.done:
                return
            self.call(tool)


# -- the policies ------------------------------------------------------------------------------
class _Prober:
    def __init__(self, env: Environment, settings: ProbeSettings) -> None:
        self.env, self.settings = env, settings
        self.terminal: dict[str, bool] = {}
        """Tool name -> whether calling it first ended the episode (on the last seed played)."""

    def runs(self, kind: str, seed: int, floor: float) -> list[ProbeRun]:
        options: dict[str, JSON] = {"task": kind}
        out: list[ProbeRun] = []

        def record(policy: str, ep: _Episode, entities: int = 0) -> None:
            changed = ep.initial is not None and self.env.state().digest != ep.initial
            played = (ep.reward, floor, ep.terminated, tuple(ep.actions), changed, entities)
            out.append(ProbeRun(kind, seed, policy, *played))

        ep = self._episode(seed, options)
        tools = ep.tools
        for _ in range(self.settings.budget):  # an empty action is no tool call at all
            ep.act({})
        record("do_nothing", ep)

        for tool in tools:  # submit_at_once, learning which tools end the episode
            if not fillable(tool):
                continue
            ep = self._episode(seed, options)
            if ep.call(tool):
                self.terminal[tool.name] = ep.terminated
                record(f"submit_at_once[{tool.name}]", ep)
        terminal = [t for t in tools if self.terminal.get(t.name)]
        ends = {t.name for t in terminal}
        if not terminal:
            return out

        ep = self._episode(seed, options)
        looked = ep.look_around(ends)
        rng = random.Random(f"walk:{kind}:{seed}")
        movers = [t for t in tools if t.name not in ends]
        for _ in range(self.settings.walk_steps):
            if ep.room <= 0 or ep.done:
                break
            action = random_action(rng, movers, ep.harvest)
            if action is not None:
                ep.act(action)
        ep.finish(terminal)
        record("random_walk", ep)

        for tool in tools:
            if tool.read_only or tool.name in ends or not may_take_entity(tool):
                continue
            played = self._every_entity(seed, options, tool, terminal, looked, self.settings.entities)
            if played is not None and played[0].reward > floor and played[1]:
                # a win among the first few entities may be the cap's doing (the task's own target
                # comes first): it counts only if it still wins with every entity the episode shows
                played = self._every_entity(seed, options, tool, terminal, looked, self.settings.budget)
            if played is not None:
                record(f"every_entity[{tool.name}]", played[0], played[2])
        return out

    def _every_entity(
        self,
        seed: int,
        options: dict[str, JSON],
        tool: ToolView,
        terminal: list[ToolView],
        looked: Harvest | None,
        cap: int,
    ) -> tuple[_Episode, bool, int] | None:
        """Apply ``tool`` to up to ``cap`` entities, then finish. Returns the episode, whether the cap
        left entities out and how many it applied the tool to; None when the tool takes no entity.

        ``looked`` is what looking around with read-only tools showed in another episode of the same
        world and task: those calls change nothing, so they are not repeated (the actions reported are
        the ones played). Without it, this episode looks around itself."""
        ep = self._episode(seed, options)
        if looked is not None:
            ep.harvest = copy.deepcopy(looked)
        else:
            ep.look_around({t.name for t in terminal})
        entity = entity_args(tool, ep.harvest)
        if not entity:
            return None
        combos = argument_tuples(entity, cap + 1)
        applied = 0
        for extra in combos[:cap]:
            if ep.room <= 0 or ep.done:
                break
            applied += ep.call(tool, extra)
        ep.finish(terminal)
        return ep, len(combos) > cap, applied

    def _episode(self, seed: int, options: dict[str, JSON]) -> _Episode:
        return _Episode(self.env, seed, options, self.settings.budget)


def check_exploits(
    env: Environment,
    *,
    seeds: Sequence[int],
    settings: ProbeSettings | None = None,
    kinds: Sequence[str] | None = None,
) -> ProbeReport:
    """Play every probe policy on every task kind (``options={"task": kind}``) and seed.

    A run whose total reward exceeds the kind's floor (``CheckHints.exploit_floors``) is an exploit.
    The environment's step cap is the settings' ``budget`` while the probes run.
    """
    settings = settings or ProbeSettings()
    report = ProbeReport()
    floors = exploit_floors(env.adapter)
    prober = _Prober(env, settings)
    with env.step_cap(settings.budget):
        for kind in kinds if kinds is not None else env.adapter.task_kinds():
            for seed in seeds:
                try:
                    report.runs += prober.runs(kind, seed, float(floors.get(kind, 0.0)))
                except ConfigError as exc:  # e.g. this seed's world has nothing fit for the kind
                    report.notes.append(f"task {kind!r} (seed {seed}): not probed: {exc}")
        if prober.terminal and not any(prober.terminal.values()):
            report.notes.append(
                "no tool ended the episode when called first, so only do_nothing and submit_at_once ran "
                "(a finishing tool that needs an entity is beyond the probes)"
            )
    return report


__all__ = [
    "DEFAULT_PROBES",
    "FILLER",
    "Harvest",
    "ProbeReport",
    "ProbeRun",
    "ProbeSettings",
    "check_exploits",
]
