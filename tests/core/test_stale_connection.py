"""An application that keeps a database connection across episodes fails its next reset, since a rewind
ends every connection to the world: the error says so and what to do, never a bare OperationalError."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import statekit
from statekit.kit import JSON, EnvSettings, Episode, Task, World
from tests.testing.shelf_adapters import Shelf


class StickyShelf(Shelf):
    """Opens one connection per world when attached and reads through it at every episode's start."""

    name = "sticky_shelf"

    def attach(self, world: World, settings: EnvSettings) -> psycopg.Connection[Any]:
        return psycopg.connect(self.conninfo(world), autocommit=True)

    def detach(self, app: Any) -> None:
        app.close()

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
        app.execute("SELECT count(*) FROM items").fetchone()
        return super().start_episode(world, seed=seed, options=options, task=task, app=app, settings=settings)


def test_a_connection_kept_across_a_rewind_fails_the_reset_with_what_to_do() -> None:
    with statekit.make(StickyShelf()) as env:
        env.reset(seed=1)  # the first episode on this world: the kept connection is fresh
        env.step({"tool": "shelf"})
        with pytest.raises(statekit.ResetError) as stale:
            env.reset(seed=1)  # the world was rewound in place: its connections were ended
    message = str(stale.value)
    assert message.startswith("starting the episode failed: AdminShutdown: terminating connection"), message
    assert "statekit ends every connection to a world when it rewinds it" in message
    assert "pool_pre_ping=True" in message and "connections.close_all()" in message
    assert isinstance(stale.value.__cause__, psycopg.OperationalError)
