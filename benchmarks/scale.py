"""Scale: the harness with 1, 2, N worker processes; Ray rollouts with 1, 2, N actors; Ray's per-step cost.

    python benchmarks/scale.py [--seconds 15] [--clients 4] [--episodes 16] [--steps 400] [--skip-ray]

Everything is timed as a user pays it, end to end, with the defaults (embedded PostgreSQL under
``$STATEKIT_HOME``, the claims app's default ``rewind`` strategy):

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
* **sizing**: what one claims environment costs a node (the inputs of docs/SCALE.md's sizing):
  resident memory of a worker process with 1 and with 4 environments, PostgreSQL connections held
  per live episode, a golden's size on disk and as a shipped export, and a reset's latency.

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
from typing import Any

from rich.console import Console
from rich.table import Table
from timing import percentile_ms

import statekit
from statekit.client import RemoteEnvironment
from statekit.env import world_key
from statekit.goldens import export_golden
from statekit.harness.workers import default_workers
from statekit.postgres import EmbeddedPostgres
from statekit.rollouts import run, scripted
from statekit.settings import statekit_home

SEEDS = [7, 8, 9, 10]
LEDGER = "statekit.testing.ledger:LedgerAdapter"
STATEKIT = str(Path(sys.executable).with_name("statekit"))
console = Console(width=150)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


@contextmanager
def served(workers: int, max_sessions: int) -> Iterator[tuple[str, int]]:
    """``statekit serve claims_app --workers W`` on a free loopback port; yields its URL and pid."""
    command = [STATEKIT, "serve", "claims_app", "--port", "0", "--workers", str(workers)]
    command += ["--max-sessions", str(max_sessions), "--idle-timeout", "0"]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "STATEKIT_TOKEN"},  # no token: loopback only
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
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(120)


def harness(workers: int, clients: int, seconds: float) -> dict[str, float]:
    """Steps/s and step latency of ``clients`` sessions playing list_claims episodes for ``seconds``."""
    with served(workers, max_sessions=max(clients, 1) * 2) as (url, front):
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
        parts = _parts(front)
        cpu_before = {name: _cpu(pids) for name, pids in parts.items()}
        client_before = time.process_time()
        deadline[0] = time.perf_counter() + seconds
        started = time.perf_counter()
        barrier.wait()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        cpu = {name: _cpu(pids) - cpu_before[name] for name, pids in parts.items()}
        cpu["client"] = time.process_time() - client_before
        for env in envs:
            env.close()
    samples = [s for per in latencies for s in per]
    figures = {
        "steps_per_s": len(samples) / elapsed,
        "p50": percentile_ms(samples, 0.5),
        "p99": percentile_ms(samples, 0.99),
    }
    figures.update({f"cpu_ms_{name}": seconds * 1000 / len(samples) for name, seconds in cpu.items()})
    return figures


def _cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes have used so far (exited ones count as 0)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _parts(front: int) -> dict[str, list[int]]:
    """The processes a harness step runs in: the front, its workers, the PostgreSQL server."""
    workers = [pid for pid in _descendants(front) if "statekit.harness.worker" in _cmdline(pid)]
    pidfile = statekit_home() / "pg" / "data" / "postmaster.pid"
    postmaster = int(pidfile.read_text().split()[0])
    return {"front": [front], "workers": workers, "postgres": [postmaster, *_descendants(postmaster)]}


def projection(one: dict[str, float], cores: list[int]) -> list[tuple[int, float, float]]:
    """Steps/s of N workers on N free cores, from one worker's CPU per step (trainer off the machine).

    Three ceilings: each worker is serial (its CPU plus the database's, the controls' lock is held
    across a step), the cores (worker + database + front CPU per step), and the front, one Python
    process. Returns (N, projected steps/s, fraction of linear).
    """
    serial_ms = one["cpu_ms_workers"] + one["cpu_ms_postgres"]
    total_ms = serial_ms + one["cpu_ms_front"]
    rows = []
    for n in cores:
        rate = min(n * 1000 / serial_ms, n * 1000 / total_ms, 1000 / one["cpu_ms_front"])
        rows.append((n, rate, rate / (n * 1000 / total_ms)))
    return rows


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
            rss = [_rss_mb(m.pid) for m in warm.fleet.members]
            console.print(f"  resident memory of a claims environment actor: {max(rss):.0f} MB")
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
    """p50/p99 of one ledger step in-process and through a one-actor VectorEnv, and the CPU each
    costs (the driver's, plus the actor process's): CPU time does not grow when the machine is busy."""
    options = {"max_steps": 10**9}
    action = {"tool": "balances"}
    with statekit.make(LEDGER) as env:
        env.reset(seed=1, options=options)
        for _ in range(20):
            env.step(action)
        local = []
        cpu = time.process_time()
        for _ in range(steps):
            t0 = time.perf_counter()
            env.step(action)
            local.append(time.perf_counter() - t0)
        local_cpu = (time.process_time() - cpu) / steps
    with vector_env(env_spec(LEDGER), 1, num_cpus=1) as vector:
        vector.reset([1], [options])
        for _ in range(20):
            vector.step([action])
        remote = []
        actor = [vector.placement[0][1]]
        cpu, actor_cpu = time.process_time(), _cpu(actor)
        for _ in range(steps):
            t0 = time.perf_counter()
            vector.step([action])
            remote.append(time.perf_counter() - t0)
        ray_cpu = (time.process_time() - cpu + _cpu(actor) - actor_cpu) / steps
    floor = _noop_call_latencies(steps)
    return {
        "noop_p50": percentile_ms(floor, 0.5),
        "local_cpu": local_cpu * 1000,
        "ray_cpu": ray_cpu * 1000,
        "local_p50": percentile_ms(local, 0.5),
        "ray_p50": percentile_ms(remote, 0.5),
        "local_p99": percentile_ms(local, 0.99),
        "ray_p99": percentile_ms(remote, 0.99),
    }


class _Echo:
    def echo(self, value: object) -> object:
        return value


def _noop_call_latencies(n: int) -> list[float]:
    """Ray's own floor: a call on an actor that does nothing with a small argument."""
    import ray

    echo: Any = ray.remote(_Echo).options(num_cpus=1).remote()
    message = {"tool": "balances"}
    for _ in range(20):
        ray.get(echo.echo.remote(message))
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        ray.get(echo.echo.remote(message))
        samples.append(time.perf_counter() - t0)
    ray.kill(echo)
    return samples


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _descendants(pid: int) -> list[int]:
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    return children + [d for child in children for d in _descendants(child)]


