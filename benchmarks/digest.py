"""Digest cost as the world grows: time and peak Python memory at ~10 MB and ~100 MB of claims data.

    python benchmarks/digest.py [--scales 1,145] [--runs 5] [--db-url URL]

The digest streams every table through a server-side cursor, so its memory should stay flat while
its time grows with the data. Peak memory is tracemalloc's peak of Python allocations during one
extra digest (psycopg's C buffers are bounded by the cursor's batch size).
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

from rich.console import Console
from rich.table import Table

from adapters.claims_app import ClaimsAdapter
from statekit.cache import WorldCache
from statekit.postgres import ServerLease

SEED = 7


def measure(scale: int, runs: int, lease: ServerLease) -> tuple[float, float, float, int]:
    """(size MB, p50 seconds, peak MiB, rows) for one world size."""
    adapter = ClaimsAdapter(scale=scale)
    strategy = adapter.make_strategy("template", db_url=lease.server.admin_url)
    cache = WorldCache(adapter, strategy)  # the snapshot cache Environment uses
    world = strategy.restore(cache.ensure(SEED))
    try:
        with lease.server.admin() as conn:
            size = conn.execute("SELECT pg_database_size(%s)", (world.handle["db"].id,)).fetchone()
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            digest = adapter.digest(world)
            times.append(time.perf_counter() - t0)
        rows = sum(t.rows for t in digest.tables.values())
        tracemalloc.start()  # a separate run: tracing slows Python down several times
        adapter.digest(world)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    finally:
        strategy.discard(world)
        cache.close()
        strategy.close()
    return (int(str(size[0])) / 1e6 if size else 0.0), statistics.median(times), peak, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scales", default="1,145")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--db-url", default=None)
    args = parser.parse_args()
    lease = ServerLease(args.db_url)
    results = []
    try:
        for scale in (int(s) for s in args.scales.split(",")):
            results.append((scale, *measure(scale, args.runs, lease)))
    finally:
        lease.close()
    table = Table(
        "world", "rows", "digest p50", "rows/s", "peak Python memory", title="claims_app digest cost"
    )
    for scale, size, seconds, peak, rows in results:
        table.add_row(
            f"scale {scale}: {size:.0f} MB",
            f"{rows:,}",
            f"{seconds * 1000:.0f} ms",
            f"{rows / seconds:,.0f}",
            f"{peak:.1f} MiB",
        )
    console = Console(width=150)
    console.print(table)
    if len(results) >= 2:
        (_, s0, t0, m0, r0), (_, s1, t1, m1, r1) = results[0], results[-1]
        growth = f"{s1 / s0:.1f}x the data, {r1 / r0:.1f}x the rows"
        console.print(f"{growth}: {t1 / t0:.1f}x the time, {m1 / m0:.2f}x the peak memory")


if __name__ == "__main__":
    main()
