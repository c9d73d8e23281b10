"""The checks that play episodes: determinism, seed sensitivity, reset, every task kind, the digest
updated step by step, a random walk, and the physical-order trap of rewound worlds."""

from __future__ import annotations

import random
from collections.abc import Sequence

from statekit.adapter import Adapter
from statekit.capabilities import StateDumps, reference_actions
from statekit.checks.blind_spots import WriteWatch
from statekit.checks.report import NOT_CHECKED, KindReport
from statekit.checks.rollouts import (
    Action,
    Rollout,
    first_difference,
    fresh_digest,
    play,
    replays_differ,
    reset_differs,
    rollout,
)
from statekit.checks.walk import harvest, random_action
from statekit.contract import JSON
from statekit.digest.canonical import canonical_json
from statekit.env import Environment, world_key
from statekit.errors import ConfigError, ResetNeeded


def check_deterministic(env: Environment, seed: int, script: Sequence[Action], repeats: int) -> str | None:
    """Same seed, same actions ⇒ same digest, observations and rewards, ``repeats`` times; a world
    that ends differently is named to the table, row and column (for an adapter with StateDumps)."""
    first = rollout(env, seed=seed, actions=script, dump=True)
    return replays_differ(env, first, script, repeats, label=f"seed {seed}")


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
    problem = reset_differs(env, seed, str(initial), label=f"seed {seed}")
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
        script = reference_actions(env.adapter, env.task)
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
    (``statekit.checks.blind_spots``). Every kind, not only the default task: a kind whose script
    writes files or tables no other script touches is exercised here."""
    report = KindReport(seed)
    options: dict[str, JSON] = {"task": kind}
    try:
        first_obs, _ = env.reset(seed=seed, options=options)
    except ConfigError as exc:  # e.g. this seed's world has nothing fit for the kind
        report.notes.append(f"{NOT_CHECKED}{exc}")
        return report
    script = reference_actions(env.adapter, env.task)
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
    replayed = replays_differ(env, first, script, repeats, label=label, options=options)
    report.deterministic = replayed is None
    if replayed:
        report.problems["deterministic"] = replayed
    if first.state_digest == first.initial_digest:
        report.notes.append(f"reset_restores_initial: {NOT_CHECKED}the script changed nothing digested")
        return report
    restored = reset_differs(env, seed, first.initial_digest, label=label, options=options)
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
    observations showed: ``statekit.checks.walk``), played and then replayed: the digests,
    observations and rewards must be equal, and a reset must undo the walk. The tool that ends the
    default task's reference script is avoided, so the walk is as long as asked (or the step cap).

    Reaches what no reference script does: tools no task needs, arguments no task uses, errors.
    Returns None, the failure, or "not checked: ..." (no tools).
    """
    obs, _ = env.reset(seed=seed)
    tools = env.tools
    if not tools:
        return f"{NOT_CHECKED}the environment offers no tools"
    ending = tuple(str(a["tool"]) for a in reference_actions(env.adapter, env.task)[-1:])
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
    return reset_differs(env, seed, initial, label=f"seed {seed}, after the random walk")


def check_rewind_order(env: Environment, seed: int, *, steps: int = 16) -> str | None:
    """The physical-order trap: a rewound world holds the same rows as a fresh clone, not in the same
    physical order. Play one seeded walk on a fresh clone and again on a rewound world (after a
    different, dirty episode); the observations must be equal. Returns None when they are, a message
    naming the tool when they are not, and "not checked: ..." when the strategy does not rewind."""
    strategy = env.strategy
    if not strategy.capabilities.keeps_worlds:
        return f"not checked: strategy {strategy.name} does not rewind worlds"
    env.reset(seed=seed)  # builds the golden if needed
    env.end_episode()
    strategy.release(world_key(env.adapter.fingerprint(), seed))  # so the next copy is a fresh clone
    _, info = env.reset(seed=seed)
    if info["world"] == "rewound":
        return "not checked: no fresh clone could be had"
    reference = reference_actions(env.adapter, env.task)
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
        return f"not checked: the world was not rewound ({strategy.fallbacks() or 'cloned instead'})"
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


def coverage_not_checked(adapter: Adapter) -> str | None:
    """Why ``StateDumps.check_schema`` cannot judge ``adapter``'s coverage (None: it can), so coverage is
    reported as not checked instead of passed."""
    if adapter.out_of_process:
        return adapter.out_of_process
    if not isinstance(adapter, StateDumps) or type(adapter).check_schema is StateDumps.check_schema:
        return (
            f"adapter {adapter.name!r} does not implement StateDumps.check_schema, so nothing compares its "
            "digest with the live state it should cover"
        )
    return None
