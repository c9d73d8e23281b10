"""The reset-strategy interface: capture a golden copy, restore a fresh copy, discard a copy.

A strategy owns one kind of resource (a database, a directory tree, a container). Goldens live under
a *key*; a key names one world (see ``statekit.strategies.keys``). Restoring never touches the
golden, so any number of isolated copies can be handed out from one key.

A second, optional interface puts a copy back *in place*, at the cost of what changed rather than
what the world holds: ``mark`` (a bookmark of a copy's current state), ``rewind`` (to a bookmark, or
to the golden) and ``forget`` (release a bookmark). Strategies that cannot do it keep the defaults,
which raise ``RewindError``; callers then discard and restore, so rewinding changes cost, never results.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from statekit.errors import RewindError
from statekit.world import World

Builder = Callable[[World], None]
"""Fills an empty world, e.g. runs the application's seed script for one seed."""


@dataclass(frozen=True)
class Capabilities:
    """What a strategy can do beyond the three verbs; callers ask this instead of its class."""

    rewinds: bool = False
    """``mark``/``rewind``/``forget`` work (a change journal, an overlay remount): a copy can be put back
    in place. Per world it may still fail (``RewindError``), and callers then clone instead."""
    keeps_worlds: bool = False
    """``discard`` puts a used copy back in place and parks it for its key, and a later ``restore`` of
    that key hands the same world back (same id, same location: an app stays warm on it); ``take``,
    ``parked_keys`` and ``release`` act on the parked copies."""
    pools: bool = False
    """Copies are restored ahead of time in the background (``prefetch`` fills the pool)."""


@dataclass(frozen=True)
class Health:
    """What holds a strategy's worlds, as last seen."""

    down: str | None = None
    """Why no world can be served now (its database server is down, or being restarted); None: fine."""
    restarts: int = 0
    """Times the server came back after it died while this process watched it (its worlds dropped)."""


