"""PostgresTemplate: golden databases cloned with ``CREATE DATABASE ... TEMPLATE ... STRATEGY FILE_COPY``.

A golden is built once per key into a scratch database and published by renaming it, so a crash
mid-build never leaves a half-built golden under the real name. Episode copies are named after their
process (``statekit.strategies.naming``), and the orphans of dead processes are dropped when a new
``PostgresTemplate`` starts. Goldens stay on the server: that is the snapshot cache, and it survives
process restarts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from statekit.errors import ResetError
from statekit.postgres.server import PostgresServer
from statekit.strategies.base import Builder, ResetStrategy, World
from statekit.strategies.naming import CopyNamer

log = logging.getLogger(__name__)


class PostgresTemplate(ResetStrategy):
    """Reset a PostgreSQL database by cloning a golden template."""

    name = "template"

    def __init__(
        self, server: PostgresServer, *, prefix: str = "sk", on_close: Callable[[], None] | None = None
    ) -> None:
        self.server = server
        self._on_close = on_close
        self.names = CopyNamer(prefix)
        self.swept = self.sweep_orphans()

    def sweep_orphans(self) -> list[str]:
        """Drop build and episode databases left by dead processes on this host; return their names."""
        dropped = []
        for name in self.server.databases(f"{self.names.prefix}_"):
            if self.names.is_orphan(name):
                log.warning("dropping orphan database %s", name)
                self.server.drop_database(name)
                dropped.append(name)
        return dropped

    def has(self, key: str) -> bool:
        return self.server.exists(self.names.golden(key))

    def capture(self, key: str, source: Builder | World) -> None:
        golden = self.names.golden(key)
        if self.server.exists(golden):
            return
        scratch = self.names.building(key)
        self.server.drop_database(scratch)
        try:
            if isinstance(source, World):
                self.server.create_database(scratch, template=source.id)
            else:
                url = self.server.create_database(scratch)
                source(World(id=scratch, location=url))
                # Frozen and analysed before it is published: autovacuum would otherwise add visibility
                # and free-space maps to the golden later (~4 % of a claims world), past its recorded size.
                self.server.vacuum(scratch)
            if self.server.exists(golden):  # another process published it first
                self.server.drop_database(scratch)
                return
            self.server.rename_database(scratch, golden)
        except BaseException as exc:
            self.server.drop_database(scratch)
            if isinstance(exc, Exception) and self.server.exists(golden):
                return  # lost a publish race to an identical build (another session or process)
            if isinstance(exc, ResetError | KeyboardInterrupt):
                raise
            raise ResetError(f"building golden {golden!r} failed: {exc}") from exc

    def restore(self, key: str) -> World:
        golden = self.names.golden(key)
        name = self.names.episode()
        try:
            url = self.server.create_database(name, template=golden)
        except BaseException:
            self.server.drop_database(name)
            raise
        return World(id=name, location=url)

    def discard(self, world: World) -> None:
        self.server.drop_database(world.id)

    def drop(self, key: str) -> None:
        self.server.drop_database(self.names.golden(key))

    def footprint(self, key: str) -> int | None:
        return self.server.database_size(self.names.golden(key))

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
