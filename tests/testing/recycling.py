"""A pool that hands out used copies: the ledger on a strategy that recycles discarded worlds
without resetting them (the restore checks must fail it)."""

from __future__ import annotations

from typing import Any

from statekit.strategies.base import World
from statekit.strategies.memory import InMemory
from statekit.testing.ledger import LedgerAdapter


class RecyclingMemory(InMemory):
    """A pool that hands a discarded copy to the next restore of its key, used as it is."""

    def __init__(self) -> None:
        super().__init__()
        self.used: dict[str, list[World]] = {}

    def discard(self, world: World) -> None:
        key = self._keys.get(world.id)
        if key is not None:
            self.used.setdefault(key, []).append(world)

    def restore(self, key: str) -> World:
        if self.used.get(key):
            return self.used[key].pop()
        return super().restore(key)


class RecyclingLedger(LedgerAdapter):
    name = "recycling_ledger"
    strategies = ("memory",)

    def make_strategy(self, name: str, **options: Any) -> InMemory:
        return RecyclingMemory()
