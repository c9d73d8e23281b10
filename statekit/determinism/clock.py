"""A virtual clock: its epoch derives from the seed and it moves only when an episode steps it.

Python's clock is patched with time-machine (``tick=False``: time stands still between steps, so
nothing depends on how long a step took). We chose time-machine over freezegun because it patches
the C-level clock functions (``time.time``, ``datetime.now``, ``date.today``) process-wide, including
in modules that imported them before patching, and costs microseconds to start and stop, which lets
statekit apply it only inside ``reset``/``step`` instead of for the whole process.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import time_machine

BASE_EPOCH = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)


def epoch_for(seed: int) -> datetime:
    """A seed's world starts on one of 365 days after BASE_EPOCH, at 09:00 UTC."""
    offset = int(hashlib.sha256(f"epoch:{seed}".encode()).hexdigest(), 16) % 365
    return BASE_EPOCH + timedelta(days=offset)


class VirtualClock:
    """The episode's time. ``active()`` makes Python's clock read it."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("the virtual clock needs an aware datetime")
        self.now = start

    def advance(self, delta: timedelta) -> None:
        if delta < timedelta(0):
            raise ValueError("the virtual clock never goes backwards")
        self.now += delta

    def isoformat(self) -> str:
        return self.now.astimezone(UTC).isoformat().replace("+00:00", "Z")

    @contextmanager
    def active(self) -> Iterator[None]:
        with time_machine.travel(self.now, tick=False):
            yield
