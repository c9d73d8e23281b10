"""Reset latency: rebuilding the world vs cloning the golden vs taking a pre-warmed copy.

    python benchmarks/reset.py [--resets 50] [--rebuilds 5] [--scales 1,145] [--db-url URL]

The claims world is its database plus its upload directory, reset together by the adapter's own
``template`` strategy (a Composite of PostgresTemplate and CowFilesystem). For each data size it
prints p50/p99 of: *rebuild* (the naive reset: run the app's seed script into an empty world),
*clone* (restore a copy of the cached golden), *pool* (take a copy a background thread already
restored), side by side with ratios. Rebuilds are sampled fewer times because they are slow.
"""

from __future__ import annotations

import argparse
import statistics
import time

from rich.console import Console
from rich.table import Table
from timing import percentile_ms, repeat, restore_latencies

from adapters.claims_app import ClaimsAdapter
from statekit.cache import WorldCache
from statekit.determinism.controls import Controls
from statekit.strategies.base import World
from statekit.strategies.composite import Composite
from statekit.strategies.pg_template import PostgresTemplate
from statekit.strategies.prewarmed import Prewarmed

SEED = 7


def run(scale: int, resets: int, rebuilds: int, db_url: str | None) -> dict[str, list[float]]:
    adapter = ClaimsAdapter(scale=scale)
    strategy = adapter.make_strategy("template", db_url=db_url)
    assert isinstance(strategy, Composite)

    def build(world: World) -> None:
        with Controls(SEED, purpose="build").active():
            adapter.build_world(world, SEED)

    def rebuild() -> None:
        scratch = f"rebuild{time.perf_counter_ns()}"
        strategy.capture(scratch, build)
        strategy.drop(scratch)

    results = {"rebuild": repeat(rebuilds, rebuild)}
    key = WorldCache(adapter, strategy).ensure(SEED)  # the snapshot cache Environment uses
    database = strategy.parts["db"]
    assert isinstance(database, PostgresTemplate)
    with database.server.admin() as conn:
        size = conn.execute("SELECT pg_database_size(%s)", (database.names.golden(key),)).fetchone()
    results["size_mb"] = [int(str(size[0])) / 1e6] if size else [0.0]
    results["clone"] = restore_latencies(strategy, key, resets)
    with Prewarmed(adapter.make_strategy("template", db_url=db_url), depth=2) as pool:
        samples = []
        for _ in range(resets):
            pool.prefetch([key])
            pool.wait_ready(key, timeout=120)  # an episode outlasts a clone, so the pool is full again
            samples.extend(restore_latencies(pool, key, 1))
        results["pool"] = samples
        results["pool_hits"] = [pool.hits / max(1, pool.hits + pool.misses)]
    strategy.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--resets", type=int, default=50)
    parser.add_argument("--rebuilds", type=int, default=5)
    parser.add_argument("--scales", default="1,145", help="fixture scales; 1 is ~9 MB, 145 is ~100 MB")
    parser.add_argument("--db-url", default=None)
    args = parser.parse_args()
    table = Table(
        "world (database size)",
        "rebuild p50 / p99",
        "clone p50 / p99",
        "pool p50 / p99",
        "rebuild ÷ clone",
        "clone ÷ pool",
        "pool hits",
        title=f"claims_app reset latency (ms): {args.resets} clones and pool takes, {args.rebuilds} rebuilds",
    )
    for scale in (int(s) for s in args.scales.split(",")):
        r = run(scale, args.resets, args.rebuilds, args.db_url)
        rebuild, clone, pool = (statistics.median(r[k]) * 1000 for k in ("rebuild", "clone", "pool"))
        table.add_row(
            f"scale {scale}: {r['size_mb'][0]:.0f} MB",
            f"{rebuild:.0f} / {percentile_ms(r['rebuild'], 0.99):.0f}",
            f"{clone:.1f} / {percentile_ms(r['clone'], 0.99):.1f}",
            f"{pool:.3f} / {percentile_ms(r['pool'], 0.99):.3f}",
            f"{rebuild / clone:.0f}x",
            f"{clone / pool:.0f}x",
            f"{r['pool_hits'][0]:.0%}",
        )
    console = Console(width=150)
    console.print(table)
    console.print(
        "clone = database template clone + copy-on-write upload directory. pool: copies of seeds used "
        "recently or announced with env.prefetch(seeds) are restored in the background; a seed never "
        "seen is built once (the rebuild column), then cloned."
    )


if __name__ == "__main__":
    main()
