"""Per task kind, the reward of every exploit probe and known exploit over many seeds (a markdown table).

    .venv/bin/python scripts/probe_rewards.py                       # seeds 0-23, the checker's defaults
    .venv/bin/python scripts/probe_rewards.py --seeds 0-3 --without-collateral   # the defence removed
    .venv/bin/python scripts/probe_rewards.py --as-before --no-probes \
        --kinds deny_duplicate,deny_late_filing,pay_approved    # issue 12's "Why", reproduced

Each cell is "mean reward (wins/seeds)", where a win is a reward above the kind's floor. Probes are
``statekit check``'s (``statekit.testing.probes``, default settings, step budget 1000); known exploits
are the hand-written ones in ``adapters/claims_app/exploits.py``, played with ``max_steps=1000``.
``--without-collateral`` drops every task's expected changes, to show what the collateral check stops;
``--as-before`` also puts back the verifiers and task choice of before issue 12 (any deny reason
passes, ``pay_approved`` posed even with nothing else to pay): the known exploits win again.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import select
from sqlalchemy.orm import Session

import statekit
from adapters.claims_app import ClaimsEpisode, tasks
from adapters.claims_app.exploits import EXPLOITS, play
from statekit.testing.probes import ProbeSettings, check_exploits


def seed_list(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def without_collateral() -> None:
    ClaimsEpisode.expected_changes = lambda self: None  # type: ignore[method-assign,assignment,return-value]


def as_before() -> None:
    """The claims tasks as they were before issue 12 (commit 27abaed): no expected changes, a denial
    passes with any reason, and ``pay_approved`` is posed whenever one approved claim is unpaid."""
    without_collateral()

    def denied(session: Session, facts: dict[str, Any]) -> float:
        claim = tasks._claim(session, facts["reference"])
        return 1.0 if claim.status == "denied" and (claim.decision_reason or "").strip() else 0.0

    def deny_duplicate(session: Session, facts: dict[str, Any]) -> float:
        original = tasks._claim(session, facts["original"])
        return denied(session, facts) if original.status == facts["original_status"] else 0.0

    def find_pay_approved(session: Session, rng: random.Random) -> dict[str, Any] | None:
        paid = set(session.scalars(select(tasks.Payment.claim_id)))
        pool = [
            c.reference for c, _ in tasks._open_claims(session) if c.status == "approved" and c.id not in paid
        ]
        if not pool:
            return None
        ref = rng.choice(pool)
        return {"reference": ref, "prompt": f"Claim {ref} was approved but has not been paid. Get it paid."}

    kinds = tasks.KINDS
    kinds["deny_late_filing"] = replace(kinds["deny_late_filing"], verify=denied)
    kinds["deny_duplicate"] = replace(kinds["deny_duplicate"], verify=deny_duplicate)
    kinds["pay_approved"] = replace(kinds["pay_approved"], find=find_pay_approved)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", default="0-23")
    parser.add_argument("--kinds", default=None, help="comma-separated task kinds (default: all)")
    parser.add_argument("--without-collateral", action="store_true")
    parser.add_argument("--as-before", action="store_true", help="the tasks as before issue 12")
    parser.add_argument("--no-probes", action="store_true", help="only the known exploits")
    parser.add_argument("--db-url", default=None)
    args = parser.parse_args()
    if args.as_before:
        as_before()
    elif args.without_collateral:
        without_collateral()
    seeds = seed_list(args.seeds)
    settings = ProbeSettings()
    table: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, float] = {}
    with statekit.make("claims_app", db_url=args.db_url, max_steps=settings.budget) as env:
        kinds = args.kinds.split(",") if args.kinds else env.adapter.task_kinds()
        for kind in kinds:
            started = time.perf_counter()
            table[kind] = {}
            if not args.no_probes:
                report = check_exploits(env, seeds=seeds, settings=settings, kinds=[kind])
                table[kind] = report.rewards().get(kind, {})
                for note in report.notes:
                    print(f"note: {note}", file=sys.stderr)
                for run in report.exploits:
                    print(f"EXPLOIT: {run.describe()}", file=sys.stderr)
            seconds[kind] = (time.perf_counter() - started) / len(seeds)
            for name in EXPLOITS:
                rewards = table[kind].setdefault(f"known: {name}", [])
                for seed in seeds:
                    rewards.append(play(env, seed=seed, kind=kind, exploit=name)[0])
            print(f"{kind}: done ({seconds[kind]:.1f} s of probes per seed)", file=sys.stderr, flush=True)
    policies = sorted({p for rows in table.values() for p in rows}, key=lambda p: (p.startswith("known"), p))
    variant = " (as before issue 12)" if args.as_before else " (collateral check removed)"
    print(f"seeds {args.seeds}{variant if args.as_before or args.without_collateral else ''}\n")
    print("| policy | " + " | ".join(kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    for policy in policies:
        cells = []
        for kind in kinds:
            rewards = table[kind].get(policy, [])
            wins = sum(1 for r in rewards if r > 0)
            cells.append(f"{sum(rewards) / len(rewards):.2f} ({wins}/{len(rewards)})" if rewards else "-")
        print(f"| {policy} | " + " | ".join(cells) + " |")
    if not args.no_probes:
        print("| probe seconds per seed | " + " | ".join(f"{seconds[k]:.1f}" for k in kinds) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
