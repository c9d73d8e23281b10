"""The world cache's rules on the in-memory ledger: a byte budget, LRU eviction, pins, leases."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import statekit
from statekit.cache import CacheIndex, WorldCache, parse_size
from statekit.determinism.ids import SeededIds
from statekit.entropy import true_token
from statekit.errors import ConfigError
from statekit.memo import Memo
from statekit.seeds import WorldSet
from statekit.strategies.memory import InMemory
from statekit.testing.ledger import LedgerAdapter

REPO = Path(__file__).resolve().parents[2]


def _golden_bytes() -> int:
    """The largest a ledger golden gets (sizes differ a little by seed), measured, not guessed."""
    adapter, strategy = LedgerAdapter(), InMemory()
    cache = WorldCache(adapter, strategy, budget=1 << 30)
    return max(strategy.footprint(cache.ensure(seed)) or 0 for seed in range(40))


def test_a_thousand_seedless_resets_stay_within_the_budget() -> None:
    budget = 5 * _golden_bytes()
    with statekit.make(LedgerAdapter, cache_bytes=budget) as env:
        strategy = env.strategy
        assert isinstance(strategy, InMemory)
        misses = 0
        for _ in range(1000):
            env.reset()
            misses += env.last_reset_cache == "miss"
            assert env.cache.index.total() <= budget
            assert len(strategy._goldens) <= 5
            assert env.step({"tool": "balances"})[0]["accounts"], "the episode is intact"
        assert misses > 990, "seeds are drawn from [0, 2**31): nearly every reset builds"
        assert len(env.cache.evicted) == misses - len(strategy._goldens)


def test_a_finite_world_set_builds_each_world_once() -> None:
    with statekit.make(LedgerAdapter, num_worlds=10, start_seed=100) as env:
        seeds = [env.reset()[1]["seed"] for _ in range(300)]
        assert set(seeds) == set(range(100, 110))
        assert len(env.cache.entries()) == 10 and env.cache.evicted == []
        assert env.reset(seed=7)[1]["seed"] == 7, "explicit seeds are never restricted"
    for count, start in ((0, 0), (None, 5), (10, -1), (2, 2**31 - 1)):
        with pytest.raises(ConfigError, match=r"num_worlds|seeds must lie"):
            statekit.make(LedgerAdapter, num_worlds=count, start_seed=start)


def test_eviction_is_least_recently_used_and_spares_pins_and_leases() -> None:
    """A holder leases its current world and the one before (a refused reset keeps that episode)."""
    adapter, strategy, index = LedgerAdapter(), InMemory(), CacheIndex()
    budget = 3 * _golden_bytes() + _golden_bytes() // 2  # room for three worlds, not four
    a = WorldCache(adapter, strategy, budget=budget, index=index)
    b = WorldCache(adapter, strategy, budget=budget, index=index)
    key = a.key

    def held() -> set[int]:
        return {seed for seed in range(10) if strategy.has(key(seed))}

    a.ensure(1)  # a's episode leases seed 1 all along
    b.ensure(2)
    b.ensure(3)
    b.ensure(4)  # over: 2 is the least recently used world nobody leases
    assert held() == {1, 3, 4}
    b.pin([6])
    b.ensure(5)
    b.ensure(6)
    b.ensure(7)
    assert held() == {1, 6, 7}, "3, 4 and 5 went in turn; 6 is pinned"
    b.ensure(8)  # over, but 1 is leased, 6 pinned, 7 and 8 are b's: nothing may go
    assert held() == {1, 6, 7, 8}
    a.close()  # a's episode ended: seed 1 may go
    b.ensure(9)
    assert held() == {6, 8, 9}
    assert b.evicted == [key(s) for s in (2, 3, 4, 5, 1, 7)]
    assert [(e.seed, e.pinned, e.leased) for e in b.entries()] == [
        (6, True, False),
        (8, False, True),
        (9, False, True),
    ]
    b.pin([6], pinned=False)
    assert b.prune(0) == [key(6)] and held() == {8, 9}


_CRASHED_HOLDER = """
import os, signal, sys
from pathlib import Path
from statekit.cache import CacheIndex, WorldCache
from statekit.strategies.memory import InMemory
from statekit.testing.ledger import LedgerAdapter
cache = WorldCache(LedgerAdapter(), InMemory(), index=CacheIndex(Path(sys.argv[1])))
cache.ensure(1)
print(cache.key(1), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_holders_made_while_an_episode_draws_ids_keep_their_own_leases() -> None:
    """The ids control patches the process's entropy while any session steps. A holder named from
    ``secrets`` then got the episode stream's first token, the same for every session made during
    such a step: one session's close released the other's leases, and a golden in use was evicted
    under it (a worker hit this as "cannot digest ...: not a directory")."""
    adapter, strategy, index = LedgerAdapter(), InMemory(), CacheIndex()
    budget = 2 * _golden_bytes() + _golden_bytes() // 2  # room for two worlds, not three
    caches = []
    for _ in range(2):
        with SeededIds(5).active():  # the same seed's step in another session, each time
            caches.append(WorldCache(adapter, strategy, budget=budget, index=index))
    a, b = caches
    a.ensure(1)  # a's episode is on seed 1
    b.ensure(2)
    b.close()  # b's session ends: only b's leases go
    c = WorldCache(adapter, strategy, budget=budget, index=index)
    c.ensure(3)
    c.ensure(4)
    assert strategy.has(a.key(1)), "a's world stays while a uses it"
    assert {e.seed for e in index.entries() if e.leased} == {1, 3, 4}, "b's close kept a's lease"


def test_seedless_draws_and_trash_names_come_from_the_system_even_inside_a_step() -> None:
    worlds = WorldSet()
    draws = []
    for _ in range(3):
        with SeededIds(5).active():
            draws.append(worlds.draw())
    assert len(set(draws)) == 3, "seedless resets made during other sessions' steps draw alike"
    with SeededIds(5).active():
        first = true_token(8)
    with SeededIds(5).active():
        assert true_token(8) != first


def test_a_crashed_processs_lease_protects_nothing(tmp_path: Path) -> None:
    path = tmp_path / "worlds.sqlite"
    crashed = subprocess.run(
        [sys.executable, "-c", _CRASHED_HOLDER, str(path)], cwd=REPO, capture_output=True, text=True
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    dead_key = crashed.stdout.strip()
    index = CacheIndex(path)
    assert [(e.key, e.leased) for e in index.entries()] == [(dead_key, False)], "a dead owner's lease is void"
    cache = WorldCache(LedgerAdapter(), InMemory(), budget=0, index=index)
    cache.ensure(2)
    assert cache.evicted == [dead_key]
    assert [e.seed for e in index.entries()] == [2]


def test_sizes_read_like_people_write_them() -> None:
    assert parse_size("2G") == 2 << 30 and parse_size("500MiB") == 500 << 20 and parse_size("1024") == 1024
    assert parse_size("1.5k") == 1536
    with pytest.raises(ConfigError, match="cannot read 'lots' as a size"):
        parse_size("lots")


def test_per_golden_memos_stay_bounded() -> None:
    memo = Memo(size=3)
    for n in range(10):
        memo[f"k{n}"] = str(n)
    memo["k7"] = "again"
    assert list(memo) == ["k8", "k9", "k7"]


HOLD_BUILD_LOCK = """
import sys, time
from statekit.builds import build_lock
with build_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_build_waits_for_another_builder_of_the_same_key(tmp_path: Path) -> None:
    """Sessions and workers of one home share goldens: a key being built elsewhere (here a process
    holding its build lock) is waited for, not built alongside (which published half-built worlds)."""
    import time

    with statekit.make(LedgerAdapter) as env:
        key = env.cache.key(31)
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_BUILD_LOCK, key, "2"], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            started = time.monotonic()
            env.reset(seed=31)
            waited = time.monotonic() - started
        finally:
            holder.wait(timeout=30)
        assert holder.returncode == 0
        assert waited >= 1.0, f"the build did not wait for the lock's holder ({waited:.2f} s)"
        assert env.step({"tool": "balances"})[0]["accounts"], "the world was built once the lock was free"
