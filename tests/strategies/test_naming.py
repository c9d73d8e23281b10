"""Orphan detection keys every resource by host + pid + process start time.

A pid alone lies twice: a killed process nobody has reaped yet (a zombie) still answers
``kill(pid, 0)``, and the kernel hands a dead process's pid to a new one. Both tests leave a real
crashed process's databases, copies and fork goldens behind, then start a new strategy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from statekit.postgres import PostgresServer
from statekit.strategies.cow_fs import CowFilesystem
from statekit.strategies.naming import HOST_TAG, Owner, process_start
from statekit.strategies.pg_template import PostgresTemplate

REPO = Path(__file__).resolve().parents[2]
_CRASHER = """
import json, os, signal, sys
from pathlib import Path
from statekit.postgres import PostgresServer
from statekit.strategies.cow_fs import CowFilesystem
from statekit.strategies.naming import snapshot_key
from statekit.strategies.pg_template import PostgresTemplate

url, root, how = sys.argv[1:4]
db = PostgresTemplate(PostgresServer(url), prefix="skorph")
files = CowFilesystem(root, method="copy")
db.capture("orphankey", lambda w: None)
files.capture("orphankey", lambda w: (Path(w.location) / "a.txt").write_text("golden"))
copies = [db.restore("orphankey"), files.restore("orphankey")]
fork = snapshot_key("fork1")
db.capture(fork, copies[0])
files.capture(fork, copies[1])
print(json.dumps({"pid": os.getpid(), "databases": [copies[0].id, db.names.golden(fork)],
                  "trees": [copies[1].id, fork]}), flush=True)
if how == "zombie":
    os.kill(os.getpid(), signal.SIGKILL)
os._exit(0)  # gone without cleaning up, like a crash
"""


@pytest.fixture
def crash(pg_cluster: PostgresServer, tmp_path: Path) -> Iterator[tuple[Path, PostgresServer]]:
    yield tmp_path / "fs", pg_cluster
    for name in pg_cluster.databases("skorph_"):
        pg_cluster.drop_database(name)


def _leave_orphans(url: str, root: Path, how: str) -> tuple[subprocess.Popen[str], dict[str, object]]:
    child = subprocess.Popen(
        [sys.executable, "-c", _CRASHER, url, str(root), how], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, f"the crashing child failed early (exit {child.wait()})"
    return child, json.loads(line)


def _assert_swept(server: PostgresServer, root: Path, left: dict[str, object]) -> None:
    databases, trees = left["databases"], left["trees"]
    assert isinstance(databases, list) and isinstance(trees, list)
    assert set(databases) <= set(server.databases("skorph_")), "the crash left its databases"
    db = PostgresTemplate(server, prefix="skorph")
    files = CowFilesystem(root, method="copy")
    try:
        assert sorted(db.swept) == sorted(databases)
        assert sorted(files.swept) == sorted(trees)
        assert server.databases("skorph_") == ["skorph_g_orphankey"], "the world cache's golden stays"
        assert os.listdir(root / "goldens") == ["orphankey"] and os.listdir(root / "copies") == []
    finally:
        files.close()
        db.close()


def test_a_zombie_is_dead(crash: tuple[Path, PostgresServer]) -> None:
    root, server = crash
    child, left = _leave_orphans(server.admin_url, root, "zombie")
    try:
        deadline = time.monotonic() + 30
        while (Path("/proc") / str(child.pid) / "stat").read_text().split(") ", 1)[1][0] != "Z":
            assert time.monotonic() < deadline, "the child did not die"
            time.sleep(0.01)
        os.kill(child.pid, 0)  # unreaped: the pid still answers, which fooled the old check
        assert not Owner(HOST_TAG, child.pid, 0).is_alive()
        _assert_swept(server, root, left)
    finally:
        child.wait()


def _take_pid(pid: int) -> subprocess.Popen[bytes] | None:
    """Start a process that gets ``pid`` (root: the kernel hands out ns_last_pid + 1 next)."""
    for _ in range(50):
        Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        taker = subprocess.Popen(["sleep", "120"])
        if taker.pid == pid:
            return taker
        taker.kill()
        taker.wait()
    return None


def test_a_reused_pid_is_not_its_old_owner(crash: tuple[Path, PostgresServer]) -> None:
    if not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK):
        message = "reusing a pid on purpose needs root (writing /proc/sys/kernel/ns_last_pid)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message + "; not in CI")
    root, server = crash
    child, left = _leave_orphans(server.admin_url, root, "exit")
    child.wait()
    taker = _take_pid(child.pid)
    assert taker is not None, f"could not start a process with pid {child.pid} (other processes forked?)"
    try:
        assert process_start(child.pid) is not None, "the pid is taken by a live process"
        _assert_swept(server, root, left)
    finally:
        taker.kill()
        taker.wait()
