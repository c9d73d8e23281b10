"""The determinism controls of one episode (or one world build), applied together.

Controls patch process-wide names (the clock, ``uuid.uuid4``, ``random``), so only one set can be
active at a time in a process: ``active()`` holds a process-wide lock. Several environments in one
process therefore take turns; run them in separate processes to run them in parallel.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from statekit.determinism.clock import VirtualClock, epoch_for
from statekit.determinism.ids import SeededIds

_ACTIVE = threading.RLock()


@dataclass(frozen=True)
class ControlsState:
    """What a snapshot must carry besides the world itself."""

    now: datetime
    ids: tuple[Any, Any]


class Controls:
    """Clock plus ids plus randomness for ``seed``; ``purpose`` keeps build and episode streams apart."""

    def __init__(
        self, seed: int, *, purpose: str = "episode", start_offset: timedelta = timedelta(0)
    ) -> None:
        self.seed = seed
        self.clock = VirtualClock(epoch_for(seed) + start_offset)
        self.ids = SeededIds(seed, purpose)

    @contextmanager
    def active(self) -> Iterator[None]:
        with _ACTIVE, ExitStack() as stack:
            stack.enter_context(self.clock.active())
            stack.enter_context(self.ids.active())
            yield

    def save(self) -> ControlsState:
        return ControlsState(now=self.clock.now, ids=self.ids.getstate())

    def load(self, state: ControlsState) -> None:
        self.clock.now = state.now
        self.ids.setstate(state.ids)
