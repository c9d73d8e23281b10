"""PostgresTemplate: golden databases cloned with ``CREATE DATABASE ... TEMPLATE ... STRATEGY FILE_COPY``.

A golden is built once per key into a scratch database and published by renaming it, so a crash
mid-build never leaves a half-built golden under the real name. Episode copies are named after their
process (``statekit.strategies.naming``), and the orphans of dead processes are dropped when a new
``PostgresTemplate`` starts. Goldens stay on the server: that is the snapshot cache, and it survives
process restarts.

Before a golden is published the change journal is installed in it (``statekit.postgres.journal``),
so every copy records its own changes: a copy can be rewound in place and bookmarked in O(changes),
and its digest updated incrementally. A copy's ``World.handle`` is its ``Journal``. A server that does
not give statekit a superuser cannot host the journal; copies then only clone (``rewind`` says why).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from statekit.errors import ResetError, RewindError
from statekit.postgres.journal import DEFAULT_BOUND, Journal, Mark, install
from statekit.postgres.server import PostgresServer
from statekit.strategies.base import Builder, ResetStrategy, World
from statekit.strategies.naming import CopyNamer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _DatabaseMark:
    world_id: str
    mark: Mark


class PostgresTemplate(ResetStrategy):
    """Reset a PostgreSQL database by cloning a golden template (or rewinding a copy in place)."""

    name = "template"

    def __init__(
        self,
        server: PostgresServer,
        *,
        prefix: str = "sk",
        on_close: Callable[[], None] | None = None,
        journal_bound: int = DEFAULT_BOUND,
    ) -> None:
        self.server = server
        self._on_close = on_close
        self.names = CopyNamer(prefix)
        self.journal_bound = journal_bound
        self.journal_missing: str | None = None
        """Why goldens built here carry no journal (None when they do)."""
        self._marks: Counter[str] = Counter()
        self._lock = threading.Lock()
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
                if isinstance(source.handle, Journal):  # a template must have no connection, ours included
                    source.handle.close()
                self.server.create_database(scratch, template=source.id)
            else:
                url = self.server.create_database(scratch)
                source(World(id=scratch, location=url))
            self._install_journal(scratch)
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

    def _install_journal(self, database: str) -> None:
        """Capture on every table, an empty journal, the sequences' positions: before publishing."""
        missing = install(self.server.conninfo(database), bound=self.journal_bound)
        if missing and missing != self.journal_missing:
            log.warning("worlds on %s will be cloned, never rewound: %s", self.server.redacted(), missing)
        self.journal_missing = missing

    def restore(self, key: str) -> World:
        golden = self.names.golden(key)
        name = self.names.episode()
        try:
            url = self.server.create_database(name, template=golden)
        except BaseException:
            self.server.drop_database(name)
            raise
        journal = Journal(self.server.conninfo(name), bound=self.journal_bound)
        journal.unavailable()  # connects now: a restore is what a reset pays for, the first step is not
        return World(id=name, location=url, handle=journal)

    def discard(self, world: World) -> None:
        if isinstance(world.handle, Journal):
            world.handle.close()
        with self._lock:
            self._marks.pop(world.id, None)
        self.server.drop_database(world.id)

    # -- rewinding in place ---------------------------------------------------------------------
    @staticmethod
    def _journal(world: World) -> Journal:
        if not isinstance(world.handle, Journal):
            raise RewindError(f"world {world.id!r} was not restored by a PostgresTemplate")
        return world.handle

    def mark(self, world: World) -> Any:
        mark = _DatabaseMark(world.id, self._journal(world).mark())
        with self._lock:
            self._marks[world.id] += 1
        return mark

    def rewind(self, world: World, to: Any = None) -> None:
        if to is not None and not (isinstance(to, _DatabaseMark) and to.world_id == world.id):
            raise RewindError(f"that bookmark belongs to another world than {world.id!r}")
        with self._lock:
            marked = self._marks[world.id] > 0
        # back at the golden with no bookmark left: the journal can be emptied, so it stays small
        self._journal(world).move(None if to is None else to.mark, reset=to is None and not marked)

    def forget(self, mark: Any) -> None:
        if isinstance(mark, _DatabaseMark):
            with self._lock:
                if self._marks[mark.world_id] > 0:
                    self._marks[mark.world_id] -= 1

    def drop(self, key: str) -> None:
        self.server.drop_database(self.names.golden(key))

    def footprint(self, key: str) -> int | None:
        return self.server.database_size(self.names.golden(key))

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
