"""A deliberately order-dependent SQL adapter: its ``top`` tool reads without ORDER BY.

On a fresh clone rows come back in insertion order; after a rewind, the rows an episode touched sit
at the end of the table, so ``top`` answers differently. ``SortedItems`` orders its read and passes.
"""

from __future__ import annotations

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
    World,
)

SPEC = DigestSpec.from_dict(
    {
        "format": 1,
        "tables": {"items": {"key": ["id"], "include": ["id", "name", "qty"]}},
        "ignored_tables": {},
    }
)
BUMP = Tool(
    "bump",
    "Add one to an item's quantity.",
    {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": "^item-[0-9]+$"}},
        "required": ["name"],
        "additionalProperties": False,
    },
)
"""The items adapters' one writing tool (the shelf adapters of ``shelf_adapters`` share it)."""
TOOLS = [
    Tool("top", "The first five items.", {"type": "object", "additionalProperties": False}),
    BUMP,
    Tool("submit", "Finish.", {"type": "object", "additionalProperties": False}),
]


class ItemsEpisode(Episode):
    def __init__(self, conninfo: str, task: Task, order: str) -> None:
        self.conninfo, self.task, self.tools, self.order = conninfo, task, TOOLS, order

    def observe(self) -> JSON:
        return {"task": self.task.prompt}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            if tool == "top":
                rows = conn.execute(f"SELECT name, qty FROM items {self.order} LIMIT 5").fetchall()
                return Outcome({"items": [{"name": n, "qty": q} for n, q in rows]})
            conn.execute("UPDATE items SET qty = qty + 1 WHERE name = %s", (arguments["name"],))
            return Outcome({"bumped": arguments["name"]})

    def score(self) -> float:
        with psycopg.connect(self.conninfo) as conn:
            row = conn.execute("SELECT qty FROM items WHERE name = 'item-1'").fetchone()
        return 1.0 if row and row[0] == 1 else 0.0


class UnsortedItems(SqlAdapter, CheckHints):
    """Written against the adapter kit: the builder, the episode and the task; the kit derives the
    rest (rewind/template strategies, digest, dump, coverage) from the spec."""

    name = "unsorted_items"
    strategies = ("rewind",)
    spec = SPEC
    order = ""

    def fingerprint(self) -> dict[str, str]:
        return {"app": self.name, "builder": "1"}

    def build_world(self, world: World, seed: int) -> None:
        with psycopg.connect(self.conninfo(world), autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id serial PRIMARY KEY, name text UNIQUE, qty int NOT NULL)")
            conn.execute(
                "INSERT INTO items (name, qty) SELECT 'item-' || i, %s FROM generate_series(1, 20) i",
                (seed % 3,),
            )

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
        task = task or Task(
            id=f"items-{seed}", kind="bump", prompt="Bump item-1 once, then submit.", max_steps=40
        )
        return ItemsEpisode(self.conninfo(world), task, self.order)

    def task_kinds(self) -> list[str]:
        return ["bump"]

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        return [{"tool": "bump", "name": f"item-{i}"} for i in range(1, 6)] + [{"tool": "submit"}]


class SortedItems(UnsortedItems):
    name = "sorted_items"
    order = "ORDER BY id"
