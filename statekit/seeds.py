"""Which worlds a seedless reset draws from: any seed, or a finite world set.

Procedurally generated benchmarks do the same (procgen's ``num_levels``/``start_level``): training
draws from a fixed set of levels, evaluation from all of them. ``WorldSet(count=200, start=0)``
makes a seedless reset pick one of seeds 0-199; explicit seeds are never restricted.

The trade-off. A finite set keeps every world in the world cache (each is built once, then every
reset is a clone of milliseconds, and the disk holds ``count`` goldens), but an agent trained on it
sees only those worlds and can overfit them (procgen measured the generalisation gap this opens).
Unbounded (the default) gives every seedless reset a world it may never have seen, at the price of a
build (about half a second for the claims app) on nearly every reset, and a cache that churns at its
byte budget, evicting least-recently-used worlds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from statekit.entropy import true_randbelow
from statekit.errors import ConfigError

SEED_BOUND = 2**31
"""Seeds are non-negative and below this (what a 32-bit signed int holds, for any client)."""


@dataclass(frozen=True)
class WorldSet:
    """Seeds ``start .. start + count - 1`` (``count=None``: every seed below ``SEED_BOUND``)."""

    count: int | None = None
    start: int = 0

    def __post_init__(self) -> None:
        if self.count is not None and self.count < 1:
            raise ConfigError(f"num_worlds must be at least 1 (or None for every seed), got {self.count}")
        upper = self.start + (self.count or 0)
        if self.start < 0 or upper > SEED_BOUND or (self.count is None and self.start):
            raise ConfigError(
                f"the world set starts at seed {self.start} and holds {self.count} worlds: seeds must lie "
                f"in [0, {SEED_BOUND}), and start_seed needs num_worlds"
            )

    def draw(self) -> int:
        """A seed for a seedless reset (the process's secure random source: not reproducible)."""
        return self.start + true_randbelow(self.count or SEED_BOUND)

    def draw_from(self, generator: Any) -> int:
        """A seed from a NumPy generator (Gymnasium's ``np_random``), so a seeded reset fixes the sequence."""
        return self.start + int(generator.integers(self.count or SEED_BOUND))

    def as_dict(self) -> dict[str, int | None]:
        return {"num_worlds": self.count, "start_seed": self.start}
