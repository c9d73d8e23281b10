"""Scale: the harness with 1, 2, N worker processes; Ray rollouts with 1, 2, N actors; Ray's per-step cost.

    python benchmarks/scale.py [--seconds 15] [--clients 4] [--episodes 16] [--steps 400] [--skip-ray]

Everything is timed as a user pays it, end to end, with the defaults (embedded PostgreSQL under
``$STATEKIT_HOME``, the claims app's ``template`` strategy):

* **harness**: ``statekit serve claims_app --workers W`` as a subprocess; ``--clients`` threads, each
  with its own session (``RemoteEnvironment``), play claims episodes for ``--seconds``: a reset,
  then ``list_claims`` until the task's step cap (12 steps). Throughput is steps per second over the
  wall time (resets included); the step latency is per HTTP call. ``W=0`` is the old behaviour
  (sessions in the serving process), also with one client, the single-session baseline.
* **ray**: a one-node ``LocalCluster`` with one CPU per core; ``RayRollouts`` with A actors plays
  ``--episodes`` claims episodes (each seed's reference script); goldens are built before timing.
  The trajectories are compared with an in-process serial run of the same episodes: they must be
  byte-identical.
* **overhead**: p50 of one step of the in-memory ledger in-process vs through ``VectorEnv`` with one
  actor (a Ray round trip): the cost Ray adds to each step.

The machine is shared: the load average is printed before and after; quote it with the figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table
from timing import percentile_ms

import statekit
from statekit.client import RemoteEnvironment
from statekit.harness.workers import default_workers
from statekit.rollouts import run, scripted

SEEDS = [7, 8, 9, 10]
LEDGER = "statekit.testing.ledger:LedgerAdapter"
STATEKIT = str(Path(sys.executable).with_name("statekit"))
console = Console()


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


@contextmanager
def served(workers: int, max_sessions: int) -> Iterator[str]:
    """``statekit serve claims_app --workers W`` on a free loopback port; yields its URL."""
    command = [STATEKIT, "serve", "claims_app", "--port", "0", "--workers", str(workers)]
    command += ["--max-sessions", str(max_sessions), "--idle-timeout", "0"]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "STATEKIT_TOKEN": ""},
    )
    assert proc.stdout is not None
    url = ""
    for line in proc.stdout:
        if " at http://" in line:
            url = line.split(" at ", 1)[1].split()[0]
            break
    threading.Thread(target=lambda: [None for _ in proc.stdout or []], daemon=True).start()
    try:
        if not url:
            raise SystemExit("statekit serve printed no URL")
        with RemoteEnvironment(url) as probe:
            probe.health()
        yield url
    finally:
        proc.terminate()
        proc.wait(120)


def harness(workers: int, clients: int, seconds: float) -> dict[str, float]:
    """Steps/s and step latency of ``clients`` sessions playing list_claims episodes for ``seconds``."""
    with served(workers, max_sessions=max(clients, 1) * 2) as url:
        envs = [RemoteEnvironment(url) for _ in range(clients)]
        for n, env in enumerate(envs):  # untimed: goldens built, workers warm
            env.reset(seed=SEEDS[n % len(SEEDS)])
        barrier = threading.Barrier(clients + 1)
        latencies: list[list[float]] = [[] for _ in envs]
        deadline = [0.0]

        def play(n: int) -> None:
            env = envs[n]
            barrier.wait()
            done = False
            while time.perf_counter() < deadline[0]:
                if done:
                    env.reset(seed=SEEDS[n % len(SEEDS)])
                t0 = time.perf_counter()
                _, _, terminated, truncated, _ = env.step({"tool": "list_claims", "limit": 5})
                latencies[n].append(time.perf_counter() - t0)
                done = terminated or truncated

        threads = [threading.Thread(target=play, args=(n,)) for n in range(clients)]
        for thread in threads:
            thread.start()
        deadline[0] = time.perf_counter() + seconds
        started = time.perf_counter()
        barrier.wait()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        for env in envs:
            env.close()
    samples = [s for per in latencies for s in per]
    return {
        "steps_per_s": len(samples) / elapsed,
        "p50": percentile_ms(samples, 0.5),
        "p99": percentile_ms(samples, 0.99),
    }


def ray_section(episodes: int, steps: int) -> tuple[dict[int, dict[str, float]], bool, dict[str, float]]:
    from statekit.ray import EnvSpec, LocalCluster, RayRollouts, VectorEnv

    with statekit.make("claims_app") as env:
        scripts = {}
        for seed in SEEDS:
            env.reset(seed=seed)
            scripts[seed] = env.adapter.reference_actions(env.task)
    policy = scripted(scripts)
    plays = [SEEDS[n % len(SEEDS)] for n in range(episodes)]
    serial_started = time.perf_counter()
    serial = run(lambda: statekit.make("claims_app"), plays, policy)
    serial_s = time.perf_counter() - serial_started
    cores = default_workers()
    results: dict[int, dict[str, float]] = {
        0: {"seconds": serial_s, "steps": sum(len(t.actions) for t in serial)}
    }
    identical = True
    with LocalCluster(1, cpus_per_node=cores) as _:
        with RayRollouts("claims_app", actors=min(2, cores), num_cpus=1) as warm:
            warm.run(SEEDS, policy)  # every seed's golden on the node; actors' imports done
        for actors in sorted({1, 2, cores}):
            with RayRollouts("claims_app", actors=actors, num_cpus=1) as runner:
                started = time.perf_counter()
                trajectories = runner.run(plays, policy)
                elapsed = time.perf_counter() - started
            identical &= [t.to_json() for t in trajectories] == [t.to_json() for t in serial]
            results[actors] = {"seconds": elapsed, "steps": sum(len(t.actions) for t in trajectories)}
        overhead = step_overhead(VectorEnv, EnvSpec, steps)
    return results, identical, overhead


def step_overhead(vector_env: type, env_spec: type, steps: int) -> dict[str, float]:
    """p50/p99 of one ledger step in-process and through a one-actor VectorEnv."""
    options = {"max_steps": 10**9}
    action = {"tool": "balances"}
    with statekit.make(LEDGER) as env:
        env.reset(seed=1, options=options)
        for _ in range(20):
            env.step(action)
        local = []
        for _ in range(steps):
            t0 = time.perf_counter()
            env.step(action)
            local.append(time.perf_counter() - t0)
    with vector_env(env_spec(LEDGER), 1, num_cpus=1) as vector:
        vector.reset([1], [options])
        for _ in range(20):
            vector.step([action])
        remote = []
        for _ in range(steps):
            t0 = time.perf_counter()
            vector.step([action])
            remote.append(time.perf_counter() - t0)
    return {
        "local_p50": percentile_ms(local, 0.5),
        "ray_p50": percentile_ms(remote, 0.5),
        "local_p99": percentile_ms(local, 0.99),
        "ray_p99": percentile_ms(remote, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="timed seconds per harness configuration")
    parser.add_argument("--clients", type=int, default=4, help="concurrent sessions (the issue measured 4)")
    parser.add_argument("--episodes", type=int, default=16, help="claims episodes per Ray configuration")
    parser.add_argument("--steps", type=int, default=400, help="steps timed for the per-step overhead")
    parser.add_argument("--skip-ray", action="store_true")
    args = parser.parse_args()
    cores = default_workers()
    console.print(f"cores: {cores}; load average before: {load()} (1, 5, 15 min)")

    rows = [(0, 1), (0, args.clients), (1, args.clients), (2, args.clients)]
    if cores > 2:
        rows.append((cores, args.clients))
    figures = {}
    for workers, clients in rows:
        figures[(workers, clients)] = harness(workers, clients, args.seconds)
        console.print(f"  harness --workers {workers}, {clients} clients: {figures[(workers, clients)]}")
    one = figures[(1, args.clients)]["steps_per_s"]
    table = Table(title=f"harness: claims_app, {args.clients} sessions playing list_claims episodes")
    for column in ("--workers", "sessions", "steps/s", "vs 1 worker", "step p50 ms", "step p99 ms"):
        table.add_column(column, justify="right")
    for (workers, clients), f in figures.items():
        name = f"{workers} (in-process)" if workers == 0 else str(workers)
        ratio = f"{f['steps_per_s'] / one:.2f}x"
        table.add_row(
            name, str(clients), f"{f['steps_per_s']:.1f}", ratio, f"{f['p50']:.1f}", f"{f['p99']:.1f}"
        )
    console.print(table)
    if cores == 2:
        console.print(f"N workers = cores = {cores}: the 2-worker row is the default (`statekit serve`).")

    if not args.skip_ray:
        results, identical, overhead = ray_section(args.episodes, args.steps)
        serial = results.pop(0)
        table = Table(title=f"Ray: {args.episodes} claims episodes (reference scripts), 1 node, {cores} CPUs")
        for column in ("actors", "seconds", "episodes/s", "steps/s", "vs 1 actor"):
            table.add_column(column, justify="right")
        base = args.episodes / results[1]["seconds"]
        ray_rows: list[tuple[str, dict[str, float]]] = [("serial, in-process", serial)]
        ray_rows += [(str(actors), r) for actors, r in results.items()]
        for label, r in ray_rows:
            rate = args.episodes / r["seconds"]
            steps_rate = f"{r['steps'] / r['seconds']:.1f}"
            table.add_row(label, f"{r['seconds']:.2f}", f"{rate:.2f}", steps_rate, f"{rate / base:.2f}x")
        console.print(table)
        console.print(f"serial and Ray trajectories byte-identical: {'yes' if identical else 'NO'}")
        added = overhead["ray_p50"] - overhead["local_p50"]
        console.print(
            "per-step overhead of Ray (ledger, VectorEnv of 1 actor): "
            f"in-process p50 {overhead['local_p50']:.3f} ms, Ray p50 {overhead['ray_p50']:.3f} ms: "
            f"+{added:.3f} ms p50 (p99 {overhead['local_p99']:.3f} vs {overhead['ray_p99']:.3f} ms)"
        )
    console.print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
