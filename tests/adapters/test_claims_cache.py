"""The world cache on the claims world (PostgreSQL + copy-on-write uploads): real sizes, and
eviction that never breaks a running episode or a pool's ready (overlay) copies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import statekit
import statekit.kit
from statekit.postgres import PostgresServer
from statekit.settings import statekit_home

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statekit.cli", "cache", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def test_eviction_spares_live_episodes_and_pools_and_the_cli_reports_it(
    pg_url: str, pg_cluster: PostgresServer
) -> None:
    files = statekit_home() / "files" / "claims_app" / "uploads"
    with statekit.make("claims_app", db_url=pg_url, strategy="template", prewarm=1) as a:
        _, first = a.reset(seed=20)
        golden = pg_cluster.database_size(f"skclaims_g_{a.cache.key(20)}")
        assert golden is not None and golden > 5 * MiB
        [entry] = [e for e in a.cache.entries() if e.seed == 20]
        assert entry.size is not None and entry.size >= golden, "database plus uploads, measured"
        budget = entry.size + entry.size // 2  # room for one world besides whatever is leased
        a.step({"tool": "list_claims", "limit": 1})
        with statekit.make("claims_app", db_url=pg_url, strategy="template", cache_bytes=budget) as b:
            for seed in (21, 22, 24):  # a holder leases its current world and the one before
                b.reset(seed=seed)
            assert b.cache.key(21) in b.cache.evicted, "the least recently used unleased world went"
            assert a.cache.key(20) not in b.cache.evicted, "a live episode's world stays"
            assert a.step({"tool": "list_claims", "limit": 1})[0]["status"] == 200
            assert a.state().step_count == 2

            a.reset(seed=23)
            a.reset(seed=22)  # a's leases moved on; its pool keeps a ready (mounted) copy of seed 20
            pool = a.strategy
            assert isinstance(pool, statekit.kit.Prewarmed) and pool.wait_ready(a.cache.key(20), timeout=120)
            evicted = b.cache.prune(0)
            assert a.cache.key(20) in evicted and not a.strategy.has(a.cache.key(20))
            _, again = a.reset(seed=20)  # rebuilt; the pool hands out the copy made from the old golden
            assert a.state().digest == again["digest"] == first["digest"], "the ready copy was not broken"

            listed = json.loads(_cli("ls", "--json").stdout)
            seeds = {e["seed"]: e for e in listed if e["store"] == a.cache.store}
            assert seeds[20]["leased"] and seeds[20]["bytes"] > 5 * MiB
            pinned = _cli("pin", "claims_app", "23", "--db-url", pg_url)
            assert pinned.returncode == 0, pinned.stderr
            pruned = _cli("prune", "claims_app", "--all", "--db-url", pg_url)
            assert pruned.returncode == 0 and "evicted" in pruned.stdout, pruned.stderr
            usage = json.loads(_cli("du", "--json", "--budget", "1G").stdout)
            store = usage["stores"][a.cache.store]
            assert store["pinned"] == 1 and store["in_use"] >= 1 and usage["budget"] == 1 << 30
            kept = {e.seed for e in a.cache.entries()}
            assert {20, 23} <= kept, "pinned and in-use worlds survive prune --all"
            assert _cli("pin", "claims_app", "23", "--unpin", "--db-url", pg_url).returncode == 0
    assert [n for n in os.listdir(files / "trash")] == [], "dropped goldens are deleted once unmounted"


def test_a_parked_rewind_copy_leases_its_golden(pg_url: str) -> None:
    """The rewind strategy parks used worlds for their seed: their goldens are leased (an overlay copy
    reads its golden; eviction would leave it on disk, uncounted), and rewind and template share one
    store, since they share the goldens."""
    with statekit.make("claims_app", db_url=pg_url) as a:
        a.reset(seed=30)
        a.step({"tool": "list_claims", "limit": 1})
        a.reset(seed=31)
        a.reset(seed=32)  # leases: 32, the world before (31), and the parked copies' seeds
        rewinding = a.strategy
        assert isinstance(rewinding, statekit.kit.Rewinding) and a.cache.key(30) in rewinding.parked_keys()
        with statekit.make("claims_app", db_url=pg_url, strategy="template") as b:
            assert b.cache.store == a.cache.store
            evicted = b.cache.prune(0)
            assert a.cache.key(30) not in evicted and b.strategy.has(a.cache.key(30))
        _, info = a.reset(seed=30)
        assert info["world"] == "rewound"
