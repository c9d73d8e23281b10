"""A tiny in-memory application and its adapter: the smallest complete statekit environment.

It exists so the core contract can be tested in milliseconds (and read as a template for adapters).
Like a real application it draws ids from ``uuid.uuid4`` and timestamps from the clock, so the
determinism controls have real work to do. Task: move an amount between two accounts.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from statekit.adapter import Adapter, EnvSettings, Episode, Outcome
from statekit.capabilities import CheckHints, StateDumps, ToolSchemas
from statekit.collateral import Allow, Expectation
from statekit.contract import JSON, Task, Tool
from statekit.digest.compute import Digest
from statekit.digest.dump import StateDump, TableDump
from statekit.errors import ConfigError
from statekit.rollouts import Turn
from statekit.strategies.base import ResetStrategy
from statekit.strategies.memory import InMemory
from statekit.strategies.rewinding import Rewinding
from statekit.world import World

TOOLS = [
    Tool(
        "balances", "List every account and its balance.", {"type": "object", "additionalProperties": False}
    ),
    Tool(
        "transfer",
        "Move an amount (whole cents) from one account to another.",
        {
            "type": "object",
            "properties": {
                "source": {"type": "string"},
                "target": {"type": "string"},
                "cents": {"type": "integer", "minimum": 1},
            },
            "required": ["source", "target", "cents"],
            "additionalProperties": False,
        },
    ),
    Tool("submit", "Finish the task.", {"type": "object", "additionalProperties": False}),
]


@dataclass(frozen=True)
class LedgerTask(Task):
    """A Task plus its hidden facts (never in an observation, never in the world)."""

    facts: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


class LedgerEpisode(Episode):
    task: LedgerTask

    def __init__(self, store: dict[str, Any], task: LedgerTask) -> None:
        self.store = store
        self.task = task
        self.tools = TOOLS

    def observe(self) -> JSON:
        return {"task": self.task.prompt}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        accounts = self.store["accounts"]
        if tool == "balances":
            return Outcome({"accounts": dict(sorted(accounts.items()))})
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        source, target, cents = str(arguments["source"]), str(arguments["target"]), int(arguments["cents"])
        if source not in accounts or target not in accounts:
            return Outcome({"error": {"code": "unknown_account", "message": "no such account"}})
        if accounts[source] < cents:
            return Outcome({"error": {"code": "insufficient_funds", "message": f"{source} has too little"}})
        accounts[source] -= cents
        accounts[target] += cents
        entry = {"id": str(uuid.uuid4()), "at": datetime.now(UTC).isoformat(), "cents": cents}
        self.store["journal"].append({**entry, "source": source, "target": target})
        return Outcome({"transfer": entry})

    def score(self) -> float:
        facts = self.task.facts
        return 1.0 if self.store["accounts"][facts["target"]] == facts["expected"] else 0.0

    def expected_changes(self) -> Expectation:
        """The two accounts move, and the journal gains transfers between them; nothing else."""
        pair = {self.task.facts["source"], self.task.facts["target"]}
        return Expectation(
            (
                Allow.changed("accounts", where=lambda row: row["name"] in pair),
                Allow.added("journal", where=lambda row: {row["source"], row["target"]} <= pair),
            )
        )


class LedgerAdapter(Adapter, StateDumps, CheckHints, ToolSchemas):
    """Worlds are dicts in an ``InMemory`` strategy; the digest covers accounts and the journal."""

    name = "ledger"
    strategies = ("memory", "rewind")
    deterministic_start = True

    def __init__(self, accounts: int = 4) -> None:
        self.accounts = accounts

    def fingerprint(self) -> dict[str, str]:
        return {"app": "ledger-1", "builder": "1", "accounts": str(self.accounts)}

    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        if name not in self.strategies:
            raise ConfigError(f"ledger offers strategies {list(self.strategies)}, not {name!r}")
        return InMemory() if name == "memory" else Rewinding(InMemory())

    def build_world(self, world: World, seed: int) -> None:
        rng = random.Random(seed)
        names = sorted(rng.sample(["alice", "bob", "carol", "dave", "erin", "frank"], self.accounts))
        world.handle["accounts"] = {name: rng.randrange(1_000, 10_000) for name in names}
        world.handle["journal"] = [
            {
                "id": str(uuid.uuid4()),
                "at": datetime.now(UTC).isoformat(),
                "cents": 0,
                "source": "",
                "target": names[0],
            }
        ]

    def reset_options(self) -> dict[str, dict[str, JSON]]:
        steps = {"type": ["integer", "string"], "description": "the step cap (digits)"}
        return {**super().reset_options(), "max_steps": steps}

    def check_options(self, options: dict[str, JSON]) -> None:
        steps = options.get("max_steps", 8)
        if isinstance(steps, bool) or not isinstance(steps, int | str) or not str(steps).isdigit():
            raise ValueError(f"max_steps must be a positive integer, got {steps!r}")

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
        store = world.handle
        if task is None:
            rng = random.Random(f"task:{seed}")
            source, target = rng.sample(sorted(store["accounts"]), 2)
            cents = rng.randrange(1, store["accounts"][source])
            task = LedgerTask(
                id=f"ledger-{seed}",
                kind="transfer",
                prompt=f"Move {cents} cents from {source} to {target}, then submit. Change nothing else.",
                max_steps=int(options.get("max_steps", 8)),
                facts={"source": source, "target": target, "expected": store["accounts"][target] + cents},
            )
        if not isinstance(task, LedgerTask):
            raise ConfigError("a ledger episode needs a ledger task")
        return LedgerEpisode(store, task)

    def dump(self, world: World) -> StateDump:
        store = world.handle
        accounts = [
            {"key": [k], "row": {"name": k, "cents": v}} for k, v in sorted(store["accounts"].items())
        ]
        journal = [{"key": [i], "row": entry} for i, entry in enumerate(store["journal"])]
        return StateDump(
            tables={
                "accounts": TableDump(key=["name"], ordered=True, rows=accounts),
                "journal": TableDump(key=["position"], ordered=True, rows=journal),
            }
        )

    def digest(self, world: World, since: Digest | None = None) -> Digest:
        return self.dump(world).digest()

    def check_schema(self, world: World) -> list[str]:
        """The store's parts that the dump leaves out (none: every part is a digested table)."""
        return sorted(set(world.handle) - set(self.dump(world).tables))

    def task_kinds(self) -> list[str]:
        return ["transfer"]

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        words = task.prompt.split()
        cents, source, target = int(words[1]), words[4], words[6].rstrip(",")
        return [{"tool": "transfer", "source": source, "target": target, "cents": cents}, {"tool": "submit"}]

    def declared_tools(self) -> list[Tool]:
        return list(TOOLS)


def ledger_policy(turn: Turn) -> JSON:
    """Solves the ledger's task from what it sees: look at the balances, make the transfer the prompt
    asks for, submit. A pure function of the turn, so rollouts with it are reproducible anywhere."""
    if not turn.actions:
        return {"tool": "balances"}
    if len(turn.actions) == 1:
        prompt = str(turn.observations[0]["task"])
        task = Task(id="", kind="transfer", prompt=prompt, max_steps=0)
        return LedgerAdapter.reference_actions(LedgerAdapter(), task)[0]
    return {"tool": "submit"}
