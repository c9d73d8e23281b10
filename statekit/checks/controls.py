"""Each determinism control proved by removing it: with every control on, two replays of a task that
exercises it match; with only it off, they differ (or state moves between steps), or they match each
other but not the replays with it on (the episode then follows something outside the seed that the
control fixes: the machine's host name, what answers on the machine's ports).

``check_env_controls`` proves the controls of one environment, making its variants from the
environment's own ``EnvSpec`` (``disable_controls``, and the adapter's ``LiveServices`` where a control
that replays outside traffic is switched off).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext

from statekit.adapter import Adapter
from statekit.capabilities import LiveServices, capability, probe_tasks, reference_actions, unprobed_reasons
from statekit.checks.report import NOT_CHECKED
from statekit.checks.rollouts import Rollout, first_difference, probe_rollout
from statekit.contract import JSON
from statekit.env import Environment
from statekit.envspec import EnvSpec


def controls_not_checked(adapter: Adapter, spec: EnvSpec | None = None) -> str | None:
    """Why the controls of ``adapter`` (in an environment made from ``spec``) cannot be switched off
    to prove them (None: they can)."""
    if adapter.out_of_process:
        return adapter.out_of_process
    if spec is not None and not spec.portable:
        return (
            "the environment was made from an adapter instance, so no variant with a control off can be "
            "made: make it from the adapter's name or class (EnvSpec) to prove its controls"
        )
    return None


def check_env_controls(env: Environment, *, seed: int, pause: float = 0.5) -> dict[str, str | None]:
    """``check_controls`` for ``env``: its variants come from ``env.spec`` (every control named; not
    checked, with the reason, where ``controls_not_checked`` says so)."""
    why = controls_not_checked(env.adapter, env.spec)
    if why:
        return {name: f"{NOT_CHECKED}{why}" for name in env.control_names}
    probed, _ = controls_to_check(env)
    needs_live = {c.name for c in env.adapter.controls if c.needs_live_services}
    with ExitStack() as stack:
        live: dict[str, str] = {}
        if needs_live & set(probed):
            services = capability(env.adapter, LiveServices, why="proving its replay control")
            live = stack.enter_context(services.live_services())
        on = env.spec.replace(disable_controls=(), services={}, record=False)

        @contextmanager
        def make_env(disabled: tuple[str, ...]) -> Iterator[Environment]:
            if not disabled and on == env.spec:  # the environment itself, every control on
                with nullcontext(env) as same:
                    yield same
                return
            spec = on.replace(disable_controls=disabled, services=live if needs_live & set(disabled) else {})
            with spec.make() as variant:
                yield variant

        @contextmanager
        def make_fresh() -> Iterator[Environment]:
            with on.make() as fresh:
                yield fresh

        return check_controls(make_env, seed=seed, pause=pause, make_fresh=make_fresh)


def check_controls(
    make_env: Callable[[tuple[str, ...]], AbstractContextManager[Environment]],
    *,
    seed: int,
    pause: float = 0.5,
    make_fresh: Callable[[], AbstractContextManager[Environment]] | None = None,
) -> dict[str, str | None]:
    """Prove each determinism control does the work: with it on, two replays of the control's probe
    task (``CheckHints.probe_tasks``) match, nothing moves between steps and no control reports anything
    (``info["determinism"]``: a refused connection, a row stamped by the database's clock); with only
    it off, they differ (or state moves), or match each other but differ from the replays with it on.
    The last is proof too: what the control fixes (a host name, the answers of a third party) is then
    the machine's, the same twice on one machine but not on another, and the episode follows it; but
    only once a replay with every control on in a fresh environment (``make_fresh``, by default
    ``make_env(())``: its own application, its own process state) matches the first environment's, so
    that what differs is the control and not the environment.

    The controls proved are those ``probe_tasks`` names (an adapter that names none: ``clock`` and
    ``ids`` on its default task); every other one is answered ``NOT_CHECKED`` (its own tests prove it),
    and so is one whose removal changed nothing. ``make_env(disabled)`` returns a context-managed
    environment with those controls off. Returns ``{control: problem or None}``, every control named.
    """

    def twice(env: Environment, control: str) -> tuple[str | None, bool, list[str], Rollout]:
        kind = probe_tasks(env.adapter).get(control)
        options: dict[str, JSON] | None = {"task": kind} if kind else None
        env.reset(seed=seed, options=options)
        script = reference_actions(env.adapter, env.task)
        # The first run pauses after each step to watch for state moving between steps; the second runs
        # straight through: the replays must match whatever the time between steps.
        a, moved = probe_rollout(env, seed=seed, actions=script, options=options, pause=pause)
        b, _ = probe_rollout(env, seed=seed, actions=script, options=options, pause=0.0)
        return first_difference(a, b), moved, a.noted + b.noted, a

    results: dict[str, str | None] = {}
    with make_env(()) as env:
        names, unprobed = controls_to_check(env)
        reasons = unprobed_reasons(env.adapter)
        on = {name: twice(env, name) for name in names}
    for name in unprobed:
        why = reasons.get(name)
        results[name] = (
            f"{NOT_CHECKED}no task exercises {name!r}: {why}"
            if why
            else f"{NOT_CHECKED}no probe task exercises {name!r} for this adapter (CheckHints.probe_tasks "
            f"names {sorted(names)}); name a task kind whose reference script depends on it to check it here"
        )
    for name in names:
        diff, moved, noted, played = on[name]
        if noted:
            results[name] = f"with every control on, a control reported: {noted[0]}"
            continue
        if diff or moved:
            results[name] = f"with every control on, replays differ: {diff or 'state changed between steps'}"
            continue
        with make_env((name,)) as env_off:
            diff_off, moved_off, _, played_off = twice(env_off, name)
        if diff_off is not None or moved_off:
            results[name] = None
        elif first_difference(played, played_off) is None:
            results[name] = (
                f"{NOT_CHECKED}with only {name!r} off, replays still match, and match those with it on: "
                "the control does no work for this environment, or its probe task "
                "(CheckHints.probe_tasks) does not exercise it"
            )
        else:  # a contrast: it counts once a fresh environment with every control on agrees
            with (make_fresh or (lambda: make_env(())))() as fresh:
                across = first_difference(played, twice(fresh, name)[3])
            results[name] = (
                f"with every control on, a fresh environment's replay differs from the first's: {across}"
                if across
                else None
            )
    return results


def controls_to_check(env: Environment) -> tuple[list[str], list[str]]:
    """(controls ``check_controls`` proves for this environment, those it cannot: no probe task)."""
    known = [*env.control_names]
    probed = [name for name in known if name in probe_tasks(env.adapter)] or ["clock", "ids"]
    return probed, [name for name in known if name not in probed]
