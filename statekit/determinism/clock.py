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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, ClassVar

from statekit.determinism.base import Control

if TYPE_CHECKING:
    import time_machine

BASE_EPOCH = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
EPISODE_START = timedelta(hours=1)
"""Episodes begin an hour after their world's build began, so 'built' and 'acted on' never coincide."""


def epoch_for(seed: int) -> datetime:
    """A seed's world starts on one of 365 days after BASE_EPOCH, at 09:00 UTC."""
    offset = int(hashlib.sha256(f"epoch:{seed}".encode()).hexdigest(), 16) % 365
    return BASE_EPOCH + timedelta(days=offset)


class VirtualClock(Control):
    """The episode's (or the build's) time. ``active()`` makes Python's clock read it; ``advance()``
    moves it, and moves Python's clock with it when called while active (a world builder that wants
    its rows stamped at different instants calls ``statekit.kit.clock().advance(...)`` between them).

    The rules (docs/WRAPPING.md, "The clock"): a build starts at the seed's epoch and may move back
    (``backwards``) to write history, but must end by ``EPISODE_START`` after it, where episodes begin;
    an episode's clock only moves forward (``start_episode`` may move it, and a replayed deterministic
    start ends where the first one did).
    """

    name: ClassVar[str] = "clock"

    def __init__(self, start: datetime, *, backwards: bool = False) -> None:
        if start.tzinfo is None:
            raise ValueError("the virtual clock needs an aware datetime")
        self.now = start
        self.backwards = backwards
        self._traveller: time_machine.Traveller | None = None
        self._followers: list[Callable[[datetime], None]] = []

    def follow(self, follower: Callable[[datetime], None]) -> None:
        """Call ``follower(now)`` whenever this clock is entered or moved: what Python's clock reads,
        handed to what statekit cannot patch (an application process's clock,
        ``statekit.kit.AppProcess.set_clock``). Called once now."""
        self._followers.append(follower)
        follower(self.now)

    def _moved(self) -> None:
        for follower in self._followers:
            follower(self.now)

    def advance(self, delta: timedelta) -> None:
        if delta < timedelta(0) and not self.backwards:
            raise ValueError(
                f"an episode's virtual clock never goes backwards (asked to move {delta}): only a world "
                "builder may move it back, to write history before the episode's start"
            )
        self.now += delta
        if self._traveller is not None:
            self._traveller.shift(delta)
        self._moved()

    def isoformat(self) -> str:
        return self.now.astimezone(UTC).isoformat().replace("+00:00", "Z")

    @contextmanager
    def active(self) -> Iterator[None]:
        import time_machine  # here, not at import: it imports pytest and unittest (~77 ms in every
        # process importing statekit, the command line's and the harness front's included)

        self._moved()
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
        self._moved()
        if self._traveller is not None:  # active: Python's clock follows
            self._traveller.move_to(state)
