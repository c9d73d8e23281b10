"""Reset latency as a trainer pays it: ``env.reset`` end to end, back to back, episodes of a few steps.

    python benchmarks/reset.py [--episodes 60] [--turns 150] [--scales 1,145,1450] [--no-wide] [--no-kit]
                               [--no-django] [--db-url URL]

Every column but the first and the last two times ``env.reset`` from ``statekit.make`` exactly as a
trainer calls it: reset, play the task's reference script (two to four steps that write), reset
again, with no pause in between (a pool gets no idle time to refill). Episodes alternate between two
seeds. Per world (claims at ~10 MB, ~100 MB and ~1 GB, a wide world of 100 small tables, a helpdesk
web app wrapped with the public kit as a user would, ``benchmarks/helpdesk.py``, and a Django CMS from
PyPI, ``adapters/wagtail_site``, whose migrations are its schema stage):

- rebuild: the naive reset, the application's seed script into an empty world (what a seed's first
  reset pays once, before its golden exists); for an adapter with a schema stage (``SchemaStage``),
  also a later seed's build on a copy of the stage's golden (what every seed after the first pays);
- clone: ``strategy="template"``, a template clone of the database plus a copy-on-write directory;
- pool: ``strategy="template", prewarm=2``, sustained, with its hit rate;
- rewind: the default (``strategy="rewind"``): the used world is rewound in place from its journal;
- rewind (strategy): the strategy's part of a rewind reset alone (undo the journal, hand back);
- ROLLBACK floor: the same row changes applied in a transaction, then rolled back: the cost of
  undoing them that no reset can beat;
- fork: ``env.snapshot()`` then ``env.restore()`` mid-episode.

Then every world's ratio to claims' (scale 1) comes from one more loop, side by side: the worlds'
environments open together, one episode of each in turn, so both sides of a ratio see the same machine
(load, caches, the server's state). Measured one world after another, minutes apart, the ratio swung
with the machine (1.45 to 2.46 for Wagtail over two runs on the same clone); in turn it settles. A
world's reset costs more in turn than alone (its caches are no longer warm from its own last reset),
so these figures are not the table's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from helpdesk import HelpdeskAdapter
from rich.console import Console
from rich.table import Table
from timing import percentile_ms, repeat
from wide_world import WideWorld

import statekit
import statekit.kit
from statekit.builds import build_golden
from statekit.determinism.controls import Controls
from statekit.postgres.journal import Journal
from statekit.postgres.journal_paths import multirange
from statekit.strategies.base import World
from statekit_examples.adapters.claims_app import ClaimsAdapter
from statekit_examples.adapters.wagtail_site import WagtailAdapter

SEEDS = (7, 8)


def _play(env: statekit.Environment, seed: int) -> None:
    """The episode a trainer would play between two resets: the task's reference script."""
    for action in env.adapter.reference_actions(env.task):
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return


def reset_latencies(make: Callable[[], statekit.Environment], episodes: int) -> tuple[list[float], Any]:
    """``env.reset`` times over back-to-back episodes (the first reset of each seed is warm-up)."""
    with make() as env:
        for seed in SEEDS:
            env.reset(seed=seed)
            _play(env, seed)
        samples = []
        for i in range(episodes):
            seed = SEEDS[i % len(SEEDS)]
            t0 = time.perf_counter()
            env.reset(seed=seed)
            samples.append(time.perf_counter() - t0)
            _play(env, seed)
        return samples, env.strategy


def side_by_side(
    makes: dict[str, Callable[[], statekit.Environment]], episodes: int
) -> dict[str, list[float]]:
    """``env.reset`` times of several worlds measured in turn: each round resets every world once (and
    plays its episode), so every world's samples are taken across the same stretch of the machine."""
    with contextlib.ExitStack() as stack:
        envs = {name: stack.enter_context(make()) for name, make in makes.items()}
        for env in envs.values():
            for seed in SEEDS:
                env.reset(seed=seed)
                _play(env, seed)
        samples: dict[str, list[float]] = {name: [] for name in envs}
        for i in range(episodes):
            seed = SEEDS[i % len(SEEDS)]
            for name, env in envs.items():
                t0 = time.perf_counter()
                env.reset(seed=seed)
                samples[name].append(time.perf_counter() - t0)
                _play(env, seed)
        return samples


