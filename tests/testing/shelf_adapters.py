"""A small shop shelf on a real PostgreSQL world (written against the adapter kit), and deliberately
broken variants, one per check the checker and the pytest plugin must fail:

- ``Shelf``: healthy. Task "bump" (look at the shelf, add one to an item, submit) and "bump_blind"
  (the same without looking). Looking writes a row to ``visits``, a table the spec ignores (like a
  login session): the checker reports that "bump" writes it and "bump_blind" does not.
- ``NoisyShelf``: the bump's answer carries the database connection's process id (nondeterminism no
  control removes), so replays differ.
- ``SeedlessShelf``: the world builder ignores its seed, so every seed gives the same world.
- ``WeakShelf``: the verifier checks only that the target went up, so bumping every item wins.
"""

from __future__ import annotations

import random
import re
from typing import Any

import psycopg

from statekit.kit import (
    JSON,
    CheckHints,
    DigestSpec,
    EnvSettings,
    Episode,
    Outcome,
    SqlAdapter,
    Task,
    Tool,
    ToolSchemas,
    World,
)
from tests.testing.order_adapter import BUMP

SPEC = DigestSpec.from_dict(
    {
        "format": 1,
        "tables": {"items": {"key": ["id"], "include": ["id", "name", "qty"]}},
        "ignored_tables": {"visits": "a row per look at the shelf: never task state"},
    }
)
ITEMS = 12
_NO_ARGS = {"type": "object", "additionalProperties": False}
TOOLS = [
    Tool("shelf", "Every item and its quantity.", _NO_ARGS),
    BUMP,
    Tool("submit", "Finish the task.", _NO_ARGS),
]


def quantities(seed: int) -> dict[str, int]:
    """The seed's initial quantities (what the builder writes and the verifier compares with)."""
    rng = random.Random(seed)
    return {f"item-{i}": rng.randrange(0, 50) for i in range(1, ITEMS + 1)}


def target_of(task: Task) -> str:
    """The item a task's prompt names."""
    found = re.search(r"item-[0-9]+", task.prompt)
    assert found, task.prompt
    return found.group()


class ShelfEpisode(Episode):
    def __init__(self, adapter: Shelf, conninfo: str, task: Task, seed: int) -> None:
        self.adapter, self.conninfo, self.task, self.tools, self.seed = adapter, conninfo, task, TOOLS, seed

    def observe(self) -> JSON:
        return {"task": self.task.prompt}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            if tool == "shelf":
                conn.execute("INSERT INTO visits DEFAULT VALUES")
                rows = conn.execute("SELECT name, qty FROM items ORDER BY id").fetchall()
                return Outcome({"items": [{"name": n, "qty": q} for n, q in rows]})
            conn.execute("UPDATE items SET qty = qty + 1 WHERE name = %s", (arguments["name"],))
            answer: dict[str, JSON] = {"bumped": arguments["name"]}
            if self.adapter.noisy:
                row = conn.execute("SELECT pg_backend_pid()").fetchone()
                answer["served_by"] = row[0] if row else None
            return Outcome(answer)

    def score(self) -> float:
        target = target_of(self.task)
        with psycopg.connect(self.conninfo) as conn:
            now: dict[str, int] = dict(conn.execute("SELECT name, qty FROM items").fetchall())
        initial = quantities(self.seed if not self.adapter.seedless else 0)
        if self.adapter.weak:
            return 1.0 if now[target] > initial[target] else 0.0
        return 1.0 if now == {**initial, target: initial[target] + 1} else 0.0


class Shelf(SqlAdapter, CheckHints, ToolSchemas):
    name = "shelf"
    spec = SPEC
    deterministic_start = True
    noisy = seedless = weak = False

    def fingerprint(self) -> dict[str, str]:
        return {"app": self.name, "builder": "1"}

    def build_world(self, world: World, seed: int) -> None:
        with psycopg.connect(self.conninfo(world), autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id serial PRIMARY KEY, name text UNIQUE, qty int NOT NULL)")
            conn.execute("CREATE TABLE visits (id serial PRIMARY KEY)")
            initial = quantities(0 if self.seedless else seed)
            for name, qty in initial.items():
                conn.execute("INSERT INTO items (name, qty) VALUES (%s, %s)", (name, qty))

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
        if task is None:
            kind = str(options.get("task", "bump"))
            target = random.Random(f"task:{seed}").choice(sorted(quantities(seed)))
            prompt = {
                "bump": f"Look at the shelf, then bump {target} once and submit. Change nothing else.",
                "bump_blind": f"Bump {target} once, then submit. Change nothing else.",
            }[kind]
            task = Task(id=f"shelf-{kind}-{seed}", kind=kind, prompt=prompt, max_steps=30)
        return ShelfEpisode(self, self.conninfo(world), task, seed)

    def task_kinds(self) -> list[str]:
        return ["bump", "bump_blind"]

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        bump: list[dict[str, JSON]] = [{"tool": "bump", "name": target_of(task)}, {"tool": "submit"}]
        return [{"tool": "shelf"}, *bump] if task.kind == "bump" else bump

    def declared_tools(self) -> list[Tool]:
        return list(TOOLS)


class NoisyShelf(Shelf):
    name = "noisy_shelf"
    noisy = True


class SeedlessShelf(Shelf):
    name = "seedless_shelf"
    seedless = True


class WeakShelf(Shelf):
    name = "weak_shelf"
    weak = True


class SpeclessShelf(Shelf):
    """A shelf whose author has not written its digest spec yet (``spec init`` drafts it)."""

    name = "specless_shelf"
    spec = None
