"""Harness worker processes: a worker killed mid-step ends its sessions with 410 ``worker_lost``, is
replaced, leaks no world, and rollouts replayed from their logs equal the undisturbed run."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import statekit
from statekit.client import RemoteEnvironment
from statekit.errors import ActionError, EnvironmentLost, ResetNeeded, StatekitError
from statekit.harness import HarnessConfig, create_app
from statekit.harness.worker import portable
from statekit.postgres import PostgresServer
from statekit.rollouts import Turn, run
from statekit.servers import ThreadedServer
from statekit.settings import statekit_home
from statekit.strategies.naming import HOST_TAG, Owner, process_start
from statekit.testing.ledger import ledger_policy

from .helpers import LEDGER

BLOCKING = "tests.harness.blocking:BlockingLedger"


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def harness() -> Iterator[Callable[..., tuple[str, Any]]]:
    """Start ``create_app(HarnessConfig(...))``; returns (url, app). Stopped after the test."""
    servers: list[ThreadedServer] = []

    def start(adapter: str, **config: Any) -> tuple[str, Any]:
        app = create_app(HarnessConfig.of(adapter, **config))
        servers.append(ThreadedServer(app).start(timeout=120))
        return servers[-1].url, app

    yield start
    for server in servers:
        server.stop()


def test_a_worker_killed_mid_step_ends_its_sessions_and_is_replaced(
    harness: Callable[..., tuple[str, Any]], tmp_path: Path
) -> None:
    pid_file = tmp_path / "blocked-in"
    url, app = harness(BLOCKING, workers=2, adapter_options={"pid_file": str(pid_file)})
    workers = app.state.workers
    first_pids = set(workers.pids)
    assert len(first_pids) == 2
    with httpx.Client(base_url=url, timeout=120) as http:
        doomed = http.post("/reset", json={"seed": 1}).json()["session_id"]
        survivor = http.post("/reset", json={"seed": 2}).json()  # the least loaded worker: the other one

        replies: list[httpx.Response] = []
        stepping = threading.Thread(
            target=lambda: replies.append(
                http.post("/step", json={"session_id": doomed, "action": {"tool": "block"}})
            )
        )
        stepping.start()
        _wait_for(pid_file.exists, "the step to start blocking")
        victim = int(pid_file.read_text())
        assert victim in first_pids
        os.kill(victim, signal.SIGKILL)
        stepping.join(60)

        (in_flight,) = replies
        assert in_flight.status_code == 410, in_flight.text
        error = in_flight.json()["error"]
        assert error["code"] == "worker_lost"
        assert (
            f"worker {victim} was killed by SIGKILL" in error["message"] and "POST /reset" in error["message"]
        )
        later = http.get("/state", params={"session_id": doomed})
        assert later.status_code == 410 and later.json()["error"]["code"] == "worker_lost"

        kept = http.post("/step", json={"session_id": survivor["session_id"], "action": {"tool": "balances"}})
        assert kept.status_code == 200, "the other worker's session carries on"  # so: sessions spread

        # counted once started (its pid shows in its slot a moment before): wait for the count
        _wait_for(lambda: workers.replaced == 1, "a replacement worker")
        assert len(workers.pids) == 2 and victim not in workers.pids
        health = http.get("/health").json()
        assert health["workers"] == 2 and health["sessions"] == 1, "the lost session no longer counts"
        again = http.post("/reset", json={"seed": 1})
        assert (
            again.status_code == 200
            and again.json()["info"]["digest"]
            == http.post("/reset", json={"seed": 1}).json()["info"]["digest"]
        )


def test_the_client_raises_environment_lost_and_close_still_works(
    harness: Callable[..., tuple[str, Any]], tmp_path: Path
) -> None:
    pid_file = tmp_path / "blocked-in"
    url, _ = harness(BLOCKING, workers=1, adapter_options={"pid_file": str(pid_file)})
    remote = RemoteEnvironment(url)
    remote.reset(seed=3)
    killer = threading.Thread(
        target=lambda: (_wait_for(pid_file.exists, "the block"), os.kill(int(pid_file.read_text()), 9))
    )
    killer.start()
    with pytest.raises(EnvironmentLost, match="SIGKILL"):
        remote.step({"tool": "block"})
    killer.join()
    remote.close()  # the session is already gone: closing is quiet
    remote.close()


def test_rollouts_replayed_after_workers_die_equal_the_undisturbed_run(
    harness: Callable[..., tuple[str, Any]],
) -> None:
    seeds = list(range(16))
    undisturbed = run(lambda: statekit.make(LEDGER), seeds, ledger_policy)
    url, app = harness(LEDGER, workers=2, max_sessions=8)
    killed: list[int] = []

    def policy(turn: Turn) -> Any:
        if turn.seed == 6 and len(turn.actions) == 1 and not killed:
            killed.extend(app.state.workers.pids)  # every worker: each episode in flight is lost
            for pid in killed:
                os.kill(pid, signal.SIGKILL)
        return ledger_policy(turn)

    disturbed = run(lambda: RemoteEnvironment(url), seeds, policy, concurrency=4)
    assert len(killed) == 2
    _wait_for(lambda: app.state.workers.replaced == 2, "both workers replaced")
    assert [t.to_json() for t in disturbed] == [t.to_json() for t in undisturbed]
    assert all(t.rewards[-1] == 1.0 for t in disturbed)


def test_a_killed_workers_databases_and_directories_are_swept(
    harness: Callable[..., tuple[str, Any]], pg_url: str, pg_cluster: PostgresServer
) -> None:
    url, app = harness("claims_app", db_url=pg_url, workers=1)
    copies = statekit_home() / "files" / "claims_app" / "uploads" / "copies"

    tags: dict[int, str] = {}

    def leftovers(pid: int) -> list[str]:
        tag = tags.setdefault(pid, f"_{Owner(HOST_TAG, pid, process_start(pid) or 0).tag}_")  # while alive
        databases = [name for name in pg_cluster.databases("skclaims_") if tag in name]
        trees = [p.name for p in copies.iterdir() if tag in p.name] if copies.exists() else []
        mounts = [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if tag in line]
        return databases + trees + mounts

    with RemoteEnvironment(url) as remote:
        remote.reset(seed=7)
        remote.step({"tool": "list_claims", "limit": 2})
        (victim,) = app.state.workers.pids
        assert leftovers(victim), "the session's world is a database and a directory named after its worker"
        os.kill(victim, signal.SIGKILL)
        with pytest.raises(EnvironmentLost):
            remote.state()
    # replaced (not "one pid again": the dead worker's slot may not be emptied yet), and a replacement
    # counts once it is ready, after making its environment swept the dead one's copies
    _wait_for(lambda: app.state.workers.replaced == 1, "a replacement worker", timeout=120)
    assert leftovers(victim) == [], "the replacement swept the dead worker's world"
    with RemoteEnvironment(url) as remote:
        assert remote.reset(seed=7)[1]["digest"]


def test_worker_errors_cross_the_pipe_as_their_own_class() -> None:
    assert type(portable(ResetNeeded("call reset"))) is ResetNeeded
    odd = portable(ActionError("unknown_tool", "no such tool"))  # its constructor takes two arguments
    assert isinstance(odd, StatekitError) and "no such tool" in str(odd)
    assert pickle.loads(pickle.dumps(odd)).args == odd.args
    assert any("in harness worker" in note for note in getattr(odd, "__notes__", []))


def test_serve_refuses_a_negative_worker_count() -> None:
    statekit_cli = str(Path(sys.executable).with_name("statekit"))
    result = subprocess.run(
        [statekit_cli, "serve", LEDGER, "--workers", "-1", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2 and "workers must be >= 0" in result.stderr


def test_workers_run_with_two_malloc_arenas_unless_the_user_chose(
    harness: Callable[..., tuple[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker runs a thread per session, and glibc's default of an arena per thread let the soak's
    RSS creep (see MALLOC_ARENAS); a user's own MALLOC_ARENA_MAX is kept."""

    def arenas(app: Any) -> str:
        (pid,) = app.state.workers.pids
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        return next(v.split(b"=", 1)[1].decode() for v in environ if v.startswith(b"MALLOC_ARENA_MAX="))

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert arenas(harness(LEDGER, workers=1)[1]) == "2"
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert arenas(harness(LEDGER, workers=1)[1]) == "4"
