"""``statekit check`` (the full check plan, or ``--quick``) and ``statekit demo`` (a played episode, the
quick plan's determinism and seed steps, and reset latency)."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from rich.markup import escape

from statekit.capabilities import reference_actions
from statekit.checks import CheckPlan, CheckReport, ProbeSettings, check_env
from statekit.cli.render import console, percentile, seed_list, summary, verdict
from statekit.cli.spec import add_spec_arguments, spec_from_args

VERDICTS = (
    "deterministic",
    "seeds_differ",
    "reset_restores_initial",
    "coverage",
    "tasks_valid",
    "tasks_robust",
    "incremental_digest",
    "rewind_order",
    "random_walk",
    "journal_integrity",
)


def plan_from_args(args: argparse.Namespace) -> CheckPlan:
    seeds = tuple(int(s) for s in args.seeds.split(","))
    if args.quick:
        return CheckPlan.quick(seeds)
    probes = (
        None if args.skip_probes else ProbeSettings(args.probe_budget, args.probe_entities, args.probe_walk)
    )
    return CheckPlan(
        seeds=seeds,
        repeats=args.repeats,
        task_repeats=args.task_repeats,
        probes=probes,
        probe_seeds=tuple(seed_list(args.probe_seeds)) if args.probe_seeds else None,
        controls=not args.skip_controls,
    )


def render(report: CheckReport) -> None:
    """A report as the terminal shows it: each verdict, each task kind, then failures, findings, notes."""
    verdicts: dict[str, bool | None] = {name: getattr(report, name) for name in VERDICTS}
    verdicts.update({f"control {name}": ok for name, ok in report.controls.items()})
    for name, ok in verdicts.items():
        console.print(f"{name:<24} {verdict(ok)}")
    for kind, played in report.kinds.items():
        written = played.ignored_writes
        writes = "not checked" if written is None else ", ".join(written) or "none"
        console.print(
            f"task {kind:<19} deterministic {verdict(played.deterministic)}, reset "
            f"{verdict(played.reset_restores_initial)}, writes ignored tables: {escape(writes)}"
        )
    for problem in report.problems:
        console.print(f"  [red]FAIL[/] {escape(problem)}")
    for finding in report.findings:
        console.print(f"  [yellow]![/] {escape(finding)}")
    for note in report.notes:
        console.print(f"  [dim]-[/] {escape(note)}")
    if report.excluded_tasks:
        console.print(f"excluded from the task pool: {', '.join(sorted(report.excluded_tasks))}")


def cmd_check(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    with spec.make() as env:
        report = check_env(env, plan_from_args(args))
    if args.json:
        print(json.dumps({**report.as_dict(), "spec": spec.as_dict()}, sort_keys=True))
    else:
        console.print(f"[bold]{spec.describe()}[/]")
        render(report)
    return 0 if report.ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    """Reset a world, play the reference script, then prove determinism, seed sensitivity and speed."""
    seed = args.seed
    spec = spec_from_args(args)
    with spec.make() as env:
        started = time.perf_counter()
        obs, info = env.reset(seed=seed)
        first_reset = time.perf_counter() - started
        built = env.last_reset_cache == "miss"
        console.rule(f"[bold]{args.adapter}[/] seed {seed}: task {info['task_kind']}")
        console.print(f"[dim]{spec.describe()}[/]")
        console.print(f"[bold]task:[/] {env.task.prompt}")
        origin = "built from the seed" if built else "cloned from the cached golden"
        console.print(f"initial digest {str(info['digest'])[:16]}  clock {info['clock']}  (world {origin})")
        script = reference_actions(env.adapter, env.task)
        for i, action in enumerate(script, 1):
            obs, reward, terminated, truncated, _ = env.step(action)
            console.print(f"[cyan]step {i}[/] {summary(action, 90)}", soft_wrap=True)
            console.print(f"   -> {summary(obs, 90)}", soft_wrap=True)
            console.print(f"      reward={reward} terminated={terminated} truncated={truncated}")
        final = env.state()
        console.print(f"final digest {final.digest[:16]} after {final.step_count} steps, clock {final.clock}")

        console.rule("determinism (the quick check plan)")
        plan = CheckPlan.quick(seeds=(seed, seed + 1))
        report = CheckReport()
        for step in plan.steps(env.adapter.task_kinds()):
            if step.name in ("deterministic", "seeds_differ"):
                step.run(env, report)
        console.print(
            f"replay seed {seed}: same digest, observations, rewards: {verdict(report.deterministic)}"
        )
        console.print(f"seed {seed + 1} gives a different world: {verdict(report.seeds_differ)}")
        for problem in report.problems:
            console.print(f"  {escape(problem)}")

        console.rule("reset latency")
        samples = []
        for _ in range(args.resets):  # as a trainer calls it: reset, play the episode, reset again
            t0 = time.perf_counter()
            _, info = env.reset(seed=seed)
            samples.append(time.perf_counter() - t0)
            for action in script:
                if any(env.step(action)[2:4]):
                    break
        p50 = statistics.median(samples)
        console.print(
            f"env.reset, back to back over {args.resets} episodes of {len(script)} steps: "
            f"p50 {p50 * 1000:.1f} ms, p99 {percentile(samples, 0.99) * 1000:.1f} ms "
            f"(strategy {info['strategy']}: worlds {info['world']})"
        )
        if built:
            console.print(
                f"first reset, which built the world: {first_reset * 1000:.0f} ms ({first_reset / p50:.0f}x)"
            )
        else:
            console.print(
                f"first reset: {first_reset * 1000:.0f} ms (its world came from the cache in $STATEKIT_HOME; "
                "a never-seen seed is built once, then cloned)"
            )
    return 0 if report.ok else 1


def register(sub: Any) -> None:
    demo = sub.add_parser("demo", help="play a scripted episode and prove determinism")
    add_spec_arguments(demo, adapter="optional")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--resets", type=int, default=20)
    demo.set_defaults(func=cmd_demo)

    check = sub.add_parser("check", help="run the check plan: determinism, tasks, probes, controls")
    add_spec_arguments(check)
    check.add_argument("--seeds", default="7,8")
    check.add_argument(
        "--quick", action="store_true", help="the quick plan: determinism, seeds, reset, coverage"
    )
    check.add_argument("--repeats", type=int, default=3)
    check.add_argument("--task-repeats", type=int, default=5)
    check.add_argument("--json", action="store_true")
    check.add_argument("--skip-controls", action="store_true", help="skip the control-removal checks")
    check.add_argument("--skip-probes", action="store_true", help="skip the exploit probes (tasks_robust)")
    check.add_argument("--probe-seeds", default=None, help="seeds for the exploit probes (default: --seeds)")
    defaults = ProbeSettings()
    check.add_argument("--probe-budget", type=int, default=defaults.budget, help="step cap while probing")
    check.add_argument("--probe-entities", type=int, default=defaults.entities, help="entities per tool")
    check.add_argument(
        "--probe-walk", type=int, default=defaults.walk_steps, help="steps of the random-walk probe"
    )
    check.set_defaults(func=cmd_check)
