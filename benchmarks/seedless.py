"""Seedless resets on the claims app: does the world cache hold its byte budget over a long run?

    python benchmarks/seedless.py [--resets 1000] [--cache-bytes 100M] [--strategy rewind]

What a Gymnasium user pays: ``env.reset()`` with no seed, back to back, on
``statekit.make("claims_app", cache_bytes=BUDGET)`` (defaults otherwise: the ``rewind`` strategy, no
world set, so every reset draws a fresh seed from [0, 2**31) and builds a new world). After each
reset one step checks the episode is intact. Printed every 100 resets and at the end: builds,
evictions, the cache's recorded bytes and the goldens measured on disk (golden databases' sizes plus
the upload goldens' blocks), both against the budget, and reset latency (p50/p99). Runs in a fresh
``$STATEKIT_HOME`` with its own embedded PostgreSQL. Exit status 1 if the cache ever exceeds its
budget (recorded or measured) or an episode is broken.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from timing import percentile_ms

REPO = Path(__file__).resolve().parents[1]
STATEKIT = str(Path(sys.executable).with_name("statekit"))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--resets", type=int, default=1000)
    parser.add_argument("--cache-bytes", default="100M", help="the budget (default 100M: about ten worlds)")
    parser.add_argument("--strategy", default="rewind")
    parser.add_argument("--home", default=None, help="STATEKIT_HOME (default: a fresh temporary one)")
    args = parser.parse_args()

    home = Path(args.home or tempfile.mkdtemp(prefix="statekit-seedless-"))
    os.environ["STATEKIT_HOME"] = str(home)
    from soak import Inventory

    import statekit
    from statekit.cache import parse_size

    budget = parse_size(args.cache_bytes)
    load = os.getloadavg()
    print(
        f"seedless: {args.resets} resets of claims_app ({args.strategy}), budget {budget / 2**20:.0f} MiB; "
        f"home {home}; load average before {load[0]:.2f} on {os.cpu_count()} cores"
    )
    inventory = Inventory(home)
    worst_recorded = worst_measured = builds = broken = 0
    latencies: list[float] = []
    started = time.monotonic()
    try:
        with statekit.make("claims_app", cache_bytes=budget, strategy=args.strategy) as env:
            for n in range(1, args.resets + 1):
                t0 = time.perf_counter()
                env.reset()
                latencies.append(time.perf_counter() - t0)
                builds += env.last_reset_cache == "miss"
                obs = env.step({"tool": "list_claims"})[0]
                broken += not (isinstance(obs, dict) and obs.get("status") == 200)
                worst_recorded = max(worst_recorded, env.cache.index.total())
                if n % 100 == 0 or n == args.resets:
                    recorded, measured = inventory.cache_bytes()
                    worst_measured = max(worst_measured, measured)
                    print(
                        f"  {n:5d} resets  {builds:5d} builds  {len(env.cache.evicted):5d} evicted  "
                        f"cache {recorded / 2**20:6.1f} MiB recorded, {measured / 2**20:6.1f} MiB on disk "
                        f"(budget {budget / 2**20:.0f})  reset p50 {percentile_ms(latencies, 0.5):6.1f} ms "
                        f"p99 {percentile_ms(latencies, 0.99):6.1f} ms  {time.monotonic() - started:6.0f} s",
                        flush=True,
                    )
    finally:
        inventory.close()
        if not args.home:  # the embedded PostgreSQL lingers after its last user: stop it before its files go
            subprocess.run([STATEKIT, "stop"], cwd=REPO, capture_output=True, check=False, timeout=120)
            shutil.rmtree(home, ignore_errors=True)
    within = worst_recorded <= budget and worst_measured <= budget
    print(
        f"worst: {worst_recorded / budget:.2f}x the budget recorded, {worst_measured / budget:.2f}x measured "
        f"on disk; broken episodes {broken}; {'within budget' if within else 'OVER BUDGET'}"
    )
    return 0 if within and broken == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
