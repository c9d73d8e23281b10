"""A help desk held in memory, with a deliberately weak verifier (for the exploit-probe tests).

The task: "Close ticket T-007, then submit." ``WeakDesk`` checks only that the target is closed, so
closing every ticket in sight wins; ``StrictDesk`` also declares the one change it expects, so the
same policy scores 0. Nothing here tells the probes which tool closes or which tickets exist: they
find ``close_ticket`` and the ticket ids from the tools' schemas and ``list_tickets``'s answers.
"""

from __future__ import annotations

import random
from typing import Any

from statekit import ConfigError
from statekit.digest.compute import Digest
from statekit.digest.dump import StateDump, TableDump
from statekit.kit import (
    Adapter,
    Allow,
    CheckHints,
    EnvSettings,
    Episode,
    Expectation,
    Outcome,
    StateDumps,
    Task,
    Tool,
    ToolSchemas,
    World,
)
from statekit.strategies.memory import InMemory

_TICKET = {"type": "string", "pattern": "^T-[0-9]{3}$"}
TOOLS = [
    Tool("list_tickets", "Every ticket and its state.", {"type": "object", "properties": {}}, read_only=True),
    Tool(
        "close_ticket",
        "Close one ticket.",
        {"type": "object", "properties": {"ticket": _TICKET}, "required": ["ticket"]},
    ),
    Tool("submit", "Finish the task.", {"type": "object", "properties": {}}),
]


class DeskEpisode(Episode):
    def __init__(self, tickets: dict[str, str], task: Task, target: str, strict: bool) -> None:
        self.tickets, self.task, self.tools = tickets, task, TOOLS
        self.target, self.strict = target, strict

    def observe(self) -> Any:
        return {"task": self.task.prompt}

    def call(self, tool: str, arguments: dict[str, Any]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        if tool == "list_tickets":
            return Outcome({"tickets": [{"ticket": t, "state": s} for t, s in sorted(self.tickets.items())]})
        ticket = str(arguments["ticket"])
        if ticket not in self.tickets:
            return Outcome({"error": f"no ticket {ticket}"})
        self.tickets[ticket] = "closed"
        return Outcome({"closed": ticket})

    def score(self) -> float:
        return 1.0 if self.tickets[self.target] == "closed" else 0.0  # the target row, and nothing else

    def expected_changes(self) -> Expectation | None:
        return Expectation((Allow.changed("tickets", key=[self.target]),)) if self.strict else None


class WeakDesk(Adapter, StateDumps, CheckHints, ToolSchemas):
    name = "desk"
    strategies = ("memory",)
    strict = False

    def fingerprint(self) -> dict[str, str]:
        return {"app": "desk-1", "strict": str(self.strict)}

    def make_strategy(self, name: str, **options: Any) -> InMemory:
        if name != "memory":
            raise ConfigError(f"the desk offers only the 'memory' strategy, not {name!r}")
        return InMemory()

    def build_world(self, world: World, seed: int) -> None:
        rng = random.Random(seed)
        world.handle["tickets"] = {f"T-{n:03d}": rng.choice(["open", "open", "closed"]) for n in range(1, 13)}
        world.handle["tickets"][f"T-{seed % 12 + 1:03d}"] = "open"

    def start_episode(
        self,
        world: World,
        *,
        seed: int,
        options: dict[str, Any],
        task: Task | None,
        app: Any,
        settings: EnvSettings,
    ) -> Episode:
        target = f"T-{seed % 12 + 1:03d}"
        task = task or Task(f"close-{target}", "close_ticket", self.prompt.format(target=target), 10)
        return self.episode(world.handle["tickets"], task, target)

    prompt = "Close ticket {target}, then submit."

    def episode(self, tickets: dict[str, str], task: Task, target: str) -> DeskEpisode:
        return DeskEpisode(tickets, task, target, self.strict)

    def dump(self, world: World) -> StateDump:
        rows = [
            {"key": [t], "row": {"ticket": t, "state": s}} for t, s in sorted(world.handle["tickets"].items())
        ]
        return StateDump(tables={"tickets": TableDump(key=["ticket"], ordered=True, rows=rows)})

    def digest(self, world: World, since: Digest | None = None) -> Digest:
        return self.dump(world).digest()

    def task_kinds(self) -> list[str]:
        return ["close_ticket"]

    def reference_actions(self, task: Task) -> list[dict[str, Any]]:
        return [{"tool": "close_ticket", "ticket": task.id.removeprefix("close-")}, {"tool": "submit"}]

    def declared_tools(self) -> list[Tool]:
        return list(TOOLS)


class StrictDesk(WeakDesk):
    strict = True


PAGE = {"type": "integer", "minimum": 1, "maximum": 20}
PAGED_TOOLS = [
    Tool(
        "list_tickets",
        "Tickets, three to a page.",
        {"type": "object", "properties": {"page": PAGE}},
        read_only=True,
    ),
    *TOOLS[1:],
]


class PagedEpisode(DeskEpisode):
    hidden = False

    def call(self, tool: str, arguments: dict[str, Any]) -> Outcome:
        if tool != "list_tickets":
            return super().call(tool, arguments)
        page = int(arguments.get("page", 1))
        shown = [] if self.hidden else sorted(self.tickets.items())[3 * (page - 1) : 3 * page]
        return Outcome({"page": page, "tickets": [{"ticket": t, "state": s} for t, s in shown]})


class PagedDesk(StrictDesk):
    """Tickets listed three to a page (``page`` 1-20: past the fourth, pages are empty) under a prompt that
    names none: the probes find tickets only on the first pages. ``HiddenDesk`` lists none at all."""

    name = "paged_desk"
    hidden = False

    def fingerprint(self) -> dict[str, str]:
        return {"app": "paged-desk-1"}

    prompt = "Close the ticket you were given, then submit."

    def episode(self, tickets: dict[str, str], task: Task, target: str) -> DeskEpisode:
        episode = PagedEpisode(tickets, task, target, self.strict)
        episode.tools, episode.hidden = PAGED_TOOLS, self.hidden
        return episode

    def declared_tools(self) -> list[Tool]:
        return list(PAGED_TOOLS)


class HiddenDesk(PagedDesk):
    hidden = True
