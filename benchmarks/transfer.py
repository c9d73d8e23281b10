"""Moving an episode: ``env.export_episode()`` and ``env.import_episode(blob)`` on the claims app.

    python benchmarks/transfer.py [--episodes 20] [--steps 20]

What a trainer pays to move a 20-step claims episode to another environment (resume an interrupted
rollout, branch a state, drain a node): export on one environment, import on another (the default
``rewind`` strategy, embedded PostgreSQL, ``max_steps=100`` so 20 steps fit), back to back, beside
what the same episode costs played from ``reset`` (what an import by replay would cost) and a bare
``reset`` (the floor of an import, which resets first and then applies the world's changes). The
episode is ``list_claims`` reads, then the reference solution's steps. Prints p50/p90, each against
the replay, and how the imports were served.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter

from timing import percentile_ms

import statekit


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    samples: dict[str, list[float]] = {"reset": [], "reset + steps": [], "export": [], "import": []}
    size = 0
    served: Counter[str] = Counter()
    with (
        statekit.make("claims_app", max_steps=100) as env,
        statekit.make("claims_app", max_steps=100) as other,
    ):
        env.reset(seed=7)
        reference = env.adapter.reference_actions(env.task)
        reads = [{"tool": "list_claims", "limit": 3}] * max(0, args.steps - len(reference))
        script = [*reads, *reference][: args.steps]
        other.reset(seed=7)  # both worlds built and warm before timing
        for _ in range(args.episodes):
            t0 = time.perf_counter()
            env.reset(seed=7)
            samples["reset"].append(time.perf_counter() - t0)
            for action in script:
                env.step(action)
            samples["reset + steps"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            blob = env.export_episode()
            samples["export"].append(time.perf_counter() - t0)
            size = len(blob)
            t0 = time.perf_counter()
            _, info = other.import_episode(blob)
            samples["import"].append(time.perf_counter() - t0)
            served[str(info["imported"])] += 1
            assert other.state().digest == env.state().digest
    print(
        f"transfer: claims_app (default strategy rewind), {len(script)}-step episodes x {args.episodes}, "
        f"blob {size} bytes; load average before {load:.2f} on {os.cpu_count()} cores; imports served by "
        f"{dict(served)}"
    )
    floor = percentile_ms(samples["reset + steps"], 0.5)
    for name, values in samples.items():
        p50, p90 = percentile_ms(values, 0.5), percentile_ms(values, 0.9)
        print(f"  {name:<14} p50 {p50:8.2f} ms  p90 {p90:8.2f} ms  {p50 / floor:5.2f}x replay")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
