"""Rewinding: reuse a world instead of cloning a new one, at the cost of what its episode changed.

``Rewinding(inner)`` wraps any strategy. When a copy is discarded it is rewound in place
(``inner.rewind``: the change journal for PostgreSQL, a remount for overlay directories) and parked
for its key; the next ``restore`` of that key takes it back: same id, same location, so an adapter
can keep its application warm on it. A copy that cannot be rewound (DDL, a TRUNCATE past the
journal's bound, an overflowing journal, large objects, a role changed, a busy mount...) is counted
in ``fallbacks`` by reason and logged, never silent, and copied afresh in place
(``inner.recreate``: the golden cloned again under the same name and URL, reported as "recopied"),
so the application attached to it still serves it (Redmine's puma would take 2.4 s to start for a
new copy); where even that cannot be done (a copy with bookmarks, a strategy without it), it is
discarded and the next restore clones a new copy.

At most ``max_parked`` copies wait (least recently used go first); a copy with live bookmarks is never
evicted, since the bookmarks need it.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from statekit.errors import RewindError
from statekit.strategies.base import Capabilities, ResetStrategy, StrategyWrapper, World

log = logging.getLogger(__name__)


@dataclass
class RewindStats:
    """How restores were served: by a rewound copy, one copied afresh in place, or a fresh clone; and
    why rewinds fell back."""

    rewound: int = 0
    recopied: int = 0
    """Copies that could not be rewound, copied afresh in place (``ResetStrategy.recreate``)."""
    cloned: int = 0
    fallbacks: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "rewound": self.rewound,
            "recopied": self.recopied,
            "cloned": self.cloned,
            "fallbacks": dict(self.fallbacks),
        }


@dataclass(frozen=True)
class _Mark:
    world_id: str
    inner: Any


class Rewinding(StrategyWrapper):
    """``inner``'s copies, rewound and reused; a copy that cannot be rewound is copied afresh in place,
    or else replaced by a new clone."""

    def __init__(self, inner: ResetStrategy, *, max_parked: int = 2) -> None:
        if max_parked < 1:
            raise ValueError("max_parked must be at least 1")
        super().__init__(inner)
        self.name = f"rewind({inner.name})"
        self.max_parked = max_parked
        self.stats = RewindStats()
        self._keys: dict[str, str] = {}  # world id -> key, for every copy of ours that is alive
        self._parked: OrderedDict[str, World] = OrderedDict()  # least recently parked first
        self._pinned: Counter[str] = Counter()  # world id -> live bookmarks
        self._recopied: set[str] = set()  # parked copies made afresh in place, not rewound
        self._lock = threading.RLock()
        self._closed = False

    def has(self, key: str) -> bool:
        """A parked copy can serve ``key`` even without asking the inner strategy (no round trip)."""
        with self._lock:
            if any(self._keys.get(world_id) == key for world_id in self._parked):
                return True
        return self.inner.has(key)

    @property
    def capabilities(self) -> Capabilities:
        return dataclasses.replace(self.inner.capabilities, keeps_worlds=True)

    def pooled(self, depth: int) -> ResetStrategy:
        """The pool goes inside, so this strategy stays outermost: the pool fills it with fresh copies
        and used ones are still rewound and parked."""
        return Rewinding(self.inner.pooled(depth), max_parked=self.max_parked)

    def fallbacks(self) -> dict[str, int]:
        with self._lock:
            return dict(self.stats.fallbacks)

    def restore(self, key: str) -> World:
        while True:  # the most recently parked copy of the key; one its server lost is destroyed
            with self._lock:
                chosen = next((wid for wid in reversed(self._parked) if self._keys.get(wid) == key), None)
                parked = None if chosen is None else self._parked.pop(chosen)
            if parked is None:
                break
            if not self.inner.lost(parked):
                with self._lock:
                    recopied = parked.id in self._recopied
                    self._recopied.discard(parked.id)
                    if recopied:
                        self.stats.recopied += 1
                    else:
                        self.stats.rewound += 1
                self.last_restore = "recopied" if recopied else "rewound"
                return parked
            self._destroy(parked)
        world = self.inner.restore(key)
        with self._lock:
            self._keys[world.id] = key
            self.stats.cloned += 1
            self.last_restore = self.inner.last_restore
        return world

    def parked_keys(self) -> set[str]:
        """The keys of the copies waiting to be rewound into (a cache must keep their goldens)."""
        with self._lock:
            return {self._keys[world_id] for world_id in self._parked if world_id in self._keys}

    def take(self, world_id: str) -> World | None:
        """Un-park one particular copy (to restore a bookmark of it), or None if it is gone."""
        with self._lock:
            return self._parked.pop(world_id, None)

    def discard(self, world: World) -> None:
        with self._lock:
            if world.id in self._parked:
                return
            key = self._keys.get(world.id)
        if key is None:  # not ours (or already discarded): the inner strategy decides
            self.inner.discard(world)
            return
        gone = self.inner.lost(world)
        if gone:  # nothing to rewind: it died with its server
            log.warning("world %s is lost, discarding it: %s", world.id, gone)
            self._destroy(world)
            return
        try:
            self.inner.rewind(world)
        except Exception as exc:
            reason = _reason(exc)
            with self._lock:
                self.stats.fallbacks[reason] += 1
            recopied = self._recreate(world, key, reason)
            if recopied is None:
                return
            world = recopied
        evicted: list[World] = []
        with self._lock:
            if self._closed:
                evicted.append(world)
            else:
                self._parked[world.id] = world
                evicted = self._over_bound()
        for old in evicted:
            self._destroy(old)

    def _recreate(self, world: World, key: str, reason: str) -> World | None:
        """``world`` copied afresh in place (``inner.recreate``: same id and location, so the application
        attached to it stays), or discarded where the strategy refuses (a copy whose bookmarks need its
        journal, a strategy that cannot): None."""
        try:
            fresh = self.inner.recreate(world, key)
        except Exception as exc:
            log.warning(
                "world %s cannot be rewound (%s) nor copied afresh in place (%s): discarding it",
                world.id, reason, _reason(exc),
            )  # fmt: skip
            self._destroy(world)
            return None
        log.warning("world %s cannot be rewound, copied afresh in place: %s", world.id, reason)
        with self._lock:
            self._recopied.add(fresh.id)
        return fresh

    def _over_bound(self) -> list[World]:
        """Least recently parked copies beyond ``max_parked`` that no bookmark holds."""
        free = [wid for wid in self._parked if not self._pinned[wid]]
        excess = len(self._parked) - self.max_parked
        return [self._parked.pop(wid) for wid in free[: max(0, excess)]]

    def _destroy(self, world: World) -> None:
        with self._lock:
            self._recopied.discard(world.id)
            self._keys.pop(world.id, None)
            self._pinned.pop(world.id, None)
        self.inner.discard(world)

    def release(self, key: str) -> None:
        """Destroy the parked copies of ``key`` (the golden stays): the next restore clones afresh."""
        with self._lock:
            stale = [
                w
                for wid, w in list(self._parked.items())
                if self._keys.get(wid) == key and not self._pinned[wid]
            ]
            for world in stale:
                self._parked.pop(world.id, None)
        for world in stale:
            self._destroy(world)

    def drop(self, key: str) -> None:
        with self._lock:
            stale = [w for wid, w in list(self._parked.items()) if self._keys.get(wid) == key]
            for world in stale:
                self._parked.pop(world.id, None)
        for world in stale:
            self._destroy(world)
        self.inner.drop(key)

    def mark(self, world: World) -> Any:
        inner = self.inner.mark(world)
        with self._lock:
            self._pinned[world.id] += 1
        return _Mark(world.id, inner)

    def rewind(self, world: World, to: Any = None) -> None:
        if to is not None and not isinstance(to, _Mark):
            raise RewindError("that bookmark was not made by this strategy")
        self.inner.rewind(world, None if to is None else to.inner)

    def forget(self, mark: Any) -> None:
        if not isinstance(mark, _Mark):
            return
        with self._lock:
            if self._pinned[mark.world_id] > 0:
                self._pinned[mark.world_id] -= 1
            evicted = self._over_bound()
        self.inner.forget(mark.inner)
        for old in evicted:
            self._destroy(old)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            parked = list(self._parked.values())
            self._parked.clear()
        for world in parked:
            self._destroy(world)
        self.inner.close()


def _reason(exc: Exception) -> str:
    return exc.reason if isinstance(exc, RewindError) else f"{type(exc).__name__}: {exc}"