def rewind_parts(make: Callable[[], statekit.Environment], episodes: int) -> dict[str, list[float]]:
    """The strategy's share of a rewind reset, the ROLLBACK floor of the same changes, forks."""
    out: dict[str, list[float]] = {"strategy": [], "rollback": [], "changes": [], "fork": []}
    with make() as env:
        strategy = env.strategy
        discard, restore = strategy.discard, strategy.restore
        spent = [0.0]

        def timed_discard(world: World) -> None:
            t0 = time.perf_counter()
            discard(world)
            spent[0] += time.perf_counter() - t0

        def timed_restore(key: str) -> World:
            t0 = time.perf_counter()
            world = restore(key)
            spent[0] += time.perf_counter() - t0
            return world

        strategy.discard, strategy.restore = timed_discard, timed_restore  # type: ignore[method-assign]
        for seed in SEEDS:
            env.reset(seed=seed)
            _play(env, seed)
        for i in range(episodes):
            seed = SEEDS[i % len(SEEDS)]
            spent[0] = 0.0
            env.reset(seed=seed)
            out["strategy"].append(spent[0])
            script = env.adapter.reference_actions(env.task)
            for action in script[:-1]:
                env.step(action)
            t0 = time.perf_counter()
            env.restore(env.snapshot())
            out["fork"].append(time.perf_counter() - t0)
            # the floor: the same changes, in one transaction, rolled back
            journal = (
                env.world.handle["db"].handle if isinstance(env.world.handle, dict) else env.world.handle
            )
            assert isinstance(journal, Journal)
            path = journal.cut().path
            mark = strategy.mark(env.world)  # keeps the journal entries through the next rewind
            env.reset(seed=seed)
            journal.dirty()  # waits for a sampled check still running (the move below would end it)
            conn = journal.connection()
            conn.execute("BEGIN")
            moved = conn.execute(
                "SELECT _statekit.move(%s::int8multirange, '{}'::int8multirange, '{}'::jsonb, false, "
                "%s, %s, false)",
                (multirange(path), journal.role, journal.outside),
            ).fetchone()
            t0 = time.perf_counter()
            conn.execute("ROLLBACK")
            out["rollback"].append(time.perf_counter() - t0)
            out["changes"].append(float(moved[0]) if moved else 0.0)
            strategy.forget(mark)
    return out


def rebuilds(adapter: statekit.kit.Adapter, n: int, db_url: str | None) -> tuple[list[float], list[float]]:
    """The naive reset: build the seed's world from nothing (into a scratch key, then dropped); and for
    an adapter with a schema stage, a later seed's build: a copy of the schema stage's golden plus the
    seed's data, captured (what ``statekit.builds`` does once the stage exists)."""
    strategy = adapter.make_strategy("rewind", db_url=db_url)  # the default: a stage's copy is parked
    staged = isinstance(adapter, statekit.kit.SchemaStage)

    def build(world: World) -> None:
        with Controls(SEEDS[0], purpose="build").active():
            if staged:
                adapter.build_schema(world)
            adapter.build_world(world, SEEDS[0])

    def once() -> None:
        scratch = f"rebuild{time.perf_counter_ns()}"
        strategy.capture(scratch, build)
        strategy.drop(scratch)

    def on_the_stage() -> None:  # the build a cache miss runs (statekit.builds), the stage built
        scratch = f"rebuild{time.perf_counter_ns()}"
        build_golden(adapter, strategy, SEEDS[0], scratch, schema_key="schema", egress=None)
        strategy.drop(scratch)

    try:
        naive = repeat(n, once)
        if not staged:
            return naive, []
        on_the_stage()  # the first builds the stage's golden too: not timed
        try:
            return naive, repeat(n, on_the_stage)
        finally:
            strategy.drop("schema")
    finally:
        strategy.close()


def world_size_mb(make: Callable[[], statekit.Environment]) -> float:
    with make() as env:
        env.reset(seed=SEEDS[0])
        journal = env.world.handle["db"].handle
        assert isinstance(journal, Journal)
        row = journal.connection().execute("SELECT pg_database_size(current_database())").fetchone()
        return int(row[0]) / 1e6 if row else 0.0


