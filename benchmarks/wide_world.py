"""A wide world: ~100 small tables, each with its own sequence (what a third-party app with many tables
looks like to a reset). ``FILE_COPY`` clones pay per file, so such a world is slow to clone however
small it is; a rewind pays only for the rows an episode changed.

Tools: ``bump(table, row)`` updates one row, ``add(table)`` inserts one, ``submit`` ends the episode.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

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

TABLES = 100
ROWS = 20


def table_name(i: int) -> str:
    return f"t{i:03d}"


SPEC = DigestSpec.from_dict(
    {
        "format": 1,
        "tables": {
            table_name(i): {"key": ["id"], "include": ["id", "name", "qty", "note"]} for i in range(TABLES)
        },
        "ignored_tables": {},
    }
)
_TABLE = {"type": "integer", "minimum": 0, "maximum": TABLES - 1}
TOOLS = [
    Tool(
        "bump",
        "Add one to a row's quantity.",
        {
            "type": "object",
            "properties": {"table": _TABLE, "row": {"type": "integer", "minimum": 1, "maximum": ROWS}},
            "required": ["table", "row"],
            "additionalProperties": False,
        },
    ),
    Tool(
        "add",
        "Insert a row.",
        {
            "type": "object",
            "properties": {"table": _TABLE},
            "required": ["table"],
            "additionalProperties": False,
        },
    ),
    Tool("submit", "Finish.", {"type": "object", "additionalProperties": False}),
]


class WideEpisode(Episode):
    def __init__(self, conninfo: str, task: Task) -> None:
        self.conninfo, self.task, self.tools = conninfo, task, TOOLS
        self.conn: psycopg.Connection[Any] | None = None

    def observe(self) -> JSON:
        return {"task": self.task.prompt}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        if self.conn is None or self.conn.closed:
            self.conn = psycopg.connect(self.conninfo, autocommit=True)
        table = sql.Identifier(table_name(int(str(arguments["table"]))))
        if tool == "bump":
            self.conn.execute(
                sql.SQL("UPDATE {} SET qty = qty + 1 WHERE id = %s").format(table), (arguments["row"],)
            )
        else:
            self.conn.execute(sql.SQL("INSERT INTO {} (name, qty) VALUES ('new', 0)").format(table))
        return Outcome({"ok": tool})

    def score(self) -> float:
        return 0.0

    def quiesce(self) -> None:
        self.close()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class WideWorld(SqlAdapter, CheckHints):
    """``statekit.make(WideWorld)``; ``strategy="template"`` clones instead of rewinding."""

    name = "wide_world"
    spec = SPEC
    deterministic_start = True

    def fingerprint(self) -> dict[str, str]:
        return {"app": "wide-world", "builder": "1", "tables": str(TABLES), "rows": str(ROWS)}

    def build_world(self, world: World, seed: int) -> None:
        with psycopg.connect(self.conninfo(world), autocommit=True) as conn:
            for i in range(TABLES):
                table = sql.Identifier(table_name(i))
                conn.execute(
                    sql.SQL("CREATE TABLE {} (id serial PRIMARY KEY, name text, qty int, note text)").format(
                        table
                    )
                )
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (name, qty, note) "
                        "SELECT 'r' || g, %s, 'n' FROM generate_series(1, %s) g"
                    ).format(table),
                    (seed % 7, ROWS),
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
        task = task or Task(id=f"wide-{seed}", kind="bump", prompt="Change a few rows.", max_steps=50)
        return WideEpisode(self.conninfo(world), task)

    def task_kinds(self) -> list[str]:
        return ["bump"]

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        return [{"tool": "bump", "table": i * 7 % TABLES, "row": 1 + i % ROWS} for i in range(4)] + [
            {"tool": "submit"}
        ]
