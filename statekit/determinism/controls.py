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


CORE_CONTROLS = ("clock", "ids")
"""Controls statekit applies itself; adapters add their own (e.g. "jobs", "outbound")."""


class Controls:
    """Clock plus ids plus randomness for ``seed``; ``purpose`` keeps build and episode streams apart.

    ``disabled`` switches individual controls off. That exists to *prove* each control: a rollout
    without it must differ (``statekit.testing.check_controls``); never disable one in training.
    """

    def __init__(
        self,
        seed: int,
        *,
        purpose: str = "episode",
        start_offset: timedelta = timedelta(0),
        disabled: frozenset[str] = frozenset(),
    ) -> None:
        self.seed = seed
        self.clock = VirtualClock(epoch_for(seed) + start_offset)
        self.ids = SeededIds(seed, purpose)
        self.disabled = disabled

    @contextmanager
    def active(self, *, all_on: bool = False) -> Iterator[None]:
        """Apply the controls; ``all_on`` ignores ``disabled`` (episode set-up is never the subject)."""
        off = frozenset() if all_on else self.disabled
        with _ACTIVE, ExitStack() as stack:
            if "clock" not in off:
                stack.enter_context(self.clock.active())
            if "ids" not in off:
                stack.enter_context(self.ids.active())
            yield

    def save(self) -> ControlsState:
        return ControlsState(now=self.clock.now, ids=self.ids.getstate())

    def load(self, state: ControlsState) -> None:
        self.clock.now = state.now
        self.ids.setstate(state.ids)
