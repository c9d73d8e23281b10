"""The public checker: the determinism checks every statekit environment must pass.

``rollout`` plays a script; ``check_env`` runs the whole battery and reports each check by name,
with the nearest difference when one fails (not just "not equal"). The pytest plugin
(``statekit.pytest_plugin``) turns the same checks into tests.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any

from statekit.adapter import Adapter
from statekit.container_mode import ContainerAdapter
from statekit.contract import JSON
from statekit.digest.canonical import canonical_json
from statekit.env import Environment, world_key
from statekit.errors import ConfigError, ResetNeeded, SpecError
from statekit.strategies.rewinding import Rewinding
from statekit.testing.blind_spots import WriteWatch
from statekit.testing.probes import DEFAULT_PROBES, ProbeReport, ProbeRun, ProbeSettings, check_exploits
from statekit.testing.walk import harvest, random_action

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
) -> Rollout:
    """Reset to ``seed``, play ``actions`` until the episode ends, and record everything (``digests``:
    hash the world afresh at the start and the end)."""
    obs, _ = env.reset(seed=seed, options=options)
    return play(env, seed=seed, first=obs, actions=actions, digests=digests)


def play(
    env: Environment, *, seed: int, first: JSON, actions: Sequence[Action], digests: bool = True
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
    return Rollout(seed, initial, fresh_digest(env) if digests else "", observations, rewards, noted)


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
        return f"final digests differ: {a.state_digest[:12]} vs {b.state_digest[:12]}"
    return None


NOT_CHECKED = "not checked: "
"""The prefix of a check's answer when it could not judge (nothing to judge with), as opposed to a
failure: reported as null, never as passed."""


@dataclass
class KindReport:
    """What ``check_kind`` found for one task kind's reference script."""

    seed: int
    deterministic: bool | None = None
    """Replays of the script gave equal digests, observations and rewards; None: not checked."""
    reset_restores_initial: bool | None = None
    """Resetting after the script gave back the initial digest; None: not checked (``notes``)."""
    ignored_writes: dict[str, str] | None = None
    """The spec's ignored tables the script wrote, with the spec's reasons: changes the digest is
    blind to. None: not checked (``notes`` says why)."""
    ignored_writes_seen_by: str | None = None
    """How the writes were seen (``statekit.testing.blind_spots``): the change journal, the ignored
    tables' contents hashed before and after, or "nothing ignored"."""
    problems: dict[str, str] = field(default_factory=dict)
    """``{check: the failure}`` for the checks above that failed."""
    notes: list[str] = field(default_factory=list)


@dataclass
class CheckReport:
    deterministic: bool = True
    seeds_differ: bool = True
    reset_restores_initial: bool = True
    coverage: bool | None = True
    """The digest spec covers every live column; None: not checked (``notes`` says why)."""
    tasks_valid: bool = True
    tasks_robust: bool | None = None
    """No exploit probe (``statekit.testing.probes``) beat any task kind's floor; None: not checked."""
    incremental_digest: bool | None = True
    """The digest updated step by step equals a full recompute; None: not checked (container mode:
    the harness inside computes both, and only the updated one is reachable)."""
    rewind_order: bool | None = None
    """A rewound world answers like a fresh clone; None: not checked (the strategy does not rewind)."""
    random_walk: bool | None = None
    """A seeded random walk over the tools replays identically and reset undoes it; None: not checked."""
    journal_integrity: bool | None = None
    """Every attack on the change journal (``statekit.testing.journal_attacks``), played through the
    application's own connection, left the next episode at exactly its golden (rewound exactly, or
    cloned); None: not checked (no journaled PostgreSQL world)."""
    journal_attacks: list[dict[str, Any]] = field(default_factory=list)
    """Each attack case: what it tried, what the server refused, how the next world was served."""
    kinds: dict[str, KindReport] = field(default_factory=dict)
    """Per task kind: its reference script replayed (determinism, reset) and the ignored tables it
    writes. A kind's failures also fail ``deterministic`` / ``reset_restores_initial``."""
    controls: dict[str, bool | None] = field(default_factory=dict)
    """Per control: proved (true), broken (false), or not checked (null: no probe task exercises it for
    this adapter, or removing it changed nothing; ``problems`` says which)."""
    problems: list[str] = field(default_factory=list)
    excluded_tasks: dict[str, str] = field(default_factory=dict)
    """Task kinds a pool must leave out, with why: a failing reference, or a probe that won."""
    exploits: list[dict[str, Any]] = field(default_factory=list)
    """Each winning probe run: kind, seed, policy, reward, floor and the actions that won."""
    notes: list[str] = field(default_factory=list)
    """What a check could not do (so it is not counted as passed)."""
    findings: list[str] = field(default_factory=list)
    """What the author should look at but is not a failure: each task kind that writes an ignored
    table (``ignored_writes: ...``)."""

    @property
    def ok(self) -> bool:
        checks = [self.deterministic, self.seeds_differ, self.reset_restores_initial]
        judged = [self.tasks_valid, self.tasks_robust is not False, self.incremental_digest is not False]
        judged += [self.rewind_order is not False, self.coverage is not False, self.random_walk is not False]
        judged += [self.journal_integrity is not False]
        return all([*checks, *judged]) and all(ok is not False for ok in self.controls.values())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def reference_script(env: Environment, seed: int, options: dict[str, JSON] | None = None) -> list[Action]:
    """The adapter's reference actions for the task that ``seed`` poses."""
    env.reset(seed=seed, options=options)
    return env.adapter.reference_actions(env.task)


