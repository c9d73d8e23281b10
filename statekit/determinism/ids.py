"""Seeded ids and randomness: ``uuid.uuid4`` and the global ``random`` draw from the episode's seed.

The application keeps calling ``uuid.uuid4()``; while an episode's controls are active that name
returns ids from a seeded generator, so the same seed gives the same ids. The caller's own
``random`` state is saved and given back, so the trainer's randomness is untouched.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class SeededIds:
    """A uuid4 source and a ``random`` state, both derived from ``(purpose, seed)``."""

    def __init__(self, seed: int, purpose: str = "episode") -> None:
        self._uuid_rng = random.Random(f"uuid:{purpose}:{seed}")
        self._global = random.Random(f"random:{purpose}:{seed}").getstate()

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self._uuid_rng.getrandbits(128), version=4)

    def getstate(self) -> tuple[Any, Any]:
        return self._uuid_rng.getstate(), self._global

    def setstate(self, state: tuple[Any, Any]) -> None:
        self._uuid_rng.setstate(state[0])
        self._global = state[1]

    @contextmanager
    def active(self) -> Iterator[None]:
        original_uuid4 = uuid.uuid4
        callers_random = random.getstate()
        uuid.uuid4 = self.uuid4
        random.setstate(self._global)
        try:
            yield
        finally:
            self._global = random.getstate()
            random.setstate(callers_random)
            uuid.uuid4 = original_uuid4
