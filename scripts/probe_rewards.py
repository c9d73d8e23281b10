"""Per task kind, the reward of every exploit probe and known exploit over many seeds (a markdown table).

    .venv/bin/python scripts/probe_rewards.py                       # seeds 0-23, the checker's defaults
    .venv/bin/python scripts/probe_rewards.py --seeds 0-3 --without-collateral   # the defence removed

Each cell is "mean reward (wins/seeds)", where a win is a reward above the kind's floor. Probes are
``statekit check``'s (``statekit.testing.probes``, default settings, step budget 1000); known exploits
are the hand-written ones in ``adapters/claims_app/exploits.py``, played with ``max_steps=1000``.
``--without-collateral`` drops every task's expected changes, to show what the collateral check stops.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import statekit
from adapters.claims_app import ClaimsEpisode
from adapters.claims_app.exploits import EXPLOITS, play
from statekit.testing.probes import ProbeSettings, check_exploits


def seed_list(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", default="0-23")
    parser.add_argument("--kinds", default=None, help="comma-separated task kinds (default: all)")
    parser.add_argument("--without-collateral", action="store_true")
    parser.add_argument("--db-url", default=None)
    args = parser.parse_args()
    if args.without_collateral:
        ClaimsEpisode.expected_changes = lambda self: None  # type: ignore[method-assign,assignment,return-value]
    seeds = seed_list(args.seeds)
    settings = ProbeSettings()
    table: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, float] = {}
    with statekit.make("claims_app", db_url=args.db_url, max_steps=settings.budget) as env:
        kinds = args.kinds.split(",") if args.kinds else env.adapter.task_kinds()
        for kind in kinds:
            started = time.perf_counter()
            report = check_exploits(env, seeds=seeds, settings=settings, kinds=[kind])
            seconds[kind] = (time.perf_counter() - started) / len(seeds)
            table[kind] = report.rewards().get(kind, {})
            for note in report.notes:
                print(f"note: {note}", file=sys.stderr)
            for run in report.exploits:
                print(f"EXPLOIT: {run.describe()}", file=sys.stderr)
            for name in EXPLOITS:
                rewards = table[kind].setdefault(f"known: {name}", [])
                for seed in seeds:
                    rewards.append(play(env, seed=seed, kind=kind, exploit=name)[0])
            print(f"{kind}: done ({seconds[kind]:.1f} s of probes per seed)", file=sys.stderr, flush=True)
    policies = sorted({p for rows in table.values() for p in rows}, key=lambda p: (p.startswith("known"), p))
    print(f"seeds {args.seeds}{' (collateral check removed)' if args.without_collateral else ''}\n")
    print("| policy | " + " | ".join(kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    for policy in policies:
        cells = []
        for kind in kinds:
            rewards = table[kind].get(policy, [])
            wins = sum(1 for r in rewards if r > 0)
            cells.append(f"{sum(rewards) / len(rewards):.2f} ({wins}/{len(rewards)})" if rewards else "-")
        print(f"| {policy} | " + " | ".join(cells) + " |")
    print("| probe seconds per seed | " + " | ".join(f"{seconds[k]:.1f}" for k in kinds) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
