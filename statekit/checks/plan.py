"""One check plan, rendered everywhere: ``statekit check`` (the CLI), ``check_env``, the pytest plugin
(one generated test per step) and ``statekit demo`` (the quick plan's first steps).

A ``CheckPlan`` says how hard to check (seeds, replays, probes, controls); ``steps(env)`` lists what it
checks on one environment, in order, each step recording into a ``CheckReport``. ``check_env`` runs
every step; the plugin runs each as its own test; nothing is checked twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from statekit.checks.controls import check_env_controls, controls_not_checked
from statekit.checks.episodes import (
    check_deterministic,
    check_incremental_digest,
    check_kind,
    check_random_walk,
    check_reset_restores,
    check_rewind_order,
    check_seeds_differ,
    check_task,
    coverage_not_checked,
)
from statekit.checks.probes import DEFAULT_PROBES, ProbeSettings, check_exploits
from statekit.checks.report import NOT_CHECKED, CheckReport
from statekit.checks.rollouts import Action, reference_script
from statekit.env import Environment
from statekit.errors import SpecError

NOT_RUN = "not run: the world's digest cannot be computed (see coverage)"


@dataclass(frozen=True)
class Step:
    """One check of a plan: its report name, its test name (the plugin's), and what it runs."""

    name: str
    test: str
    run: Callable[[Environment, CheckReport], None] = field(compare=False, repr=False)


@dataclass(frozen=True)
class CheckPlan:
    """How hard to check. The defaults are ``statekit check``'s full plan; ``quick()`` is a contributor's.

    ``seeds``: at least two (the first plays the default task). ``repeats``: replays of each script;
    ``task_repeats``: plays of each kind's reference and do-nothing scripts. ``script``: the default
    task's actions (default: its reference). ``walk_steps``: the random walk's length (0: no walk).
    ``probes``: how hard the exploit probes push, on ``probe_seeds`` (default ``seeds``; None: none).
    ``kinds``, ``rewind_order``, ``journal``, ``controls``: whether those steps run.
    """

    seeds: tuple[int, ...] = (7, 8)
    repeats: int = 3
    task_repeats: int = 5
    script: tuple[Action, ...] | None = None
    walk_steps: int = 20
    probes: ProbeSettings | None = DEFAULT_PROBES
    probe_seeds: tuple[int, ...] | None = None
    kinds: bool = True
    rewind_order: bool = True
    journal: bool = True
    controls: bool = True
    control_pause: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", tuple(self.seeds))
        if len(self.seeds) < 2:
            raise ValueError("a check plan needs at least two seeds")
        if self.script is not None:
            object.__setattr__(self, "script", tuple(self.script))
        if self.probe_seeds is not None:
            object.__setattr__(self, "probe_seeds", tuple(self.probe_seeds))

    @classmethod
    def quick(cls, seeds: Sequence[int] = (7, 8)) -> CheckPlan:
        """Determinism, seed sensitivity, reset and coverage only: seconds, not minutes."""
        return cls(
            seeds=tuple(seeds),
            repeats=2,
            task_repeats=1,
            walk_steps=0,
            probes=None,
            kinds=False,
            rewind_order=False,
            journal=False,
            controls=False,
        )

    def replace(self, **changes: object) -> CheckPlan:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def steps(self, kinds: Sequence[str]) -> list[Step]:
        """What this plan checks on an environment whose adapter poses task ``kinds``, in order (known
        without a world: the pytest plugin generates a test per step at collection)."""
        steps = [
            Step("coverage", "test_digest_covers_the_schema", self._coverage),
            Step("deterministic", "test_reset_is_deterministic", self._deterministic),
            Step("seeds_differ", "test_seeds_differ", self._seeds_differ),
            Step("reset_restores_initial", "test_reset_restores_initial", self._restores),
            Step("incremental_digest", "test_incremental_digest", self._incremental),
        ]
        if self.walk_steps:
            steps.append(Step("random_walk", "test_random_walk_replays", self._walk))
        if self.kinds:
            steps += [
                Step(f"tasks[{k}]", f"test_task_kind[{k}]", self._kind(i, k)) for i, k in enumerate(kinds)
            ]
        if self.rewind_order:
            steps.append(Step("rewind_order", "test_rewound_world_answers_like_a_clone", self._rewind_order))
        if self.journal:
            steps.append(Step("journal_integrity", "test_journal_resists_attacks", self._journal))
        if self.probes is not None:
            steps += [
                Step(f"tasks_robust[{k}]", f"test_rewards_resist_exploits[{k}]", self._probe(k))
                for k in kinds
            ]
        if self.controls:
            steps.append(Step("controls", "test_controls_do_the_work", self._controls))
        return steps

    # -- the steps ------------------------------------------------------------------------------
    def _base(self, env: Environment) -> list[Action]:
        return list(self.script) if self.script is not None else reference_script(env, self.seeds[0])

    def _coverage(self, env: Environment, report: CheckReport) -> None:
        env.reset(seed=self.seeds[0])
        unchecked = coverage_not_checked(env.adapter)
        if unchecked:
            report.coverage = None
            report.notes.append(f"coverage: {NOT_CHECKED}{unchecked}")
            return
        coverage = env.coverage_problems()
        report.record(
            "coverage", f"uncovered or unknown columns: {', '.join(coverage)}" if coverage else None
        )

    def _deterministic(self, env: Environment, report: CheckReport) -> None:
        base = self._base(env)
        for seed in self.seeds:
            report.record("deterministic", check_deterministic(env, seed, base, self.repeats))

    def _seeds_differ(self, env: Environment, report: CheckReport) -> None:
        report.record("seeds_differ", check_seeds_differ(env, self.seeds, self._base(env)))

    def _restores(self, env: Environment, report: CheckReport) -> None:
        report.record("reset_restores_initial", check_reset_restores(env, self.seeds[0], self._base(env)))

    def _incremental(self, env: Environment, report: CheckReport) -> None:
        if env.adapter.out_of_process:
            report.incremental_digest = None
            report.notes.append(f"incremental_digest: {NOT_CHECKED}{env.adapter.out_of_process}")
            return
        report.record("incremental_digest", check_incremental_digest(env, self.seeds[0], self._base(env)))

    def _walk(self, env: Environment, report: CheckReport) -> None:
        walk = check_random_walk(env, self.seeds[0], steps=self.walk_steps)
        if walk is None:
            report.random_walk = True
        elif walk.startswith(NOT_CHECKED):
            report.notes.append(f"random_walk: {walk}")
        else:
            report.record("random_walk", walk)

    def _kind(self, i: int, kind: str) -> Callable[[Environment, CheckReport], None]:
        seed = self.seeds[i % len(self.seeds)]

        def run(env: Environment, report: CheckReport) -> None:
            problem = check_task(env, kind, seed, self.task_repeats)
            report.record("tasks_valid", problem)
            if problem:
                report.excluded_tasks[kind] = problem
            played = report.kinds[kind] = check_kind(env, kind, seed, self.repeats)
            for name, why in played.problems.items():
                report.record(name, why)
            for table, reason in (played.ignored_writes or {}).items():
                report.findings.append(
                    f"ignored_writes: task {kind!r} (seed {seed}) writes the ignored table {table!r} "
                    f"({reason}): a change the digest is blind to; digest the table if a task's outcome "
                    "can depend on it"
                )

        return run

    def _rewind_order(self, env: Environment, report: CheckReport) -> None:
        order = check_rewind_order(env, self.seeds[0])
        if order is None:
            report.rewind_order = True
        elif not order.startswith("not checked"):
            report.record("rewind_order", order)

    def _journal(self, env: Environment, report: CheckReport) -> None:
        from statekit.checks.journal_attacks import check_journal_attacks  # psycopg: only when checking

        try:
            attacks = check_journal_attacks(env, self.seeds[0])
        except LookupError as exc:
            report.notes.append(f"journal_integrity: {NOT_CHECKED}{exc}")
            return
        report.journal_attacks = [attack.as_dict() for attack in attacks]
        report.journal_integrity = True
        for attack in attacks:
            report.record("journal_integrity", f"{attack.name}: {attack.problem}" if attack.problem else None)

    def _probe(self, kind: str) -> Callable[[Environment, CheckReport], None]:
        def run(env: Environment, report: CheckReport) -> None:
            assert self.probes is not None
            found = check_exploits(
                env, seeds=list(self.probe_seeds or self.seeds), settings=self.probes, kinds=[kind]
            )
            for probed, runs in found.by_kind().items():
                report.probes[probed] = [run.summary() for run in runs]
            for idle, why in found.unexercised().items():
                report.unexercised[idle] = why
                report.notes.append(f"tasks_robust[{idle}]: not exercised: {why}")
            if report.tasks_robust is not False and found.runs:  # robust only where every kind was tested
                report.tasks_robust = None if report.unexercised else True
            for exploited, why in found.exploited_kinds.items():
                others = [run.describe() for run in found.exploits[1:] if run.kind == exploited]
                report.record("tasks_robust", "\n".join([why, *others]))
                report.excluded_tasks.setdefault(exploited, why)
            report.exploits += [run.as_dict() for run in found.exploits]
            report.probe_runs += len(found.runs)
            report.notes += [note for note in found.notes if note not in report.notes]

        return run

    def _controls(self, env: Environment, report: CheckReport) -> None:
        why = controls_not_checked(env.adapter, env.spec) or (
            "the coverage check failed" if report.coverage is False else None
        )
        results = (
            {name: f"{NOT_CHECKED}{why}" for name in env.control_names}
            if why
            else check_env_controls(env, seed=self.seeds[0], pause=self.control_pause)
        )
        for name, problem in results.items():
            unchecked = str(problem).startswith(NOT_CHECKED)
            report.controls[name] = None if unchecked else problem is None
            if unchecked:
                report.notes.append(f"controls.{name}: {problem}")
            elif problem:
                report.problems.append(f"controls.{name}: {problem}")


def check_env(env: Environment, plan: CheckPlan | None = None, **settings: object) -> CheckReport:
    """Run every step of ``plan`` (default: the full plan, or one made from ``settings``, e.g.
    ``seeds=(3, 4), probes=None``) on ``env`` and report each check by name (see ``CheckReport``).
    A world whose digest cannot be computed stops the plan: nothing else can be judged."""
    plan = plan or CheckPlan(**settings)  # type: ignore[arg-type]
    report = CheckReport()
    after_kinds = 0  # what the kinds' steps could not do is said once, where they ran
    for step in plan.steps(env.adapter.task_kinds()):
        try:
            step.run(env, report)
        except SpecError as exc:
            report.record("coverage", str(exc))
            for name in (
                "deterministic",
                "seeds_differ",
                "reset_restores_initial",
                "tasks_valid",
                "tasks_robust",
            ):
                report.record(name, NOT_RUN)
            break
        if step.name.startswith("tasks["):
            after_kinds = len(report.notes)
    report.notes[after_kinds:after_kinds] = report.kinds_summary()
    if plan.probes is None:
        report.notes.append("tasks_robust: not checked (probes skipped)")
    return report
