"""A virtual clock: its epoch derives from the seed and it moves only when statekit (or a world
builder, through ``statekit.kit.clock()``) moves it.

Python's clock is patched with time-machine (``tick=False``: time stands still within a controlled
call, so nothing depends on how long a step took). We chose time-machine over freezegun because it
patches the C-level clock functions (``time.time``, ``datetime.now``, ``date.today``) process-wide,
including in modules that imported them before patching, and costs microseconds to start and stop,
which lets statekit apply it only inside builds and ``reset``/``step`` instead of for the whole process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import ClassVar

import time_machine

from statekit.determinism.base import Control

BASE_EPOCH = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


def epoch_for(seed: int) -> datetime:
    """A seed's world starts on one of 365 days after BASE_EPOCH, at 09:00 UTC."""
    offset = int(hashlib.sha256(f"epoch:{seed}".encode()).hexdigest(), 16) % 365
    return BASE_EPOCH + timedelta(days=offset)


class VirtualClock(Control):
    """The episode's (or the build's) time. ``active()`` makes Python's clock read it; ``advance()``
    moves it, and moves Python's clock with it when called while active (a world builder that wants
    its rows stamped at different instants calls ``statekit.kit.clock().advance(...)`` between them)."""

    name: ClassVar[str] = "clock"

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("the virtual clock needs an aware datetime")
        self.now = start
        self._traveller: time_machine.Traveller | None = None

    def advance(self, delta: timedelta) -> None:
        if delta < timedelta(0):
            raise ValueError("the virtual clock never goes backwards")
        self.now += delta
        if self._traveller is not None:
            self._traveller.shift(delta)

    def isoformat(self) -> str:
        return self.now.astimezone(UTC).isoformat().replace("+00:00", "Z")

    @contextmanager
    def active(self) -> Iterator[None]:
        with time_machine.travel(self.now, tick=False) as traveller:
            self._traveller = traveller
            try:
                yield
            finally:
                self._traveller = None

    def save(self) -> datetime:
        return self.now

    def load(self, state: datetime) -> None:
        self.now = state
