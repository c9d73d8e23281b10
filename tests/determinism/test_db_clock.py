"""The database's own clock caught at run time, on a real PostgreSQL world with a change journal."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

import statekit
from statekit.adapter import Adapter, EnvSettings, Episode, Outcome
from statekit.capabilities import CheckHints
from statekit.checks import check_controls
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
        "tables": {
            "items": {
                "key": ["id"],
                "include": ["id", "name"],
                "exclude": {
                    "touched_at": "when it was touched",
                    "noted_at": "when it was noted",
                    "added_at": "DEFAULT now(): the database's clock, kept out",
                    "changed_at": "set by a trigger from now()",
                },
            }
        },
        "ignored_tables": {},
    }
)
_NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": False}
SQL = {
    "stamp_app": "UPDATE items SET touched_at = %(now)s WHERE name = %(name)s",  # the app's (virtual) clock
    "stamp_db": "UPDATE items SET touched_at = now() WHERE name = %(name)s",  # the server's own clock
    "note_db": "UPDATE items SET noted_at = localtimestamp WHERE name = %(name)s",  # naive, server's
    "add": "INSERT INTO items (name) VALUES (%(name)s || '-new')",  # added_at's DEFAULT now() fires
    "rename": "UPDATE items SET name = name || '!' WHERE name = %(name)s",  # a trigger stamps changed_at
}
TOOLS = [Tool(name, f"{name} an item.", _NAME) for name in SQL] + [
    Tool("submit", "Finish.", {"type": "object", "additionalProperties": False})
]


class StampEpisode(Episode):
    def __init__(self, conninfo: str, task: Task) -> None:
        self.conninfo, self.task, self.tools = conninfo, task, TOOLS

    def observe(self) -> JSON:
        return {"task": self.task.prompt}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(SQL[tool], {"name": arguments.get("name", "item-1"), "now": datetime.now(UTC)})
        return Outcome({"done": tool})

    def score(self) -> float:
        return 1.0


class StampedItems(Adapter, CheckHints):
    name = "stamped_items"
    strategies = ("rewind",)
    probe_tasks = {"clock": "stamp"}

    def __init__(self, db_url: str | None = None) -> None:
        self.db_url = db_url

    def fingerprint(self) -> dict[str, str]:
        return {"app": self.name, "builder": "1"}

    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        lease = ServerLease(options.get("db_url") or self.db_url)
        return Rewinding(PostgresTemplate(lease.server, prefix="skstamp", on_close=lease.close))

    def build_world(self, world: World, seed: int) -> None:
        with psycopg.connect(to_conninfo(world.location), autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE items (id serial PRIMARY KEY, name text UNIQUE NOT NULL, "
                "touched_at timestamptz, noted_at timestamp, added_at timestamptz DEFAULT now(), "
                "changed_at timestamptz)"
            )
            conn.execute(
                "CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN NEW.changed_at := now(); RETURN NEW; END $$"
            )
            conn.execute(
                "CREATE TRIGGER stamp BEFORE UPDATE OF name ON items FOR EACH ROW EXECUTE FUNCTION stamp()"
            )
            conn.execute("INSERT INTO items (name) SELECT 'item-' || i FROM generate_series(1, 3) i")

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
        assert isinstance(world.handle, Journal)
        task = task or Task(id=f"stamp-{seed}", kind="stamp", prompt="Stamp item-1.", max_steps=10)
        return StampEpisode(world.handle.conninfo, task)

    def digest(self, world: World, since: Digest | None = None) -> Digest:
        assert isinstance(world.handle, Journal)
        return postgres_digest(world.handle, SPEC, since=since)

    def task_kinds(self) -> list[str]:
        return ["stamp"]

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        return [{"tool": "stamp_db", "name": "item-1"}, {"tool": "submit"}]


def steps(db_url: str, actions: list[str], disabled: tuple[str, ...] = ()) -> list[tuple[JSON, dict]]:
    with statekit.make(StampedItems(db_url), disable_controls=disabled) as env:
        env.reset(seed=1)
        return [(obs, info) for obs, _, _, _, info in (env.step({"tool": a}) for a in actions)]


def test_the_database_clock_is_reported_in_info(pg_url: str) -> None:
    (_, app_info), (db_obs, db_info), (_, note_info), (_, add_info), (_, rename_info) = steps(
        pg_url, ["stamp_app", "stamp_db", "note_db", "add", "rename"]
    )
    assert "determinism" not in app_info, "the application's own (virtual) time is no leak"
    assert db_obs == {"done": "stamp_db"}, "the agent's observation is what the application answered"
    (found,) = db_info["determinism"]
    assert (found["control"], found["code"], found["columns"]) == (
        "db_clock",
        "database_clock",
        ["items.touched_at"],
    )
    assert "items.touched_at = " in str(found["message"]) and "now()" in str(found["message"])
    assert note_info["determinism"][0]["columns"] == ["items.noted_at"], "naive timestamps too"
    assert "determinism" not in add_info, "a DEFAULT now() is the coverage check's to judge"
    assert rename_info["determinism"][0]["columns"] == ["items.changed_at"], "a trigger's now()"


def test_without_the_control_the_leak_goes_unnoticed(pg_url: str) -> None:
    ((_, info),) = steps(pg_url, ["stamp_db"], disabled=("db_clock",))
    assert "determinism" not in info


@pytest.mark.parametrize("control", ["clock"])
def test_statekit_check_fails_a_world_the_database_clock_writes(pg_url: str, control: str) -> None:
    """The digest excludes the column, so replays match: only the control's report shows the leak."""
    results = check_controls(
        lambda disabled: statekit.make(StampedItems(pg_url), disable_controls=disabled), seed=2, pause=0
    )
    problem = results[control]
    assert problem is not None and problem.startswith(
        "with every control on, a control reported: db_clock: the real time was written to"
    )
