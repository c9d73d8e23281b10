"""Reset latency: rebuilding the world vs cloning a template vs taking a pre-warmed copy.

    python benchmarks/reset.py [--resets 50] [--rebuilds 5] [--scales 1,10] [--db-url URL]

Prints p50/p99 per method at each data size, side by side, with ratios. Rebuilding is the naive
"reinstall and replay the seed script" reset; it is sampled fewer times because it is slow.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from adapters.claims_app import ClaimsAdapter
from statekit.determinism.controls import Controls
from statekit.env import world_key
from statekit.postgres import ServerLease
from statekit.strategies.base import World
from statekit.strategies.pg_template import PostgresTemplate
from statekit.strategies.prewarmed import Prewarmed

SEED = 7


def _time(n: int, one: Callable[[], None]) -> list[float]:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        one()
        samples.append(time.perf_counter() - t0)
    return samples


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def run(scale: int, resets: int, rebuilds: int, lease: ServerLease) -> dict[str, list[float]]:
    adapter = ClaimsAdapter(scale=scale)
    server = lease.server
    strategy = PostgresTemplate(server, prefix="skbench")
    key = world_key(adapter.fingerprint(), SEED)

    def build(world: World) -> None:
        with Controls(SEED, purpose="build").active():
            adapter.build_world(world, SEED)

    def rebuild() -> None:
        name = "skbench_rebuild"
        server.drop_database(name)
        build(World(id=name, location=server.create_database(name)))

    results = {"rebuild": _time(rebuilds, rebuild)}
    server.drop_database("skbench_rebuild")
    strategy.capture(key, build)
    with server.admin() as conn:
        size = conn.execute("SELECT pg_database_size(%s)", (strategy.names.golden(key),)).fetchone()
    results["size_mb"] = [int(str(size[0])) / 1e6] if size else [0.0]

    def clone() -> None:
        strategy.discard(strategy.restore(key))

    results["clone"] = _time(resets, clone)
    pool = Prewarmed(PostgresTemplate(server, prefix="skbench"), depth=2)
    pool.prefetch([key])

    def take() -> None:
        pool.wait_ready(key, timeout=60)  # an episode outlasts one clone, so the pool is full again
        t0 = time.perf_counter()
        world = pool.restore(key)
        take.samples.append(time.perf_counter() - t0)  # type: ignore[attr-defined]
        pool.discard(world)

    take.samples = []  # type: ignore[attr-defined]
    for _ in range(resets):
        take()
    results["pool"] = take.samples  # type: ignore[attr-defined]
    results["pool_hits"] = [pool.hits / max(1, pool.hits + pool.misses)]
    pool.close()
    strategy.drop(key)
    adapter.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resets", type=int, default=50)
    parser.add_argument("--rebuilds", type=int, default=5)
    parser.add_argument("--scales", default="1,11")
    parser.add_argument("--db-url", default=None)
    args = parser.parse_args()
    lease = ServerLease(args.db_url)
    table = Table(
        "world",
        "rebuild p50 / p99",
        "clone p50 / p99",
        "pool p50 / p99",
        "rebuild ÷ clone",
        "clone ÷ pool",
        "pool hits",
        title=f"claims_app reset latency (ms): {args.resets} clones and pool takes, {args.rebuilds} rebuilds",
    )
    try:
        for scale in (int(s) for s in args.scales.split(",")):
            r = run(scale, args.resets, args.rebuilds, lease)
            rebuild, clone, pool = (statistics.median(r[k]) * 1000 for k in ("rebuild", "clone", "pool"))
            table.add_row(
                f"scale {scale}: {r['size_mb'][0]:.0f} MB",
                f"{rebuild:.0f} / {_p(r['rebuild'], 0.99):.0f}",
                f"{clone:.1f} / {_p(r['clone'], 0.99):.1f}",
                f"{pool:.2f} / {_p(r['pool'], 0.99):.2f}",
                f"{rebuild / clone:.0f}x",
                f"{clone / pool:.0f}x",
                f"{r['pool_hits'][0]:.0%}",
            )
    finally:
        lease.close()
    console = Console(width=150)
    console.print(table)
    console.print(
        "pool: copies of the seeds a trainer used recently or announced with env.prefetch(seeds) are cloned "
        "in the background; a seed never seen is built once (rebuild column), then cloned."
    )


if __name__ == "__main__":
    main()
