"""The ledger plus a ``block`` tool: a step that waits, so a test can kill its worker mid-step."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from statekit.adapter import EnvSettings, Episode, Outcome
from statekit.contract import JSON, Task, Tool
from statekit.strategies.base import World
from statekit.testing.ledger import TOOLS, LedgerAdapter, LedgerEpisode

BLOCK = Tool("block", "Wait (a test kills the process meanwhile).", {"type": "object"})


class BlockingEpisode(LedgerEpisode):
    def __init__(self, store: dict[str, Any], task: Task, pid_file: Path) -> None:
        super().__init__(store, task)
        self.tools = [*TOOLS, BLOCK]
        self.pid_file = pid_file

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool != "block":
            return super().call(tool, arguments)
        self.pid_file.write_text(str(os.getpid()))
        time.sleep(120)
        return Outcome({"error": {"code": "not_killed", "message": "nobody killed this process"}})


class BlockingLedger(LedgerAdapter):
    name = "blocking_ledger"

    def __init__(self, pid_file: str, accounts: int = 4) -> None:
        super().__init__(accounts)
        self.pid_file = Path(pid_file)

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
        episode = super().start_episode(
            world, seed=seed, options=options, task=task, app=app, settings=settings
        )
        assert isinstance(episode, LedgerEpisode)
        return BlockingEpisode(episode.store, episode.task, self.pid_file)
