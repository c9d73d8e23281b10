"""Prewarmed: keep restored copies ready in the background so a reset takes one in O(1).

A pool can only pre-clone a world it knows is coming. It keeps ``depth`` copies of every key that
was recently restored (the trainer resets the same seeds again) and of every key named by
``prefetch`` (the trainer announces its next batch). A miss falls back to a direct restore of the
wrapped strategy, so the pool never changes *what* a reset returns, only how fast.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import OrderedDict, deque

from statekit.strategies.base import Capabilities, ResetStrategy, StrategyWrapper, World

log = logging.getLogger(__name__)


class Prewarmed(StrategyWrapper):
    """Wrap ``inner`` with a pool of ``depth`` ready copies for up to ``max_keys`` keys."""

    def __init__(self, inner: ResetStrategy, *, depth: int = 2, max_keys: int = 4) -> None:
        if depth < 1 or max_keys < 1:
            raise ValueError("depth and max_keys must be at least 1")
        super().__init__(inner)
        self.name = f"prewarmed({inner.name})"
        self.depth = depth
        self.max_keys = max_keys
        self.hits = 0
        self.misses = 0
        self._ready: OrderedDict[str, deque[World]] = OrderedDict()
        self._cond = threading.Condition()
        self._closed = False
        self._filler = threading.Thread(target=self._fill_forever, name="statekit-prewarm", daemon=True)
        self._filler.start()

    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(self.inner.capabilities, pools=True)

    def restore(self, key: str) -> World:
        with self._cond:
            ready = self._want(key)
            world = ready.popleft() if ready else None
            self._cond.notify_all()
        if world is not None and self.inner.lost(world):  # made before its server restarted
            self.inner.discard(world)
            world = None
        if world is not None:
            self.hits += 1
            self.last_restore = "pooled"
            return world
        self.misses += 1
        world = self.inner.restore(key)
        self.last_restore = self.inner.last_restore
        return world

    def prefetch(self, keys: list[str]) -> None:
        with self._cond:
            for key in keys:
                self._want(key)
            self._cond.notify_all()

    def drop(self, key: str) -> None:
        with self._cond:
            stale = self._ready.pop(key, deque())
        for world in stale:
            self.inner.discard(world)
        self.inner.drop(key)

    def wait_ready(self, key: str, timeout: float = 30.0) -> bool:
        """Block until ``key`` has ``depth`` copies ready (benchmarks and tests use it)."""
        with self._cond:
            return self._cond.wait_for(lambda: len(self._ready.get(key, ())) >= self.depth, timeout)

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._filler.join(timeout=30)
        with self._cond:
            leftovers = [world for ready in self._ready.values() for world in ready]
            self._ready.clear()
        for world in leftovers:
            self.inner.discard(world)
        self.inner.close()

    def _want(self, key: str) -> deque[World]:
        """Mark ``key`` as recently used; evict the least recent key beyond ``max_keys``."""
        ready = self._ready.setdefault(key, deque())
        self._ready.move_to_end(key)
        while len(self._ready) > self.max_keys:
            _, evicted = self._ready.popitem(last=False)
            for world in evicted:
                threading.Thread(target=self.inner.discard, args=(world,), daemon=True).start()
        return ready

    def _next_short_key(self) -> str | None:
        for key in reversed(self._ready):
            if len(self._ready[key]) < self.depth:
                return key
        return None

    def _fill_forever(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._closed or self._next_short_key() is not None)
                if self._closed:
                    return
                key = self._next_short_key()
            assert key is not None
            try:
                if not self.inner.has(key):
                    with self._cond:
                        self._ready.pop(key, None)
                    continue
                world = self.inner.restore(key)
            except Exception:
                log.exception("prewarming %s failed; dropping it from the pool", key)
                with self._cond:
                    self._ready.pop(key, None)
                continue
            with self._cond:
                ready = self._ready.get(key)
                if ready is None or self._closed:
                    keep = False
                else:
                    ready.append(world)
                    keep = True
                self._cond.notify_all()
            if not keep:
                self.inner.discard(world)
