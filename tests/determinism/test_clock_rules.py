"""The virtual clock's rules, on a real world: a builder writes history before the episodes' start by
moving the clock back; ``start_episode`` may move it forward and a replayed deterministic start agrees
with the first one; what breaks a rule is a clear error naming the fix."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import statekit
from statekit.determinism.clock import EPISODE_START, epoch_for
from statekit.kit import JSON, EnvSettings, Episode, Outcome, Task, Tool, World, clock
from tests.testing.shelf_adapters import _NO_ARGS, TOOLS, Shelf, ShelfEpisode

SEED = 11


class DatedEpisode(ShelfEpisode):
    def __init__(self, adapter: Shelf, conninfo: str, task: Task, seed: int) -> None:
        super().__init__(adapter, conninfo, task, seed)
        self.tools = [
            *TOOLS,
            Tool("now", "The time.", _NO_ARGS),
            Tool("rewind_clock", "Turn it back.", _NO_ARGS),
        ]

    def observe(self) -> JSON:
        return {"task": self.task.prompt, "now": datetime.now(UTC).isoformat()}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "rewind_clock":  # an application that tries to turn the episode's time back
            clock().advance(-timedelta(days=1))
        if tool in ("now", "rewind_clock"):
            return Outcome({"now": datetime.now(UTC).isoformat()})
        return super().call(tool, arguments)


class Diary(Shelf):
    """A shelf whose builder writes a month of history, one day at a time, up to the episodes' start,
    and whose first start moves the clock two days on (the task is "set two days later")."""

    name = "diary"
    history: list[datetime]

    def __init__(self, *, ahead: timedelta = timedelta(0)) -> None:
        super().__init__()
        self.history, self.ahead = [], ahead

    def fingerprint(self) -> dict[str, str]:
        return {"app": "diary", "ahead": str(self.ahead)}

    def build_world(self, world: World, seed: int) -> None:
        super().build_world(world, seed)
        clock().advance(-timedelta(days=30))  # history is written backwards from the start
        for _ in range(30):
            self.history.append(datetime.now(UTC))
            clock().advance(timedelta(days=1))
        clock().advance(self.ahead)

    def start_episode(
        self,
        world: World,
        *,
        seed: int,
        options: dict[str, JSON],
        task: Task | None,
        app: Any,
        settings: EnvSettings,
    ) -> Episode:
        if task is None:  # searching for the task moves the clock; a replayed start is handed the task
            clock().advance(timedelta(days=2))
        episode = super().start_episode(
            world, seed=seed, options=options, task=task, app=app, settings=settings
        )
        assert isinstance(episode, ShelfEpisode)
        return DatedEpisode(self, episode.conninfo, episode.task, seed)


def test_history_lies_before_the_episode_and_a_replayed_start_sees_the_same_time() -> None:
    adapter = Diary()
    with statekit.make(adapter) as env:
        first, _ = env.reset(seed=SEED)
        first_step = env.step({"tool": "now"})[0]
        replayed, _ = env.reset(seed=SEED)  # the start remembered: start_episode is handed the task
        replayed_step = env.step({"tool": "now"})[0]
    start = epoch_for(SEED) + EPISODE_START + timedelta(days=2)
    assert len(adapter.history) == 30 and max(adapter.history) < epoch_for(SEED) + EPISODE_START
    assert datetime.fromisoformat(str(first["now"])) == start
    assert replayed == first, "a replayed deterministic start saw another time than the first"
    assert replayed_step == first_step == {"now": start.isoformat()}


def test_breaking_a_clock_rule_is_a_clear_error_that_names_the_fix() -> None:
    with pytest.raises(statekit.ResetError) as late, statekit.make(Diary(ahead=timedelta(days=1))) as env:
        env.reset(seed=SEED)
    assert "lies in their future" in str(late.value) and "move the clock back first" in str(late.value)
    with statekit.make(Diary()) as env:
        env.reset(seed=SEED)
        observation, reward, *_ = env.step({"tool": "rewind_clock"})
    assert reward == 0.0
    assert "only a world builder may move it back" in str(observation), observation
