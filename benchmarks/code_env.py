"""The code environment, timed end to end: what a trainer pays per reset, per tool call, per episode.

    python benchmarks/code_env.py [--samples 30] [--episodes 64] [--no-container]

1. Reset and each tool, p50/p99 (subprocess sandbox, default CowFilesystem method, default limits):
   ``reset`` (a warm golden), ``list_files``, ``view_file``, ``write_file``, ``run_tests`` (one
   sandboxed run of the visible tests) and ``submit`` (one sandboxed run of the hidden cases + grading).
2. 64 episodes (a third each: the reference, doing nothing, a random walk) serially in one process,
   then split over 2 and N worker processes (N = twice the cores): the rewards and final digests must
   be identical pair for pair; wall time and speed-up are printed. Each worker pays its own start-up
   (interpreter, imports, ``statekit.make``), as a trainer's would.
3. Reset (after one write) by plain directory copy, by the copy-on-write method the machine
   supports, and by rewinding that copy in place (``rewind=True``: ``Rewinding(CowFilesystem)``).
4. A test run in the subprocess sandbox vs ``docker exec`` into the episode's container, and what
   starting that container adds to a reset.

Uses ``$STATEKIT_HOME`` (default ``~/.cache/statekit``): the first run validates the task pool in
each sandbox (cached afterwards) and builds the goldens.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table
from timing import percentile_ms, timed

import statekit
from statekit_examples.adapters.code_env.baselines import KINDS, play_all, play_in_parallel

TASK = "median"
console = Console()


def _latencies(n: int, call: Callable[[], object], before: Callable[[], object] | None = None) -> list[float]:
    samples = []
    for _ in range(n):
        if before:
            before()
        samples.append(timed(call))
    return samples


def _row(table: Table, name: str, samples: list[float], *extra: str) -> None:
    table.add_row(name, f"{percentile_ms(samples, 0.5):.1f}", f"{percentile_ms(samples, 0.99):.1f}", *extra)


def tool_latencies(samples: int) -> None:
    with statekit.make("code_env", max_steps=100_000) as env:  # one episode takes every tool sample
        env.reset(seed=7, options={"task": TASK})  # builds the golden once
        reference = env.adapter.reference_actions(env.task)[0]

        def reset() -> None:
            env.reset(seed=7, options={"task": TASK})

        table = Table(title=f"1. reset and tools, p50/p99 ms (sandbox subprocess, reset {env.strategy.name})")
        for column in ("call", "p50", "p99"):
            table.add_column(column, justify="right" if column != "call" else "left")
        _row(table, "reset", _latencies(samples, reset))
        reset()
        for name, action in (
            ("list_files", {"tool": "list_files"}),
            ("view_file", {"tool": "view_file", "path": "solution.py"}),
            ("write_file", reference),
            ("run_tests (a test run)", {"tool": "run_tests"}),
        ):
            _row(table, name, _latencies(samples, lambda a=action: env.step(a)))

        def ready_to_submit() -> None:
            reset()
            env.step(reference)

        _row(
            table,
            "submit (hidden run + grade)",
            _latencies(samples, lambda: env.step({"tool": "submit"}), ready_to_submit),
        )
    console.print(table)


def parallel(episodes: int) -> None:
    pairs = [(seed, KINDS[seed % len(KINDS)]) for seed in range(episodes)]
    play_all(pairs[:3])  # goldens and validation cache warm, so every column pays the same
    cores = os.cpu_count() or 1
    table = Table(title=f"2. {episodes} episodes, serial vs worker processes ({cores} cores)")
    for column in ("workers", "wall s", "episodes/s", "speed-up", "rewards and digests"):
        table.add_column(column, justify="right")
    started = time.perf_counter()
    serial = play_all(pairs)
    base = time.perf_counter() - started
    expected = [(r.task, r.reward, r.digest) for r in serial]
    table.add_row("1 (serial)", f"{base:.1f}", f"{episodes / base:.1f}", "1.00x", "reference")
    for workers in sorted({2, cores, 2 * cores}):
        started = time.perf_counter()
        results = play_in_parallel(pairs, workers)
        wall = time.perf_counter() - started
        same = [(r.task, r.reward, r.digest) for r in results] == expected
        table.add_row(
            str(workers),
            f"{wall:.1f}",
            f"{episodes / wall:.1f}",
            f"{base / wall:.2f}x",
            "identical" if same else "DIFFER",
        )
        if not same:
            raise SystemExit("parallel episodes scored differently from serial ones: shared state somewhere")
    mean = sum(r.reward for r in serial) / len(serial)
    console.print(table)
    console.print(
        f"   mean reward {mean:.3f}; by kind: "
        + ", ".join(
            f"{kind} {sum(r.reward for r, (_, k) in zip(serial, pairs, strict=True) if k == kind):.1f}"
            for kind in KINDS
        )
    )


def reset_methods(samples: int) -> None:
    table = Table(title="3. reset after a write: directory copy vs copy-on-write vs rewind in place (ms)")
    for column in ("method", "p50", "p99", "vs copy"):
        table.add_column(column, justify="right")
    base = 0.0
    write = {"tool": "write_file", "path": "solution.py", "content": "def median(xs):\n    return 0\n"}
    for options in ({"cow_method": "copy"}, {"cow_method": "auto"}, {"cow_method": "auto", "rewind": True}):
        with statekit.make("code_env", **options) as env:
            env.reset(seed=7, options={"task": TASK})

            def dirty(e: statekit.Environment = env) -> None:
                e.step(write)  # so every reset has a changed tree to throw away or put back

            reset = lambda e=env: e.reset(seed=7, options={"task": TASK})  # noqa: E731
            samples_s = _latencies(samples, reset, dirty)
            p50 = percentile_ms(samples_s, 0.5)
            base = base or p50
            _row(table, env.strategy.name, samples_s, f"{base / p50:.2f}x")
    console.print(table)


def sandboxes(samples: int) -> None:
    table = Table(title="4. one test run per step: subprocess sandbox vs docker exec (p50/p99 ms)")
    for column in ("sandbox", "run_tests p50", "run_tests p99", "reset p50", "reset p99"):
        table.add_column(column, justify="right")
    for strategy in ("subprocess", "container"):
        try:
            env = statekit.make("code_env", strategy=strategy, tasks=[TASK], max_steps=100_000)
        except statekit.ConfigError as exc:
            table.add_row(strategy, "-", "-", "-", f"not run: {exc}")
            continue
        with env:
            env.reset(seed=7, options={"task": TASK})
            runs = _latencies(samples, lambda e=env: e.step({"tool": "run_tests"}))
            resets = _latencies(max(5, samples // 3), lambda e=env: e.reset(seed=7, options={"task": TASK}))
        table.add_row(
            strategy,
            f"{percentile_ms(runs, 0.5):.1f}",
            f"{percentile_ms(runs, 0.99):.1f}",
            f"{percentile_ms(resets, 0.5):.1f}",
            f"{percentile_ms(resets, 0.99):.1f}",
        )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--no-container", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    console.print(f"[bold]code_env benchmark[/] ({os.cpu_count()} cores, load average {load:.1f} at start)")
    tool_latencies(args.samples)
    parallel(args.episodes)
    reset_methods(args.samples)
    if not args.no_container:
        sandboxes(args.samples)


if __name__ == "__main__":
    main()
