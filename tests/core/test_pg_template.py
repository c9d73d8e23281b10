"""PostgresTemplate specifics: quoting, orphan sweeping, the cache surviving a new process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from statekit.postgres import PostgresServer
from statekit.strategies.naming import HOST_TAG, CopyNamer, Owner, check_key, snapshot_key
from statekit.strategies.pg_template import PostgresTemplate
from statekit.strategies.prewarmed import Prewarmed
from tests.core.test_strategy_contract import PG_PROBE, _sql


def _dead_owner() -> Owner:
    """The owner of a process that has exited and been reaped."""
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    return Owner(HOST_TAG, int(dead.stdout), 1)


def test_orphans_of_a_dead_process_are_dropped_at_start(pg_cluster: PostgresServer) -> None:
    theirs = CopyNamer("sko", owner=_dead_owner())
    orphan_ep, orphan_build = theirs.episode(), theirs.building("abc")
    mine = CopyNamer("sko").episode()
    for name in (orphan_ep, orphan_build, mine):
        pg_cluster.create_database(name)
    strategy = PostgresTemplate(pg_cluster, prefix="sko")
    assert sorted(strategy.swept) == sorted([orphan_ep, orphan_build])
    assert pg_cluster.databases("sko_") == [mine]
    pg_cluster.drop_database(mine)


def test_golden_survives_a_new_strategy_instance(pg_cluster: PostgresServer) -> None:
    first = PostgresTemplate(pg_cluster, prefix="sks")
    first.capture("cache1", PG_PROBE.build)
    first.close()
    second = PostgresTemplate(pg_cluster, prefix="sks")
    assert second.has("cache1")
    world = second.restore("cache1")
    assert PG_PROBE.read(world) == [(1,), (2,)]
    second.discard(world)
    second.drop("cache1")


def test_a_crash_mid_build_leaves_no_database(pg_cluster: PostgresServer) -> None:
    """A process killed while building a golden leaves a build database; the next start drops it."""
    code = (
        "import os, signal\n"
        "from statekit.postgres import PostgresServer\n"
        "from statekit.strategies.pg_template import PostgresTemplate\n"
        f"s = PostgresTemplate(PostgresServer({pg_cluster.admin_url!r}), prefix='skk')\n"
        "s.capture('crash1', lambda w: os.kill(os.getpid(), signal.SIGKILL))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == -9
    assert len(pg_cluster.databases("skk_b_")) == 1
    PostgresTemplate(pg_cluster, prefix="skk")
    assert pg_cluster.databases("skk_") == []


def test_identifiers_are_quoted(pg_cluster: PostgresServer) -> None:
    name = 'we"ird; DROP DATABASE postgres; --'
    pg_cluster.create_database(name)
    assert pg_cluster.exists(name)
    pg_cluster.drop_database(name)
    assert not pg_cluster.exists(name)
    assert pg_cluster.exists("postgres")


def test_keys_must_be_safe() -> None:
    with pytest.raises(ValueError, match="invalid world key"):
        check_key("../etc")


def test_pool_serves_from_ready_copies(pg_cluster: PostgresServer) -> None:
    pool = Prewarmed(PostgresTemplate(pg_cluster, prefix="skw"), depth=2)
    pool.capture("pool1", PG_PROBE.build)
    pool.prefetch(["pool1"])
    assert pool.wait_ready("pool1")
    world = pool.restore("pool1")
    assert (pool.hits, pool.misses) == (1, 0)
    assert PG_PROBE.read(world) == [(1,), (2,)]
    pool.discard(world)
    pool.drop("pool1")
    pool.close()
    assert pg_cluster.databases("skw_") == []


def test_snapshot_goldens_of_a_dead_process_are_swept(pg_cluster: PostgresServer) -> None:
    """Unlike the world cache's goldens, a fork's golden belongs to its process."""
    mine = snapshot_key("abc123")
    theirs = snapshot_key("abc123", owner=_dead_owner())
    cached = "cachekey1"
    for key in (mine, theirs, cached):
        pg_cluster.create_database(f"sksn_g_{key}")
    strategy = PostgresTemplate(pg_cluster, prefix="sksn")
    assert strategy.swept == [f"sksn_g_{theirs}"]
    assert sorted(pg_cluster.databases("sksn_")) == sorted([f"sksn_g_{mine}", f"sksn_g_{cached}"])
    for key in (mine, cached):
        strategy.drop(key)


def test_a_golden_is_published_vacuumed_so_its_recorded_size_holds(pg_cluster: PostgresServer) -> None:
    """Autovacuum must find nothing to do in a golden: its visibility and free-space maps (a few
    pages per table and index) would grow it past the size the cache recorded."""
    strategy = PostgresTemplate(pg_cluster, prefix="skv")
    tables = "".join(
        f"CREATE TABLE t{n} (v int PRIMARY KEY, note text);"
        f"INSERT INTO t{n} SELECT i, repeat('x', 40) FROM generate_series(1, 3000) i;"
        for n in range(12)
    )
    strategy.capture("vac1", lambda w: _sql(w, tables))
    size = strategy.footprint("vac1")
    assert size is not None
    pg_cluster.vacuum(strategy.names.golden("vac1"))  # what autovacuum would do, later
    after = strategy.footprint("vac1")
    assert after is not None and abs(after - size) <= 4 * 8192, f"{size} -> {after}"
    strategy.drop("vac1")
    assert strategy.footprint("vac1") is None
