"""Per task kind, the reward of every exploit probe and known exploit over many seeds (a markdown table).

    .venv/bin/python scripts/probe_rewards.py                       # seeds 0-23, the checker's defaults
    .venv/bin/python scripts/probe_rewards.py --seeds 0-3 --without-collateral   # the defence removed
    .venv/bin/python scripts/probe_rewards.py --as-before --no-probes \
        --kinds deny_duplicate,deny_late_filing,pay_approved    # issue 12's "Why", reproduced
    .venv/bin/python scripts/probe_rewards.py --kinds a,b --out part1.jsonl   # in parallel processes,
    .venv/bin/python scripts/probe_rewards.py --table part1.jsonl part2.jsonl # then one table

Each cell is "mean reward (wins/seeds played)", where a win is a reward above the kind's floor; the
last row counts the seeds whose world poses no task of the kind (none is played there). Rewards are
kept per seed, and ``--table`` merges files by kind, so runs over different seed ranges make one
table. Probes are ``statekit check``'s (``statekit.checks.probes``, step budget 1000; ``--entities``
and ``--walk`` as the checker's ``--probe-entities``/``--probe-walk``); known exploits are the
hand-written ones in ``adapters/claims_app/exploits.py``, played with ``max_steps=1000`` on the kinds
they were written against (``TARGETS``; ``--known-everywhere``: on every kind).
``--without-collateral`` drops every task's expected changes, to show what the collateral check stops;
``--as-before`` also puts back the verifiers and task choice of before issue 12 (any deny reason
passes, ``pay_approved`` posed even with nothing else to pay): the known exploits win again.
"""

from __future__ import annotations

import argparse
import json
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
from statekit.checks.probes import ProbeSettings, check_exploits
from statekit_examples.adapters.claims_app import ClaimsEpisode, tasks
from statekit_examples.adapters.claims_app.exploits import EXPLOITS, TARGETS, play


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


def merge(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One result per kind (in order of first appearance): rewards joined by seed, seeds and seconds
    summed, so parts run over different seeds (or kinds) make one table."""
    merged: dict[str, dict[str, Any]] = {}
    for result in results:
        kind = result["kind"]
        into = merged.setdefault(
            kind,
            {"kind": kind, "floor": result["floor"], "rewards": {}, "seeds": set(), "skipped": set()},
        )
        for policy, by_seed in result["rewards"].items():
            into["rewards"].setdefault(policy, {}).update({int(k): v for k, v in by_seed.items()})
        into["seeds"].update(result["seeds"])
        into["skipped"].update(result["skipped"])
        into["seconds"] = into.get("seconds", 0.0) + result["probe_seconds"]
    return list(merged.values())


def render(results: list[dict[str, Any]], title: str) -> str:
    """The markdown table of per-kind results (``--out`` lines, merged by kind)."""
    merged = merge(results)
    kinds = [r["kind"] for r in merged]
    policies = sorted({p for r in merged for p in r["rewards"]}, key=lambda p: (p.startswith("known"), p))
    lines = [title, "", "| policy | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
    for policy in policies:
        cells = []
        for result in merged:
            rewards = list(result["rewards"].get(policy, {}).values())
            wins = sum(1 for r in rewards if r > result["floor"])
            cells.append(f"{sum(rewards) / len(rewards):.2f} ({wins}/{len(rewards)})" if rewards else "-")
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    lines.append("| seeds posing no such task | " + " | ".join(str(len(r["skipped"])) for r in merged) + " |")
    if any(r["seconds"] for r in merged):
        per_seed = [r["seconds"] / len(r["seeds"]) for r in merged]
        lines.append("| probe seconds per seed | " + " | ".join(f"{x:.1f}" for x in per_seed) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", default="0-23")
    parser.add_argument("--kinds", default=None, help="comma-separated task kinds (default: all)")
    parser.add_argument("--without-collateral", action="store_true")
    parser.add_argument("--as-before", action="store_true", help="the tasks as before issue 12")
    parser.add_argument("--no-probes", action="store_true", help="only the known exploits")
    parser.add_argument("--out", default=None, help="also append each kind's results here (JSON lines)")
    parser.add_argument("--table", nargs="+", default=None, help="only print the table of these --out files")
    parser.add_argument("--entities", type=int, default=ProbeSettings.entities, help="every_entity's cap")
    parser.add_argument("--walk", type=int, default=ProbeSettings.walk_steps, help="random_walk's steps")
    parser.add_argument("--known-everywhere", action="store_true", help="known exploits on every kind")
    parser.add_argument("--db-url", default=None)
    args = parser.parse_args()
    variant = " (as before issue 12)" if args.as_before else " (collateral check removed)"
    settings = ProbeSettings(entities=args.entities, walk_steps=args.walk)
    if args.table:
        results = [json.loads(line) for path in args.table for line in Path(path).read_text().splitlines()]
        print(render(results, results[0]["title"] if results else "no results"))
        return 0
    title = f"seeds {args.seeds}{variant if args.as_before or args.without_collateral else ''}"
    if not args.no_probes:
        title += f"; probes: entities {settings.entities}, walk {settings.walk_steps}"
        title += f", budget {settings.budget}"
    if args.as_before:
        as_before()
    elif args.without_collateral:
        without_collateral()
    seeds = seed_list(args.seeds)
    results: list[dict[str, Any]] = []
    with statekit.make("claims_app", db_url=args.db_url, max_steps=settings.budget) as env:
        kinds = args.kinds.split(",") if args.kinds else env.adapter.task_kinds()
        for kind in kinds:
            started = time.perf_counter()
            rewards: dict[str, dict[int, float]] = {}
            skipped: set[int] = set()
            if not args.no_probes:
                report = check_exploits(env, seeds=seeds, settings=settings, kinds=[kind])
                rewards = report.rewards().get(kind, {})
                for note in report.notes:
                    print(f"note: {note}", file=sys.stderr)
                for run in report.exploits:
                    print(f"EXPLOIT: {run.describe()}", file=sys.stderr)
                probed = {seed for by_seed in rewards.values() for seed in by_seed}
                skipped |= set(seeds) - probed
            probe_seconds = time.perf_counter() - started if not args.no_probes else 0.0
            for name in EXPLOITS:
                if kind not in TARGETS[name] and not args.known_everywhere:
                    continue
                played = rewards.setdefault(f"known: {name}", {})
                for seed in seeds:
                    try:
                        played[seed] = play(env, seed=seed, kind=kind, exploit=name)[0]
                    except statekit.ConfigError as exc:  # this seed's world poses no such task
                        skipped.add(seed)
                        print(f"note: {name} on {kind!r} (seed {seed}): not played: {exc}", file=sys.stderr)
            result = {
                "title": title,
                "kind": kind,
                "floor": float(env.adapter.exploit_floors.get(kind, 0.0)),
                "rewards": rewards,
                "seeds": seeds,
                "skipped": sorted(skipped),
                "probe_seconds": probe_seconds,
            }
            results.append(json.loads(json.dumps(result)))  # as --table reads it back (seed keys as text)
            if args.out:
                with open(args.out, "a") as out:
                    out.write(json.dumps(result) + "\n")
            per_seed = probe_seconds / len(seeds)
            print(f"{kind}: done ({per_seed:.1f} s of probes per seed)", file=sys.stderr, flush=True)
    print(render(results, title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
