"""A deliberately order-dependent SQL adapter: its ``top`` tool reads without ORDER BY.

On a fresh clone rows come back in insertion order; after a rewind, the rows an episode touched sit
at the end of the table, so ``top`` answers differently. ``SortedItems`` orders its read and passes.
"""

from __future__ import annotations

from typing import Any

import psycopg

from statekit.adapter import Adapter, Episode, Outcome
from statekit.contract import JSON, Task, Tool
from statekit.digest.compute import Digest
from statekit.digest.postgres import postgres_digest
from statekit.digest.spec import DigestSpec
from statekit.postgres import ServerLease
from statekit.postgres.journal import Journal
from statekit.postgres.server import to_conninfo
from statekit.strategies.base import ResetStrategy, World
from statekit.strategies.pg_template import PostgresTemplate
from statekit.strategies.rewinding import Rewinding

SPEC = DigestSpec.from_dict(
    {
        "format": 1,
        "tables": {"items": {"key": ["id"], "include": ["id", "name", "qty"]}},
        "ignored_tables": {},
    }
)
_NAME = {"type": "string", "pattern": "^item-[0-9]+$"}
TOOLS = [
    Tool("top", "The first five items.", {"type": "object", "additionalProperties": False}),
    Tool(
        "bump",
        "Add one to an item's quantity.",
        {
            "type": "object",
            "properties": {"name": _NAME},
            "required": ["name"],
            "additionalProperties": False,
        },
    ),
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


class UnsortedItems(Adapter):
    name = "unsorted_items"
    strategies = ("rewind",)
    order = ""

    def __init__(self, db_url: str | None = None) -> None:
        self.db_url = db_url

    def fingerprint(self) -> dict[str, str]:
        return {"app": self.name, "builder": "1"}

    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        lease = ServerLease(options.get("db_url") or self.db_url)
        return Rewinding(PostgresTemplate(lease.server, prefix="skord", on_close=lease.close))

    def build_world(self, world: World, seed: int) -> None:
        with psycopg.connect(to_conninfo(world.location), autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id serial PRIMARY KEY, name text UNIQUE, qty int NOT NULL)")
            conn.execute(
                "INSERT INTO items (name, qty) SELECT 'item-' || i, %s FROM generate_series(1, 20) i",
                (seed % 3,),
            )

    def start_episode(
        self, world: World, *, seed: int, options: dict[str, JSON], task: Task | None, app: Any = None
    ) -> Episode:
        task = task or Task(
            id=f"items-{seed}", kind="bump", prompt="Bump item-1 once, then submit.", max_steps=40
        )
        assert isinstance(world.handle, Journal)
        return ItemsEpisode(world.handle.conninfo, task, self.order)

    def digest(self, world: World, since: Digest | None = None) -> Digest:
        assert isinstance(world.handle, Journal)
        return postgres_digest(world.handle, SPEC, since=since)

    def task_kinds(self) -> list[str]:
        return ["bump"]

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        return [{"tool": "bump", "name": f"item-{i}"} for i in range(1, 6)] + [{"tool": "submit"}]


class SortedItems(UnsortedItems):
    name = "sorted_items"
    order = "ORDER BY id"