def measure(
    name: str, adapter: Callable[[], Any], episodes: int, rebuild_runs: int, db_url: str | None
) -> dict:
    def make(**options: Any) -> Callable[[], statekit.Environment]:
        return lambda: statekit.make(adapter(), db_url=db_url, **options)

    row: dict[str, Any] = {"name": name}
    row["rewind"], stats = reset_latencies(make(), episodes)  # builds the goldens first
    row["size"] = world_size_mb(make())
    row["stats"] = stats.stats.as_dict()
    row["rebuild"], row["staged"] = rebuilds(adapter(), rebuild_runs, db_url)
    row["clone"], _ = reset_latencies(make(strategy="template"), max(10, episodes // 3))
    row["pool"], pool = reset_latencies(make(strategy="template", prewarm=2), max(10, episodes // 3))
    row["pool_hits"] = pool.hits / max(1, pool.hits + pool.misses)
    row.update(rewind_parts(make(), max(10, episodes // 3)))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--rebuilds", type=int, default=2)
    parser.add_argument(
        "--turns", type=int, default=150, help="rounds of the side-by-side loop (one reset of each world)"
    )
    parser.add_argument(
        "--scales", default="1,145,1450", help="claims fixture scales: ~10 MB, ~100 MB, ~1 GB"
    )
    parser.add_argument("--no-wide", action="store_true", help="skip the wide world of 100 small tables")
    parser.add_argument(
        "--no-kit", action="store_true", help="skip the helpdesk (a kit adapter over a FastAPI app)"
    )
    parser.add_argument("--no-django", action="store_true", help="skip the Wagtail site (a Django CMS)")
    parser.add_argument("--db-url", default=None)
    args = parser.parse_args()
    rows = []
    others: dict[str, Callable[[], Any]] = {}
    for scale in (int(s) for s in args.scales.split(",")):
        rebuild_runs = args.rebuilds if scale < 1000 else 1
        rows.append(
            measure(
                f"claims scale {scale}",
                lambda s=scale: ClaimsAdapter(scale=s),
                args.episodes,
                rebuild_runs,
                args.db_url,
            )
        )
    if not args.no_wide:
        others["wide: 100 tables"] = WideWorld
    if not args.no_kit:
        others["helpdesk: kit, web app"] = HelpdeskAdapter
    if not args.no_django:
        others["wagtail: Django CMS"] = WagtailAdapter
    for name, adapter in others.items():
        rows.append(measure(name, adapter, args.episodes, args.rebuilds, args.db_url))
    smallest = min(int(s) for s in args.scales.split(","))
    reference = f"claims scale {smallest}"
    in_turn = side_by_side(
        {
            name: (lambda a=adapter: statekit.make(a(), db_url=args.db_url))
            for name, adapter in {reference: lambda: ClaimsAdapter(scale=smallest), **others}.items()
        },
        args.turns,
    )

    def p(samples: list[float], q: float = 0.5) -> float:
        return percentile_ms(samples, q)

    table = Table(
        "world",
        "rebuild (/ on the schema stage)",
        "clone p50/p99",
        "pool p50/p99 (hits)",
        "rewind p50/p99",
        "rewind (strategy)",
        "ROLLBACK floor",
        "clone ÷ rewind",
        "strategy ÷ ROLLBACK",
        "fork+restore",
        title=f"env.reset, back to back, ms (load average {os.getloadavg()[0]:.2f})",
    )
    for r in rows:
        table.add_row(
            f"{r['name']} ({r['size']:.0f} MB), {statistics.median(r['changes']):.0f} row changes",
            f"{p(r['rebuild']):.0f}" + (f" / {p(r['staged']):.0f}" if r["staged"] else ""),
            f"{p(r['clone']):.1f} / {p(r['clone'], 0.99):.1f}",
            f"{p(r['pool']):.1f} / {p(r['pool'], 0.99):.1f} ({r['pool_hits']:.0%})",
            f"{p(r['rewind']):.2f} / {p(r['rewind'], 0.99):.2f}",
            f"{p(r['strategy']):.2f}",
            f"{p(r['rollback']):.2f}",
            f"{p(r['clone']) / p(r['rewind']):.0f}x",
            f"{p(r['strategy']) / p(r['rollback']):.1f}x",
            f"{p(r['fork']):.2f}",
        )
    console = Console(width=200)
    console.print(table)
    claims = [r for r in rows if r["name"].startswith("claims")]
    if len(claims) >= 2:
        ratio = p(claims[-1]["rewind"]) / p(claims[0]["rewind"])
        console.print(
            f"rewind p50, largest ÷ smallest claims world: {ratio:.2f}"
            f" ({claims[-1]['size']:.0f} MB vs {claims[0]['size']:.0f} MB)"
        )
    base = p(in_turn[reference])
    console.print(
        f"side by side ({args.turns} rounds, one reset of each world in turn), "
        f"rewind p50 / p99 ms and ÷ {reference}:"
    )
    for name, samples in in_turn.items():
        console.print(f"  {name}: {p(samples):.2f} / {p(samples, 0.99):.2f}, {p(samples) / base:.2f}x")
    for r in rows:
        if r["staged"]:
            console.print(
                f"{r['name']}: its build on the schema stage ÷ from nothing: "
                f"{p(r['staged']) / p(r['rebuild']):.2f}"
            )
    for r in rows:
        if r["stats"]["fallbacks"]:
            console.print(f"{r['name']}: rewinds that fell back to a clone: {r['stats']['fallbacks']}")
    console.print(
        'Default strategy: rewind (statekit.make("claims_app")). rebuild = a new seed\'s first reset; '
        "ROLLBACK floor = the same changes rolled back in one transaction."
    )


if __name__ == "__main__":
    main()
