"""An in-memory strategy: goldens and copies are deep-copied dicts. For fast core tests."""

from __future__ import annotations

import copy
import itertools
import pickle
from typing import Any

from statekit.errors import ResetError, RewindError
from statekit.strategies.base import Builder, Capabilities, ResetStrategy, World


class InMemory(ResetStrategy):
    """Each world's ``handle`` is a dict the adapter reads and writes directly."""

    name = "memory"
    persistent = False

    def __init__(self) -> None:
        self._goldens: dict[str, dict[str, Any]] = {}
        self._live: dict[str, dict[str, Any]] = {}
        self._keys: dict[str, str] = {}
        self._ids = itertools.count(1)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(rewinds=True)

    def has(self, key: str) -> bool:
        return key in self._goldens

    def capture(self, key: str, source: Builder | World) -> None:
        if key in self._goldens:
            return
        if isinstance(source, World):
            self._goldens[key] = copy.deepcopy(source.handle)
            return
        scratch = World(id=f"build-{key}", location=f"memory://build-{key}", handle={})
        source(scratch)  # an exception here leaves no golden behind
        self._goldens[key] = copy.deepcopy(scratch.handle)

    def restore(self, key: str) -> World:
        if key not in self._goldens:
            raise ResetError(f"no golden world under key {key!r}; capture it first")
        world_id = f"mem-{next(self._ids)}"
        handle = copy.deepcopy(self._goldens[key])
        self._live[world_id] = handle
        self._keys[world_id] = key
        return World(id=world_id, location=f"memory://{world_id}", handle=handle)

    def discard(self, world: World) -> None:
        self._live.pop(world.id, None)
        self._keys.pop(world.id, None)

    def mark(self, world: World) -> object:
        if world.id not in self._live:
            raise RewindError(f"world {world.id!r} is not a live copy")
        return (world.id, copy.deepcopy(self._live[world.id]))

    def rewind(self, world: World, to: object = None) -> None:
        """Refill the same dict in place, so whoever holds ``world.handle`` sees the rewound world."""
        handle = self._live.get(world.id)
        if handle is None:
            raise RewindError(f"world {world.id!r} is not a live copy")
        if to is None:
            source = self._goldens.get(self._keys[world.id])
            if source is None:
                raise RewindError(f"the golden of {world.id!r} was dropped")
        elif isinstance(to, tuple) and to[0] == world.id:
            source = to[1]
        else:
            raise RewindError(f"that bookmark belongs to another world than {world.id!r}")
        handle.clear()
        handle.update(copy.deepcopy(source))

    def drop(self, key: str) -> None:
        self._goldens.pop(key, None)

    def footprint(self, key: str) -> int | None:
        golden = self._goldens.get(key)
        return None if golden is None else len(pickle.dumps(golden))

    @property
    def live_count(self) -> int:
        """How many copies are handed out and not yet discarded (leak checks use it)."""
        return len(self._live)
