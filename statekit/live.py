"""The episode being played, as one value: what ``Environment`` keeps between calls."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from statekit.adapter import Episode
from statekit.contract import JSON, StepResult
from statekit.determinism.controls import Controls
from statekit.digest.compute import Digest
from statekit.world import World

Step = tuple[JSON, float, bool, bool, dict[str, JSON]]


@dataclass
class Live:
    """The episode being played: the world it plays on, the application's episode, its controls."""

    key: str
    """The world key (the golden) it started from."""
    seed: int
    options: dict[str, JSON]
    world: World
    episode: Episode
    controls: Controls
    episode_id: str
    digest: Digest
    """The latest digest of the world: what the next one is updated from."""
    step_count: int = 0
    done: bool = False
    actions: list[JSON] = field(default_factory=list)
    """Every action since the episode began, as given: its path (``statekit.transfer`` replays it)."""
    last: tuple[JSON, dict[str, JSON]] = (None, {})
    """The observation and info the latest reset, step or restore returned (an export carries them)."""

    def record(self, action: Any) -> None:
        """Add a step's action to the path (a copy: a caller may reuse its dict for the next action).
        One too deeply nested to copy (refused by the step as malformed) is kept as given: exporting
        the episode then says it cannot move."""
        try:
            self.actions.append(copy.deepcopy(action))
        except RecursionError:
            self.actions.append(action)

    def returned(self, result: StepResult) -> Step:
        """``result`` as the 5-tuple ``step`` returns, remembered as the latest one returned."""
        self.last = (result.observation, result.info)
        return result.as_tuple()

    def info(self, **extra: JSON) -> dict[str, JSON]:
        """A step's ``info``: the episode, the step and the virtual clock after it."""
        return {
            "episode_id": self.episode_id,
            "step": self.step_count,
            "clock": self.controls.clock.isoformat(),
            **extra,
        }
