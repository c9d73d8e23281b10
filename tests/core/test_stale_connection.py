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
    assert "pool_pre_ping=True" in message and "DjangoProject" in message
    assert isinstance(stale.value.__cause__, psycopg.OperationalError)


class Conn:
    """The application: a connection it keeps."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self.db = psycopg.connect(conninfo, autocommit=True)

    def execute(self, query: str) -> Any:
        return self.db.execute(query)


class ReconnectingShelf(StickyShelf):
    """The same application, told by ``on_rewind`` that its world was put back: it reconnects."""

    name = "reconnecting_shelf"
    attached = rewinds = 0

    def attach(self, world: World, settings: EnvSettings) -> Conn:
        type(self).attached += 1
        return Conn(self.conninfo(world))

    def detach(self, app: Any) -> None:
        app.db.close()

    def on_rewind(self, app: Any) -> None:
        type(self).rewinds += 1
        app.db.close()
        app.db = psycopg.connect(app.conninfo, autocommit=True)


def test_on_rewind_lets_an_application_kept_warm_renew_what_a_rewind_ended() -> None:
    with statekit.make(ReconnectingShelf()) as env:
        for _ in range(3):  # the same seed: one world, rewound between the episodes
            env.reset(seed=1)
            env.step({"tool": "shelf"})
    assert (ReconnectingShelf.attached, ReconnectingShelf.rewinds) == (1, 2)
