"""The ``statekit`` command line: demo, digest, check.

Exit codes: 0 success, 1 a check failed, 2 bad input or an error (the message names the problem).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

import statekit
from statekit.digest.canonical import canonical_json
from statekit.errors import StatekitError
from statekit.testing import check_env, first_difference, reference_script, rollout

console = Console()


def _env(args: argparse.Namespace, **extra: Any) -> statekit.Environment:
    return statekit.make(args.adapter, strategy=args.strategy, db_url=args.db_url, **extra)


def cmd_digest(args: argparse.Namespace) -> int:
    with _env(args) as env:
        env.reset(seed=args.seed)
        report = env.digest_report().as_dict()
    if args.json:
        print(canonical_json(report))
    else:
        table = Table("table", "rows", "sha256", title=f"{args.adapter} seed {args.seed}: {report['digest']}")
        for name, t in report["tables"].items():
            table.add_row(name, str(t["rows"]), t["sha256"])
        console.print(table)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    seeds = [int(s) for s in args.seeds.split(",")]
    with _env(args) as env:
        report = check_env(env, seeds=seeds, repeats=args.repeats, task_repeats=args.task_repeats)
    if args.json:
        print(json.dumps(report.as_dict(), sort_keys=True))
    else:
        for name in ("deterministic", "seeds_differ", "reset_restores_initial", "coverage", "tasks_valid"):
            mark = "[green]ok[/]" if getattr(report, name) else "[red]FAIL[/]"
            console.print(f"{name:<24} {mark}")
        for problem in report.problems:
            console.print(f"  [red]-[/] {problem}")
    return 0 if report.ok else 1


def _summary(obs: Any, width: int = 100) -> str:
    text = canonical_json(obs)
    return text if len(text) <= width else text[: width - 1] + "…"


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cmd_demo(args: argparse.Namespace) -> int:
    """Reset a world, play the reference script, then prove determinism, seed sensitivity and speed."""
    seed, other = args.seed, args.seed + 1
    with _env(args, prewarm=2) as env:
        started = time.perf_counter()
        obs, info = env.reset(seed=seed)
        first_reset = time.perf_counter() - started
        console.rule(f"[bold]{args.adapter}[/] seed {seed}: task {info['task_kind']}")
        console.print(f"[bold]task:[/] {env.task.prompt}")
        console.print(
            f"initial digest {str(info['digest'])[:16]}  clock {info['clock']}  ({env.last_reset_cache})"
        )
        script = env.adapter.reference_actions(env.task)
        for i, action in enumerate(script, 1):
            obs, reward, terminated, truncated, _ = env.step(action)
            console.print(f"[cyan]step {i}[/] {_summary(action, 70)}")
            console.print(
                f"        -> {_summary(obs)}  reward={reward} terminated={terminated} truncated={truncated}"
            )
        final = env.state()
        console.print(f"final digest {final.digest[:16]} after {final.step_count} steps, clock {final.clock}")

        console.rule("determinism")
        a = rollout(env, seed=seed, actions=script)
        b = rollout(env, seed=seed, actions=script)
        diff = first_difference(a, b)
        ok_same = diff is None and a.state_digest == final.digest
        verdict = "[green]yes[/]" if ok_same else "[red]NO[/]"
        console.print(f"replay seed {seed}: same digest, observations, rewards: {verdict}")
        if diff:
            console.print(f"  {diff}")
        c = rollout(env, seed=other, actions=reference_script(env, other))
        differ = c.initial_digest != a.initial_digest
        console.print(f"seed {other} gives a different world: {'[green]yes[/]' if differ else '[red]NO[/]'}")

        console.rule("reset latency")
        env.prefetch([seed])
        samples = []
        for _ in range(args.resets):
            t0 = time.perf_counter()
            env.reset(seed=seed)
            samples.append(time.perf_counter() - t0)
        console.print(f"first reset (build world, cold): {first_reset * 1000:.0f} ms")
        p50 = statistics.median(samples)
        console.print(
            f"env.reset over {args.resets} resets: p50 {p50 * 1000:.1f} ms, "
            f"p99 {_percentile(samples, 0.99) * 1000:.1f} ms ({first_reset / p50:.0f}x faster than the first)"
        )
    return 0 if ok_same and differ else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="statekit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, adapter: bool = True) -> None:
        if adapter:
            p.add_argument("adapter", help="registered name (claims_app) or package.module:attribute")
        p.add_argument("--strategy", default=None, help="reset strategy (default: the adapter's first)")
        p.add_argument("--db-url", default=None, help="PostgreSQL admin URL (default: embedded cluster)")

    demo = sub.add_parser("demo", help="play a scripted episode and prove determinism")
    demo.add_argument("adapter", nargs="?", default="claims_app")
    common(demo, adapter=False)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--resets", type=int, default=20)
    demo.set_defaults(func=cmd_demo)

    digest = sub.add_parser("digest", help="the initial-state digest of a seed")
    common(digest)
    digest.add_argument("--seed", type=int, required=True)
    digest.add_argument("--json", action="store_true")
    digest.set_defaults(func=cmd_digest)

    check = sub.add_parser("check", help="run the determinism checker")
    common(check)
    check.add_argument("--seeds", default="7,8")
    check.add_argument("--repeats", type=int, default=3)
    check.add_argument("--task-repeats", type=int, default=5)
    check.add_argument("--json", action="store_true")
    check.set_defaults(func=cmd_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except StatekitError as exc:
        print(f"statekit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