class ResetStrategy(ABC):
    """Three verbs, plus ``has`` so a cache can tell a hit from a miss.

    ``capabilities`` says what else it can do; wrappers (``StrategyWrapper``) add behaviour around an
    inner strategy and pass the rest through.
    """

    name: str = "strategy"
    persistent: bool = True
    """Goldens outlive the process (on a server, a disk, an image store), so the world cache's record
    of them is shared by every process; False for goldens held in process memory."""
    last_restore: str = "restored"
    """How the latest ``restore`` was served: "restored" (a fresh copy), "pooled" (a copy made ahead of
    time), "rewound" (a used copy put back in place), "recopied" (a used copy that could not be
    rewound, copied afresh in place: ``recreate``). Reported in ``reset``'s info."""

    @abstractmethod
    def has(self, key: str) -> bool:
        """Whether a golden copy exists under ``key``."""

    @abstractmethod
    def capture(self, key: str, source: Builder | World) -> None:
        """Store a golden copy under ``key``: build it with ``source(empty_world)``, or copy a live world.

        A failed build leaves nothing behind; an existing golden under ``key`` is kept as is.
        """

    @abstractmethod
    def restore(self, key: str) -> World:
        """Hand out a fresh isolated copy of the golden under ``key``."""

    @abstractmethod
    def discard(self, world: World) -> None:
        """Destroy a copy handed out by ``restore``. Safe on an already discarded world."""

    def drop(self, key: str) -> None:  # noqa: B027 - optional verb with a no-op default
        """Forget the golden under ``key`` (used for snapshots that are no longer needed)."""

    def footprint(self, key: str) -> int | None:
        """Bytes the golden under ``key`` occupies (None: unknown). The world cache's budget counts it."""
        return None

    def prefetch(self, keys: list[str]) -> None:  # noqa: B027 - a hint; plain strategies ignore it
        """A hint that ``keys`` will be restored soon (pools pre-clone them)."""

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release background work and connections. Safe to call twice."""

    # -- optional: liveness of what holds the worlds ------------------------------------------
    def health(self, *, fresh: bool = False) -> Health:
        """Whether this strategy can serve worlds now (its database server may be down). Cheap: facts
        kept up to date in the background; ``fresh`` asks now instead (a round trip)."""
        return Health()

    def lost(self, world: World, *, fresh: bool = False) -> str | None:
        """Why ``world`` died with what held it (its server restarted since it was made), or None
        while it may live (a server that is only down may come back with it: ``health`` says so).
        ``fresh`` asks the server now (a round trip) instead of the last look."""
        return None

    # -- optional: rewinding a copy in place --------------------------------------------------
    def mark(self, world: World) -> Any:
        """A bookmark of ``world`` as it is now, for ``rewind(world, to=...)``. Cheap where supported.

        Raises RewindError when this strategy (or this world) cannot bookmark.
        """
        raise RewindError(f"the {self.name} strategy cannot bookmark a world")

    def rewind(self, world: World, to: Any = None) -> None:
        """Put ``world`` back at bookmark ``to`` (None: its golden), in place: same id, same location.

        Raises RewindError(reason) when it cannot (the journal cannot express what happened, or the
        strategy has no rewind); the world must then be discarded. Never hands back a half-rewound world.
        """
        raise RewindError(f"the {self.name} strategy cannot rewind a world in place")

    def forget(self, mark: Any) -> None:  # noqa: B027 - nothing to release by default
        """Release a bookmark made by ``mark`` (its saved state, its hold on the journal)."""

    def recreate(self, world: World, key: str) -> World:
        """Make ``world``, which could not be rewound, a fresh copy of golden ``key`` under the same id
        and location, so what is attached to it (an application process holding its connection
        settings) serves the next episode as it is, instead of being started again for a new copy.

        Raises RewindError where this strategy (or this world) cannot: the world is then discarded."""
        raise RewindError(f"the {self.name} strategy cannot copy a world afresh in place")

    # -- optional: a copy's changes as data, for another copy of its golden -----------------------
    def changes(self, world: World) -> Any:
        """``world``'s changes since its golden, as JSON data that ``apply_changes`` brings another fresh
        copy of the same golden to, wherever it lives (an episode that moves: ``statekit.transfer``).

        Raises RewindError when this strategy (or this world) cannot tell them.
        """
        raise RewindError(f"the {self.name} strategy cannot read a world's changes")

    def apply_changes(self, world: World, changes: Any) -> None:
        """Bring ``world``, a fresh copy of the golden ``changes`` were read against, to them. Raises
        RewindError (the world then still at its golden) when it cannot."""
        raise RewindError(f"the {self.name} strategy cannot apply a world's changes")

    # -- what it can do, asked instead of its class --------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        """What this strategy does beyond the three verbs (default: nothing more)."""
        return Capabilities()

    @property
    def storage(self) -> ResetStrategy:
        """The strategy that holds the goldens (a wrapper's innermost one): what a cache budgets and a
        golden is exported from."""
        return self

    def leaves(self) -> list[ResetStrategy]:
        """The strategies that hold resources, below every wrapper and composite (each sweeps its own
        orphans when it is made)."""
        return [self]

    def pooled(self, depth: int) -> ResetStrategy:
        """This strategy with ``depth`` restored copies kept ready (``statekit.make(prewarm=depth)``)."""
        from statekit.strategies.prewarmed import Prewarmed

        return Prewarmed(self, depth=depth)

    # -- optional: parked copies (``capabilities.keeps_worlds``) --------------------------------
    def take(self, world_id: str) -> World | None:
        """Un-park one particular copy (to restore a bookmark of it); None: not parked here."""
        return None

    def parked_keys(self) -> set[str]:
        """The keys of parked copies (a cache must keep their goldens)."""
        return set()

    def release(self, key: str) -> None:  # noqa: B027 - nothing parked by default
        """Destroy the parked copies of ``key`` (the golden stays): the next restore clones afresh."""

    def fallbacks(self) -> dict[str, int]:
        """Why copies could not be put back in place and were cloned instead, counted by reason."""
        return {}

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class StrategyWrapper(ResetStrategy):
    """A strategy that adds behaviour around ``inner`` (a pool, rewinding) and passes everything it does
    not change through, as Gymnasium's wrappers and httpx's transports compose."""

    def __init__(self, inner: ResetStrategy) -> None:
        self.inner = inner
        self.persistent = inner.persistent

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    @property
    def storage(self) -> ResetStrategy:
        return self.inner.storage

    def leaves(self) -> list[ResetStrategy]:
        return self.inner.leaves()

    def has(self, key: str) -> bool:
        return self.inner.has(key)

    def capture(self, key: str, source: Builder | World) -> None:
        self.inner.capture(key, source)

    def restore(self, key: str) -> World:
        world = self.inner.restore(key)
        self.last_restore = self.inner.last_restore
        return world

    def discard(self, world: World) -> None:
        self.inner.discard(world)

    def drop(self, key: str) -> None:
        self.inner.drop(key)

    def footprint(self, key: str) -> int | None:
        return self.inner.footprint(key)

    def prefetch(self, keys: list[str]) -> None:
        self.inner.prefetch(keys)

    def health(self, *, fresh: bool = False) -> Health:
        return self.inner.health(fresh=fresh)

    def lost(self, world: World, *, fresh: bool = False) -> str | None:
        return self.inner.lost(world, fresh=fresh)

    def mark(self, world: World) -> Any:
        return self.inner.mark(world)

    def rewind(self, world: World, to: Any = None) -> None:
        self.inner.rewind(world, to)

    def forget(self, mark: Any) -> None:
        self.inner.forget(mark)

    def recreate(self, world: World, key: str) -> World:
        return self.inner.recreate(world, key)

    def changes(self, world: World) -> Any:
        return self.inner.changes(world)

    def apply_changes(self, world: World, changes: Any) -> None:
        self.inner.apply_changes(world, changes)

    def take(self, world_id: str) -> World | None:
        return self.inner.take(world_id)

    def parked_keys(self) -> set[str]:
        return self.inner.parked_keys()

    def release(self, key: str) -> None:
        self.inner.release(key)

    def fallbacks(self) -> dict[str, int]:
        return self.inner.fallbacks()

    def close(self) -> None:
        self.inner.close()
