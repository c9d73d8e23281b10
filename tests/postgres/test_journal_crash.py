"""kill -9 in the middle of a rewind: the half-rewound world is never handed out again; the next
process sweeps it away and serves a clone equal to the golden."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from statekit.postgres import PostgresServer
from statekit.postgres.server import to_conninfo
from statekit.strategies.base import World
from statekit.strategies.pg_template import PostgresTemplate
from statekit.testing.database import first_difference, logical_state

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import sys
import psycopg
from statekit.postgres import PostgresServer
from statekit.strategies.pg_template import PostgresTemplate
from statekit.strategies.rewinding import Rewinding

strategy = Rewinding(PostgresTemplate(PostgresServer(sys.argv[1]), prefix="skkill", journal_bound=10**7))
world = strategy.restore("golden")
with psycopg.connect(world.handle.conninfo, autocommit=True) as app:
    app.execute("UPDATE big SET v = v + 1")  # 200,000 journal entries: a rewind that takes a while
print(world.id, flush=True)
strategy.discard(world)  # the rewind, killed half-way by the test
print("rewound", flush=True)
"""


def _build(world: World) -> None:
    with psycopg.connect(to_conninfo(world.location), autocommit=True) as conn:
        conn.execute("CREATE TABLE big (id int PRIMARY KEY, v int)")
        conn.execute("INSERT INTO big SELECT i, 0 FROM generate_series(1, 100000) i")


def _moving(server: PostgresServer, database: str) -> bool:
    with server.admin() as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND query LIKE %s AND state = 'active'",
            (database, "%_statekit.move%"),
        ).fetchone()
    return bool(row and row[0])


def test_a_process_killed_mid_rewind_leaves_nothing_that_is_served_again(pg_cluster: PostgresServer) -> None:
    with PostgresTemplate(pg_cluster, prefix="skkill") as strategy:
        strategy.capture("golden", _build)
        fresh = strategy.restore("golden")
        golden = logical_state(to_conninfo(fresh.location))
        strategy.discard(fresh)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, pg_cluster.admin_url], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    world_id = child.stdout.readline().strip()
    assert world_id.startswith("skkill_e_"), world_id
    deadline = time.monotonic() + 60
    while not _moving(pg_cluster, world_id):
        assert time.monotonic() < deadline and child.poll() is None, "the rewind never started"
        time.sleep(0.01)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert world_id in pg_cluster.databases("skkill_e_"), "the killed process's world is still there"
    with PostgresTemplate(pg_cluster, prefix="skkill") as strategy:  # the next process starts
        assert world_id in strategy.swept, "its world is swept as an orphan, never handed out"
        assert world_id not in pg_cluster.databases("skkill_e_")
        world = strategy.restore("golden")
        try:
            assert first_difference(logical_state(to_conninfo(world.location)), golden) is None
        finally:
            strategy.discard(world)
        strategy.drop("golden")