def sizing() -> dict[str, float]:
    """Per-environment costs of the claims app, measured (see the module docstring)."""
    figures: dict[str, float] = {}
    shared = EmbeddedPostgres()
    server = shared.acquire()
    try:
        with statekit.make("claims_app") as env:
            env.reset(seed=SEEDS[0])
            key = world_key(env.adapter.fingerprint(), SEEDS[0])
            with server.admin() as conn:
                row = conn.execute("SELECT pg_database_size(%s)", (f"skclaims_g_{key}",)).fetchone()
            figures["golden_db_mb"] = int(str(row[0])) / 1e6 if row else 0.0
            uploads = statekit_home() / "files" / "claims_app" / "uploads" / "goldens" / key
            figures["golden_files_mb"] = (
                sum(f.stat().st_size for f in uploads.rglob("*") if f.is_file()) / 1e6
            )
            started = time.perf_counter()
            export = export_golden(env.strategy, key)
            figures["export_s"] = time.perf_counter() - started
            figures["export_mb"] = export.size / 1e6 if export is not None else 0.0
            resets = []
            for _ in range(10):
                t0 = time.perf_counter()
                env.reset(seed=SEEDS[0])
                resets.append(time.perf_counter() - t0)
            figures["reset_p50_ms"] = percentile_ms(resets, 0.5)
        with served(1, max_sessions=8) as (url, _):
            remotes = [RemoteEnvironment(url) for _ in range(4)]
            remotes[0].reset(seed=SEEDS[0])
            remotes[0].step({"tool": "list_claims", "limit": 5})
            workers = [pid for pid in _descendants(os.getpid()) if "statekit.harness.worker" in _cmdline(pid)]
            figures["worker_rss_1_mb"] = sum(_rss_mb(pid) for pid in workers)
            with server.admin() as conn:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname LIKE 'skclaims_e_%%'"
                ).fetchone()
            figures["pg_connections_per_episode"] = float(str(row[0])) if row else 0.0
            for n, remote in enumerate(remotes[1:], start=1):
                remote.reset(seed=SEEDS[n % len(SEEDS)])
                remote.step({"tool": "list_claims", "limit": 5})
            figures["worker_rss_4_mb"] = sum(_rss_mb(pid) for pid in workers)
            for remote in remotes:
                remote.close()
    finally:
        shared.release()
    return figures


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="timed seconds per harness configuration")
    parser.add_argument("--clients", type=int, default=4, help="concurrent sessions (the issue measured 4)")
    parser.add_argument("--episodes", type=int, default=16, help="claims episodes per Ray configuration")
    parser.add_argument("--steps", type=int, default=400, help="steps timed for the per-step overhead")
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--sizing-only", action="store_true", help="only the per-environment costs")
    args = parser.parse_args()
    cores = default_workers()
    console.print(f"cores: {cores}; load average before: {load()} (1, 5, 15 min)")
    costs = sizing()
    table = Table(title="sizing: what one claims environment costs its node")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in costs.items():
        table.add_row(name, f"{value:.2f}")
    console.print(table)
    if args.sizing_only:
        return

    rows = [(0, 1), (0, args.clients), (1, args.clients), (2, args.clients)]
    if cores > 2:
        rows.append((cores, args.clients))
    figures = {}
    for workers, clients in rows:
        figures[(workers, clients)] = harness(workers, clients, args.seconds)
        console.print(f"  harness --workers {workers}, {clients} clients: {figures[(workers, clients)]}")
    one = figures[(1, args.clients)]["steps_per_s"]
    table = Table(title=f"harness: claims_app, {args.clients} sessions playing list_claims episodes")
    columns = ("--workers", "sessions", "steps/s", "vs 1 worker", "step p50 ms", "step p99 ms")
    for column in (*columns, "CPU ms/step: workers", "front", "postgres", "client"):
        table.add_column(column, justify="right")
    for (workers, clients), f in figures.items():
        name = f"{workers} (in-process)" if workers == 0 else str(workers)
        ratio = f"{f['steps_per_s'] / one:.2f}x"
        rate = f"{f['steps_per_s']:.1f}"
        cpu = [f"{f[f'cpu_ms_{part}']:.1f}" for part in ("workers", "front", "postgres", "client")]
        table.add_row(name, str(clients), rate, ratio, f"{f['p50']:.1f}", f"{f['p99']:.1f}", *cpu)
    console.print(table)
    console.print("(CPU per step counts the resets; in-process, the environments' CPU is the front's.)")
    table = Table(
        title="on paper: N workers on N free cores, from the 1-worker CPU per step (client elsewhere)"
    )
    for column in ("N", "steps/s", "of linear"):
        table.add_column(column, justify="right")
    for n, projected, share in projection(figures[(1, args.clients)], [1, 2, 4, 8, 16, 32]):
        table.add_row(str(n), f"{projected:.0f}", f"{share:.0%}")
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
            f"+{added:.3f} ms p50 (p99 {overhead['local_p99']:.3f} vs {overhead['ray_p99']:.3f} ms); "
            f"CPU per step {overhead['local_cpu']:.3f} ms vs {overhead['ray_cpu']:.3f} ms (driver + actor); "
            f"Ray's floor, a no-op actor call: p50 {overhead['noop_p50']:.3f} ms"
        )
    console.print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
