"""Sessions: isolated from each other, bounded in number, and closed (worlds and all) when idle."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

import statekit
import statekit.kit
from statekit.harness import HarnessConfig, create_app
from statekit.harness import app as harness_app
from statekit.harness.errors import ApiError
from statekit.harness.sessions import SessionPool
from statekit.postgres import PostgresServer
from statekit.servers import ThreadedServer
from statekit.strategies.base import Health
from statekit.strategies.memory import InMemory
from statekit.strategies.naming import Owner
from statekit.testing.ledger import LedgerAdapter

from .helpers import LEDGER


class FakeClock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def pool(clock: FakeClock) -> Iterator[SessionPool]:
    made = SessionPool(lambda: statekit.make(LEDGER), max_sessions=3, idle_timeout=60, clock=clock)
    yield made
    made.close_all()


def test_sessions_never_share_state(ledger_url: str) -> None:
    with httpx.Client(base_url=ledger_url) as http:
        a = http.post("/reset", json={"seed": 4}).json()
        b = http.post("/reset", json={"seed": 4}).json()
        assert a["session_id"] != b["session_id"] and a["info"]["digest"] == b["info"]["digest"]
        accounts = http.post("/step", json={"session_id": a["session_id"], "action": {"tool": "balances"}})
        source, target = sorted(accounts.json()["observation"]["accounts"])[:2]
        move = {"tool": "transfer", "source": source, "target": target, "cents": 1}
        http.post("/step", json={"session_id": a["session_id"], "action": move})
        digest_a = http.get("/state", params={"session_id": a["session_id"]}).json()["digest"]
        digest_b = http.get("/state", params={"session_id": b["session_id"]}).json()["digest"]
    assert digest_a != a["info"]["digest"], "the transfer changed session a's world"
    assert digest_b == b["info"]["digest"], "session b's world is untouched"


def test_max_sessions_is_a_clear_429_and_closing_frees_a_slot(serve_app: Callable[..., str]) -> None:
    with httpx.Client(base_url=serve_app(max_sessions=2)) as http:
        first = http.post("/reset", json={"seed": 1}).json()["session_id"]
        http.post("/reset", json={"seed": 2})
        full = http.post("/reset", json={"seed": 3})
        assert full.status_code == 429
        error = full.json()["error"]
        assert error["code"] == "too_many_sessions" and "DELETE /session" in error["message"]
        assert http.post("/reset", json={"session_id": first, "seed": 3}).status_code == 200, (
            "resets still work"
        )
        http.delete("/session", params={"session_id": first})
        assert http.post("/reset", json={"seed": 3}).status_code == 200


def test_idle_sessions_are_reaped_with_their_databases(pg_url: str, pg_cluster: PostgresServer) -> None:
    clock = FakeClock()
    app = create_app(HarnessConfig.of("claims_app", db_url=pg_url, idle_timeout=60), clock=clock)
    mine = f"skclaims_e_{Owner.current().tag}_"

    def episode_databases() -> set[str]:
        return set(pg_cluster.databases(mine))

    before = episode_databases()
    with ThreadedServer(app) as server, httpx.Client(base_url=server.url, timeout=120) as http:
        kept = http.post("/reset", json={"seed": 7}).json()["session_id"]
        idle = http.post("/reset", json={"seed": 7}).json()["session_id"]
        assert len(episode_databases() - before) == 2
        clock.now += 30
        http.get("/state", params={"session_id": kept})  # used: its idle time starts again
        clock.now += 45
        assert app.state.sessions.reap() == [idle]
        assert len(episode_databases() - before) == 1, "the reaped session's database is dropped"
        expired = http.get("/state", params={"session_id": idle})
        assert expired.status_code == 410 and expired.json()["error"]["code"] == "session_expired"
        assert http.get("/state", params={"session_id": kept}).status_code == 200
    assert episode_databases() == before, "shutting the server down closes every session"


def test_the_reaper_runs_by_itself(clock: FakeClock) -> None:
    app = create_app(HarnessConfig(LEDGER, idle_timeout=1), clock=clock)
    with ThreadedServer(app) as server, httpx.Client(base_url=server.url) as http:
        http.post("/reset", json={"seed": 1})
        assert http.get("/health").json()["sessions"] == 1
        clock.now += 5
        deadline = time.monotonic() + 30
        while http.get("/health").json()["sessions"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert http.get("/health").json()["sessions"] == 0


def test_an_idle_connection_outlives_a_clients_reuse_window(clock: FakeClock) -> None:
    """A client keeps an idle connection 5 s for reuse (httpx); the server keeps it longer, so a reuse
    near 5 s never meets a connection the server is closing (a reset, and a step that cannot simply be
    sent again). The same connection still answers after 6 s of quiet."""
    app = create_app(HarnessConfig(LEDGER), clock=clock)
    limits = httpx.Limits(keepalive_expiry=30)  # this client may reuse it later: the server decides
    with ThreadedServer(app) as server, httpx.Client(base_url=server.url, limits=limits) as http:
        ports = []
        for wait in (0.0, 6.0):
            time.sleep(wait)
            answer = http.get("/health", extensions={"trace": None})
            assert answer.status_code == 200
            stream = answer.extensions["network_stream"]
            ports.append(stream.get_extra_info("client_addr")[1])
        assert ports[0] == ports[1], "the server closed the idle connection"


def test_a_session_in_a_call_is_not_reaped(pool: SessionPool, clock: FakeClock) -> None:
    session = pool.open()
    clock.now += 120
    with pool.use(session.id):
        clock.now += 120
        assert pool.reap() == []
    clock.now += 59
    assert pool.reap() == [], "idle time counts from the end of the last call"
    clock.now += 2
    assert pool.reap() == [session.id]


def test_websocket_sessions_live_as_long_as_their_connection(pool: SessionPool, clock: FakeClock) -> None:
    pinned = pool.open(pinned=True)
    clock.now += 10_000
    assert pool.reap() == []
    pool.close(pinned.id)
    with pytest.raises(ApiError) as gone:
        pool.close(pinned.id)
    assert gone.value.status == 404


def test_an_idle_timeout_of_zero_never_reaps(clock: FakeClock) -> None:
    forever = SessionPool(lambda: statekit.make(LEDGER), max_sessions=1, idle_timeout=0, clock=clock)
    session = forever.open()
    clock.now += 10**9
    assert forever.reap() == []
    with forever.use(session.id):
        pass
    forever.close_all()


def test_a_full_pool_refuses_and_close_all_empties_it(clock: FakeClock) -> None:
    pool = SessionPool(lambda: statekit.make(LEDGER), max_sessions=1, idle_timeout=0, clock=clock)
    pool.open()
    with pytest.raises(ApiError) as full:
        pool.open()
    assert full.value.status == 429
    pool.close_all()
    assert len(pool) == 0


class SlowCopies(InMemory):
    def restore(self, key: str) -> statekit.kit.World:
        time.sleep(4)  # like a big clone: I/O, outside the determinism controls' lock
        return super().restore(key)


class SlowLedger(LedgerAdapter):
    """Every restore takes four seconds, so concurrent resets hold every worker thread."""

    def make_strategy(self, name: str, **options: object) -> statekit.kit.ResetStrategy:
        return SlowCopies()


def test_health_answers_while_every_worker_thread_is_busy(serve_app: Callable[..., str]) -> None:
    url = serve_app("tests.harness.test_sessions:SlowLedger", max_sessions=64)
    with httpx.Client(base_url=url, timeout=60) as http, ThreadPoolExecutor(48) as clients:
        resets = [clients.submit(http.post, "/reset", json={"seed": n}) for n in range(48)]  # > 40 threads
        time.sleep(0.5)
        assert http.get("/health", timeout=5).json()["status"] == "healthy"
        # Every thread is held by a 4-second restore: a probe that waited for one would answer only
        # after some reset finished. An ordering, not a stopwatch (a timed bound failed under load).
        assert not any(reset.done() for reset in resets), "the probe waited for a worker thread"
        assert all(reset.result().status_code == 200 for reset in resets)


class SlowToClose(LedgerAdapter):
    """Closing takes a second and a half: a shutdown that waits on something."""

    def close(self) -> None:
        time.sleep(1.5)
        super().close()


def test_a_slow_shutdown_prints_what_every_thread_waits_for(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(harness_app, "SLOW_SHUTDOWN", 0.5)
    with (
        ThreadedServer(
            create_app(HarnessConfig.of("tests.harness.test_sessions:SlowToClose", workers=0))
        ) as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        assert http.post("/reset", json={"seed": 1}).status_code == 200  # a session left open
    stacks = capfd.readouterr().err
    assert "most recent call first" in stacks and "in close" in stacks, stacks[-2000:]


@pytest.mark.parametrize("stop", ["cancelled", "told"])
def test_the_health_watcher_ends_however_its_stop_meets_a_question_in_flight(
    stop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shutdown cancels the workers' health watcher, which asks four times a second through a
    thread. With ``asyncio.wait_for`` (Python 3.11) a cancellation that met an answer arriving was
    swallowed, the watcher asked on, and the server never finished shutting down (79 of 300 such
    stops in a probe); every stop must end it, at any moment of a question."""
    monkeypatch.setattr(harness_app, "HEALTH_INTERVAL", 0.0)

    async def stops() -> list[int]:
        stuck = []
        for attempt in range(300):
            stopping = asyncio.Event()
            watcher = asyncio.create_task(harness_app._poll_health(Health, {}, stopping))
            await asyncio.sleep(0.001 * (attempt % 5))
            if stop == "told":
                stopping.set()
            else:
                watcher.cancel()
            done, _ = await asyncio.wait({watcher}, timeout=2)
            if not done:
                stuck.append(attempt)
                stopping.set()
                await asyncio.wait({watcher}, timeout=2)
        return stuck

    assert asyncio.run(stops()) == []
