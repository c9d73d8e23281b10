"""Digest cost as the world grows: ``env.state()`` after 10 steps (the digest updated from the journal)
against a full recompute from every row, with the full digest's peak Python memory.

    python benchmarks/digest.py [--scales 1,145,1450] [--runs 5] [--db-url URL]

Each run resets the claims world (default strategy, seed 7), plays 10 steps (reads, then the task's
writes, padded with reads), and times ``env.state()`` as a trainer calls it, then
``env.digest_report(full=True)`` (every row read and hashed again) on the same world; both must be
equal. Peak memory is tracemalloc's peak of Python allocations during one extra full digest.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc

from rich.console import Console
from rich.table import Table

import statekit
from statekit.postgres.journal import Journal

SEED = 7
STEPS = 10


def ten_steps(env: statekit.Environment) -> None:
    script = env.adapter.reference_actions(env.task)[:-1]  # its writes, not its submit
    reads = [{"tool": "list_claims", "limit": 5}] * (STEPS - len(script))
    for action in [*reads, *script]:
        env.step(action)


def measure(scale: int, runs: int, db_url: str | None) -> dict[str, float]:
    with statekit.make("claims_app", scale=scale, db_url=db_url) as env:
        env.reset(seed=SEED)
        journal = env.world.handle["db"].handle
        assert isinstance(journal, Journal)
        row = journal.connection().execute("SELECT pg_database_size(current_database())").fetchone()
        size = int(row[0]) / 1e6 if row else 0.0
        updated, full = [], []
        for _ in range(runs):
            env.reset(seed=SEED)
            ten_steps(env)
            t0 = time.perf_counter()
            state = env.state()
            updated.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            report = env.digest_report(full=True)
            full.append(time.perf_counter() - t0)
            assert report.digest == state.digest, "the updated digest must equal the full one"
        rows = sum(t.rows for t in report.tables.values())
        tracemalloc.start()  # a separate run: tracing slows Python down several times
        env.digest_report(full=True)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return {
        "size": size,
        "rows": rows,
        "updated": statistics.median(updated),
        "full": statistics.median(full),
        "peak": peak,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scales", default="1,145,1450")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--db-url", default=None)
    args = parser.parse_args()
    results = [
        (scale, measure(scale, args.runs, args.db_url)) for scale in (int(s) for s in args.scales.split(","))
    ]
    table = Table(
        "world",
        "rows",
        "state() after 10 steps p50",
        "full digest p50",
        "full ÷ state()",
        "full: rows/s",
        "full: peak Python memory",
        title=f"claims_app digest cost (load average {os.getloadavg()[0]:.2f})",
    )
    for scale, r in results:
        table.add_row(
            f"scale {scale}: {r['size']:.0f} MB",
            f"{r['rows']:,.0f}",
            f"{r['updated'] * 1000:.2f} ms",
            f"{r['full'] * 1000:.0f} ms",
            f"{r['full'] / r['updated']:.0f}x",
            f"{r['rows'] / r['full']:,.0f}",
            f"{r['peak']:.1f} MiB",
        )
    console = Console(width=150)
    console.print(table)
    if len(results) >= 2:
        (_, a), (_, b) = results[0], results[-1]
        console.print(
            f"{b['size'] / a['size']:.0f}x the data: state() {b['updated'] / a['updated']:.1f}x the time, "
            f"a full digest {b['full'] / a['full']:.0f}x"
        )


if __name__ == "__main__":
    main()