def _replays_differ(
    env: Environment,
    first: Rollout,
    script: Sequence[Action],
    repeats: int,
    *,
    label: str,
    options: dict[str, JSON] | None = None,
) -> str | None:
    """Replay ``script`` until there are ``repeats`` runs in all; the first run that parts from
    ``first`` (``"{label}, run N vs run 1: ..."``), or None."""
    for run in range(2, repeats + 1):
        diff = first_difference(first, rollout(env, seed=first.seed, actions=script, options=options))
        if diff:
            return f"{label}, run {run} vs run 1: {diff}"
    return None


def _reset_differs(
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


def check_deterministic(env: Environment, seed: int, script: Sequence[Action], repeats: int) -> str | None:
    """Same seed, same actions ⇒ same digest, observations and rewards, ``repeats`` times."""
    first = rollout(env, seed=seed, actions=script)
    return _replays_differ(env, first, script, repeats, label=f"seed {seed}")


def check_seeds_differ(env: Environment, seeds: Sequence[int], script: Sequence[Action]) -> str | None:
    """A seed that is ignored is a bug: different seeds must give different final digests."""
    digests = {seed: rollout(env, seed=seed, actions=script).state_digest for seed in seeds}
    if len(set(digests.values())) != len(digests):
        return f"seeds {list(seeds)} give equal digests {digests}: the seed is ignored somewhere"
    return None


def check_reset_restores(env: Environment, seed: int, script: Sequence[Action]) -> str | None:
    """Mutate, reset, and the initial digest returns."""
    _, info = env.reset(seed=seed)
    initial = info["digest"]
    if fresh_digest(env) != initial:
        return f"seed {seed}: starting the episode changed the world (reset's digest is not the state's)"
    for action in script:
        env.step(action)
    mutated = fresh_digest(env)
    problem = _reset_differs(env, seed, str(initial), label=f"seed {seed}")
    if problem:
        return problem
    if mutated == initial and script:
        return f"seed {seed}: the script changed nothing, so reset was not exercised"
    return None


def check_task(env: Environment, kind: str, seed: int, repeats: int) -> str | None:
    """SWE-bench's rule: doing nothing scores 0 and the reference scores 1, every time."""
    options: dict[str, JSON] = {"task": kind}
    for _ in range(repeats):
        env.reset(seed=seed, options=options)
        script = env.adapter.reference_actions(env.task)
        if not script:
            return f"task {kind!r} (seed {seed}) has no reference script"
        noop = rollout(env, seed=seed, actions=[script[-1]], options=options, digests=False)
        if sum(noop.rewards) != 0:
            return f"task {kind!r} (seed {seed}): doing nothing scores {noop.rewards}, expected 0"
        ref = rollout(env, seed=seed, actions=script, options=options, digests=False)
        if not ref.rewards or ref.rewards[-1] != 1.0:
            return f"task {kind!r} (seed {seed}): the reference scores {ref.rewards}, expected a final 1.0"
    return None


def check_kind(env: Environment, kind: str, seed: int, repeats: int) -> KindReport:
    """Play task ``kind``'s reference script ``repeats`` times on ``seed`` (equal digests, observations
    and rewards each time), then reset twice (the initial digest must come back, from the world
    hashed afresh), watching which of the spec's ignored tables the first run writes
    (``statekit.testing.blind_spots``). Every kind, not only the default task: a kind whose script
    writes files or tables no other script touches is exercised here."""
    report = KindReport(seed)
    options: dict[str, JSON] = {"task": kind}
    try:
        first_obs, _ = env.reset(seed=seed, options=options)
    except ConfigError as exc:  # e.g. this seed's world has nothing fit for the kind
        report.notes.append(f"{NOT_CHECKED}{exc}")
        return report
    script = env.adapter.reference_actions(env.task)
    if not script:
        report.notes.append(f"{NOT_CHECKED}it has no reference script")
        return report
    watch = WriteWatch.start(env)
    first = play(env, seed=seed, first=first_obs, actions=script)
    written = watch if isinstance(watch, str) else watch.written()
    if isinstance(written, str):
        report.notes.append(f"ignored_writes: {NOT_CHECKED}{written}")
    else:
        assert not isinstance(watch, str)
        report.ignored_writes, report.ignored_writes_seen_by = written, watch.method
    label = f"task {kind!r} (seed {seed})"
    replayed = _replays_differ(env, first, script, repeats, label=label, options=options)
    report.deterministic = replayed is None
    if replayed:
        report.problems["deterministic"] = replayed
    if first.state_digest == first.initial_digest:
        report.notes.append(f"reset_restores_initial: {NOT_CHECKED}the script changed nothing digested")
        return report
    restored = _reset_differs(env, seed, first.initial_digest, label=label, options=options)
    report.reset_restores_initial = restored is None
    if restored:
        report.problems["reset_restores_initial"] = restored
    return report


def check_incremental_digest(env: Environment, seed: int, script: Sequence[Action]) -> str | None:
    """After every step the digest ``state()`` reports (updated from the previous one) equals a full
    recompute from every row."""
    env.reset(seed=seed)
    for step, action in enumerate(script, 1):
        _, _, terminated, truncated, _ = env.step(action)
        quick = env.state().digest
        full = env.digest_report(full=True).digest
        if quick != full:
            tool = action.get("tool")
            return f"seed {seed}, step {step} ({tool}): updated digest {quick[:12]} != full {full[:12]}"
        if terminated or truncated:
            break
    return None


def _walk(
    env: Environment,
    seed: int,
    steps: int,
    actions: Sequence[Action] | None = None,
    *,
    avoid: Sequence[str] = (),
) -> tuple[list[Action], list[JSON]]:
    """Play a seeded random walk that never calls a tool in ``avoid`` (or replay ``actions``);
    return the actions and the observations."""
    rng, seen = random.Random(f"walk:{seed}"), set[str]()
    played: list[Action] = []
    observations: list[JSON] = []
    for i in range(len(actions) if actions is not None else steps):
        action = actions[i] if actions is not None else random_action(env.tools, rng, seen, avoid=avoid)
        obs, _, terminated, truncated, _ = env.step(action)
        harvest(obs, seen)
        played.append(action)
        observations.append(obs)
        if terminated or truncated:
            break
    return played, observations


def check_random_walk(env: Environment, seed: int, *, steps: int = 20) -> str | None:
    """A seeded random walk over the tools (arguments drawn from their schemas and from what earlier
    observations showed: ``statekit.testing.walk``), played and then replayed: the digests,
    observations and rewards must be equal, and a reset must undo the walk. The tool that ends the
    default task's reference script is avoided, so the walk is as long as asked (or the step cap).

    Reaches what no reference script does: tools no task needs, arguments no task uses, errors.
    Returns None, the failure, or "not checked: ..." (no tools).
    """
    obs, _ = env.reset(seed=seed)
    tools = env.tools
    if not tools:
        return f"{NOT_CHECKED}the environment offers no tools"
    ending = tuple(str(a["tool"]) for a in env.adapter.reference_actions(env.task)[-1:])
    if all(t["name"] in ending for t in tools):
        return f"{NOT_CHECKED}the only tool ends the episode"
    initial = fresh_digest(env)
    rng, seen = random.Random(f"random-walk:{seed}"), set[str]()
    harvest(obs, seen)
    actions: list[Action] = []
    observations, rewards = [obs], []
    for _ in range(steps):
        action = random_action(tools, rng, seen, avoid=ending)
        obs, reward, terminated, truncated, _ = env.step(action)
        harvest(obs, seen)
        actions.append(action)
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            break
    walked = Rollout(seed, initial, fresh_digest(env), observations, rewards)
    diff = first_difference(walked, rollout(env, seed=seed, actions=actions))
    if diff:
        shown = "; ".join(canonical_json(a)[:80] for a in actions[:6])
        return f"seed {seed}, replay vs first walk: {diff}\n  the walk's first actions: {shown}"
    return _reset_differs(env, seed, initial, label=f"seed {seed}, after the random walk")


def coverage_not_checked(adapter: Adapter) -> str | None:
    """Why ``Adapter.check_schema`` cannot judge ``adapter``'s coverage (None: it can), so coverage is
    reported as not checked instead of passed."""
    if isinstance(adapter, ContainerAdapter):
        return (
            f"container mode: the harness inside the container digests with the spec of {adapter.name!r}, "
            "and its live schema cannot be read from outside; check coverage with an in-process "
            f"strategy of {adapter.in_process()} (statekit check ADAPTER --strategy NAME)"
        )
    if type(adapter).check_schema is Adapter.check_schema:
        return (
            f"adapter {adapter.name!r} does not implement Adapter.check_schema, so nothing compares its "
            "digest with the live state it should cover"
        )
    return None


def controls_not_checked(adapter: Adapter) -> str | None:
    """Why ``check_controls`` cannot switch ``adapter``'s controls off (None: it can)."""
    if isinstance(adapter, ContainerAdapter):
        return (
            "container mode: the controls run inside the container and cannot be switched off from "
            f"outside; prove them with an in-process strategy of {adapter.in_process()}"
        )
    return None


def check_rewind_order(env: Environment, seed: int, *, steps: int = 16) -> str | None:
    """The physical-order trap: a rewound world holds the same rows as a fresh clone, not in the same
    physical order. Play one seeded walk on a fresh clone and again on a rewound world (after a
    different, dirty episode); the observations must be equal. Returns None when they are, a message
    naming the tool when they are not, and "not checked: ..." when the strategy does not rewind."""
    strategy = env.strategy
    if not isinstance(strategy, Rewinding):
        return f"not checked: strategy {strategy.name} does not rewind worlds"
    env.reset(seed=seed)  # builds the golden if needed
    env.end_episode()
    strategy.release(world_key(env.adapter.fingerprint(), seed))  # so the next copy is a fresh clone
    _, info = env.reset(seed=seed)
    if info["world"] == "rewound":
        return "not checked: no fresh clone could be had"
    reference = env.adapter.reference_actions(env.task)
    ending = tuple(str(a["tool"]) for a in reference[-1:])  # the tool that ends an episode: not mid-walk
    actions, fresh = _walk(env, seed, steps, avoid=ending)
    env.reset(seed=seed)  # a different, dirty episode: the task's own writes, then another walk
    try:
        _walk(env, seed, 0, reference)
        _walk(env, seed + 1, steps, avoid=ending)
    except ResetNeeded:
        pass  # the episode ended on the way
    _, info = env.reset(seed=seed)
    if info["world"] != "rewound":
        return f"not checked: the world was not rewound ({strategy.stats.fallbacks or 'cloned instead'})"
    _, rewound = _walk(env, seed, steps, actions)
    for i, (a, b) in enumerate(zip(fresh, rewound, strict=False)):
        if a != b:
            tool = actions[i].get("tool")
            return (
                f"seed {seed}, step {i + 1}: {tool!r} answered differently on a rewound world than on "
                f"a fresh clone:\n  fresh:   {canonical_json(a)[:300]}\n"
                f"  rewound: {canonical_json(b)[:300]}\n"
                "A rewound world holds the same rows in another physical order, so a query without a total "
                "ORDER BY can answer differently. Give that query an ORDER BY on a unique key, or use the "
                "clone strategy (strategy='template') for this adapter."
            )
    return None


def probe_rollout(
    env: Environment, *, seed: int, actions: Sequence[Action], options: dict[str, JSON] | None, pause: float
) -> tuple[Rollout, bool]:
    """A rollout that also watches the world between steps: (rollout, whether state moved in a pause).

    State must change only inside ``step``; a background job firing between steps shows up here.
    """
    obs, _ = env.reset(seed=seed, options=options)
    initial = fresh_digest(env)
    observations, rewards, noted, moved = [obs], [], [], False
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        observations.append(obs)
        rewards.append(reward)
        noted += _noted(info)
        before = fresh_digest(env)
        time.sleep(pause)
        moved = moved or fresh_digest(env) != before
        if terminated or truncated:
            break
    return Rollout(seed, initial, fresh_digest(env), observations, rewards, noted), moved


def check_controls(
    make_env: Callable[[tuple[str, ...]], AbstractContextManager[Environment]],
    *,
    seed: int,
    pause: float = 0.5,
) -> dict[str, str | None]:
    """Prove each determinism control does the work: with it on, two replays of the control's probe
    task (``Adapter.probe_tasks``) match, nothing moves between steps and no control reports anything
    (``info["determinism"]``: a refused connection, a row stamped by the database's clock); with only
    it off, they differ (or state moves).

    The controls proved are those ``probe_tasks`` names (an adapter that names none: ``clock`` and
    ``ids`` on its default task); every other one is answered ``NOT_CHECKED`` (its own tests prove it),
    and so is one whose removal changed nothing. ``make_env(disabled)`` returns a context-managed
    environment with those controls off. Returns ``{control: problem or None}``, every control named.
    """

    def twice(env: Environment, control: str) -> tuple[str | None, bool, list[str]]:
        kind = env.adapter.probe_tasks.get(control)
        options: dict[str, JSON] | None = {"task": kind} if kind else None
        env.reset(seed=seed, options=options)
        script = env.adapter.reference_actions(env.task)
        a, moved_a = probe_rollout(env, seed=seed, actions=script, options=options, pause=pause)
        b, moved_b = probe_rollout(env, seed=seed, actions=script, options=options, pause=pause)
        return first_difference(a, b), moved_a or moved_b, a.noted + b.noted

    results: dict[str, str | None] = {}
    with make_env(()) as env:
        names, unprobed = controls_to_check(env)
        on = {name: twice(env, name) for name in names}
    for name in unprobed:
        results[name] = (
            f"{NOT_CHECKED}no probe task exercises {name!r} for this adapter (Adapter.probe_tasks names "
            f"{sorted(names)}); name a task kind whose reference script depends on it to check it here"
        )
    for name in names:
        diff, moved, noted = on[name]
        if noted:
            results[name] = f"with every control on, a control reported: {noted[0]}"
            continue
        if diff or moved:
            results[name] = f"with every control on, replays differ: {diff or 'state changed between steps'}"
            continue
        with make_env((name,)) as env_off:
            diff_off, moved_off, _ = twice(env_off, name)
        if diff_off is None and not moved_off:
            results[name] = (
                f"{NOT_CHECKED}with only {name!r} off, replays still match: the control does no work for "
                "this environment, or its probe task (Adapter.probe_tasks) does not exercise it"
            )
        else:
            results[name] = None
    return results


def controls_to_check(env: Environment) -> tuple[list[str], list[str]]:
    """(controls ``check_controls`` proves for this environment, those it cannot: no probe task)."""
    known = [*env.control_names]
    probed = [name for name in known if name in env.adapter.probe_tasks] or ["clock", "ids"]
    return probed, [name for name in known if name not in probed]


def check_env(
    env: Environment,
    *,
    seeds: Sequence[int] = (7, 8),
    repeats: int = 3,
    task_repeats: int = 5,
    script: Sequence[Action] | None = None,
    probes: ProbeSettings | None = DEFAULT_PROBES,
    probe_seeds: Sequence[int] | None = None,
    walk_steps: int = 20,
) -> CheckReport:
    """Run every check on ``env`` and report each by name (see ``CheckReport``).

    Beyond the default task's script (``script``, or the reference for ``seeds[0]``'s task), every task
    kind's reference script is replayed ``repeats`` times and reset (``check_kind``), and a seeded
    random walk of ``walk_steps`` tool calls is played twice (``check_random_walk``).

    ``probes`` (None: skip) sets how hard the exploit probes push, on ``probe_seeds`` (default:
    ``seeds``) for every task kind; a kind some probe wins is excluded like one whose reference fails.
    """
    if len(seeds) < 2:
        raise ValueError("check_env needs at least two seeds")
    report = CheckReport()

    def record(name: str, problem: str | None) -> None:
        if problem:
            setattr(report, name, False)
            report.problems.append(f"{name}: {problem}")

    try:
        env.reset(seed=seeds[0])
    except SpecError as exc:  # no digest can be computed: nothing else can be judged
        record("coverage", str(exc))
        for name in (
            "deterministic",
            "seeds_differ",
            "reset_restores_initial",
            "tasks_valid",
            "tasks_robust",
        ):
            record(name, "not run: the world's digest cannot be computed (see coverage)")
        return report
    unchecked = coverage_not_checked(env.adapter)
    if unchecked:
        report.coverage = None
        report.notes.append(f"coverage: {NOT_CHECKED}{unchecked}")
    else:
        coverage = env.coverage_problems()
        record("coverage", f"uncovered or unknown columns: {', '.join(coverage)}" if coverage else None)
    base = list(script) if script is not None else reference_script(env, seeds[0])
    for seed in seeds:
        record("deterministic", check_deterministic(env, seed, base, repeats))
    record("seeds_differ", check_seeds_differ(env, seeds, base))
    record("reset_restores_initial", check_reset_restores(env, seeds[0], base))
    if isinstance(env.adapter, ContainerAdapter):
        report.incremental_digest = None
        report.notes.append(
            f"incremental_digest: {NOT_CHECKED}container mode: the harness inside answers with its updated "
            "digest only; run the check with an in-process strategy to compare it with a full one"
        )
    else:
        record("incremental_digest", check_incremental_digest(env, seeds[0], base))
    walk = check_random_walk(env, seeds[0], steps=walk_steps)
    if walk is None:
        report.random_walk = True
    elif walk.startswith(NOT_CHECKED):
        report.notes.append(f"random_walk: {walk}")
    else:
        record("random_walk", walk)
    unwatched: dict[str, list[str]] = {}
    for i, kind in enumerate(env.adapter.task_kinds()):
        seed = seeds[i % len(seeds)]
        problem = check_task(env, kind, seed, task_repeats)
        record("tasks_valid", problem)
        if problem:
            report.excluded_tasks[kind] = problem
        played = report.kinds[kind] = check_kind(env, kind, seed, repeats)
        for name, why in played.problems.items():
            record(name, why)
        for note in played.notes:  # an adapter-wide reason is said once, naming the kinds
            unwatched.setdefault(note, []).append(kind)
        for table, reason in (played.ignored_writes or {}).items():
            report.findings.append(
                f"ignored_writes: task {kind!r} (seed {seed}) writes the ignored table {table!r} "
                f"({reason}): a change the digest is blind to; digest the table if a task's outcome "
                "can depend on it"
            )
    for note, kinds in unwatched.items():
        every = len(kinds) == len(report.kinds) and len(kinds) > 1
        name, _, why = note.rpartition(NOT_CHECKED)
        which = "every task kind" if every else "task " + ", ".join(map(repr, kinds))
        report.notes.append(f"{name}not checked for {which}: {why}")
    order = check_rewind_order(env, seeds[0])
    if order is None:
        report.rewind_order = True
    elif not order.startswith("not checked"):
        record("rewind_order", order)
    from statekit.testing.journal_attacks import check_journal_attacks  # psycopg: only when checking

    try:
        attacks = check_journal_attacks(env, seeds[0])
    except LookupError as exc:
        report.notes.append(f"journal_integrity: {NOT_CHECKED}{exc}")
    else:
        report.journal_attacks = [attack.as_dict() for attack in attacks]
        report.journal_integrity = True
        for attack in attacks:
            record("journal_integrity", f"{attack.name}: {attack.problem}" if attack.problem else None)
    if probes is not None:
        found = check_exploits(env, seeds=list(probe_seeds or seeds), settings=probes)
        report.tasks_robust = True
        for kind, why in found.exploited_kinds.items():
            record("tasks_robust", why)
            report.excluded_tasks.setdefault(kind, why)
        report.exploits = [run.as_dict() for run in found.exploits]
        report.notes += found.notes
    else:
        report.notes.append("tasks_robust: not checked (probes skipped)")
    return report


__all__ = [
    "NOT_CHECKED",
    "CheckReport",
    "KindReport",
    "ProbeReport",
    "ProbeRun",
    "ProbeSettings",
    "Rollout",
    "check_controls",
    "check_deterministic",
    "check_env",
    "check_exploits",
    "check_incremental_digest",
    "check_kind",
    "check_random_walk",
    "check_reset_restores",
    "check_rewind_order",
    "check_seeds_differ",
    "check_task",
    "controls_not_checked",
    "controls_to_check",
    "coverage_not_checked",
    "first_difference",
    "fresh_digest",
    "play",
    "probe_rollout",
    "reference_script",
    "rollout",
]
