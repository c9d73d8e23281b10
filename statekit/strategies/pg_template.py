"""PostgresTemplate: golden databases cloned with ``CREATE DATABASE ... TEMPLATE ... STRATEGY FILE_COPY``.

A golden is built once per key into a scratch database and published by renaming it, so a crash
mid-build never leaves a half-built golden under the real name. Episode copies are named after their
process (``statekit.strategies.naming``), and the orphans of dead processes are dropped when a new
``PostgresTemplate`` starts. Goldens stay on the server: that is the world cache, and it survives
process restarts.

Before a golden is published the change journal is installed in it (``statekit.postgres.journal``),
so every copy records its own changes: a copy can be rewound in place and bookmarked in O(changes),
and its digest updated incrementally. A copy's ``World.handle`` is its ``Journal`` (statekit's own
superuser connection); its ``World.location``, what the application is pointed at, names a login
role made for that copy alone (``statekit.postgres.roles``), which cannot alter, silence or reach
the journal. A server that does not give statekit a superuser cannot host the journal, and an adapter
whose application needs one (``app_role=False``) must not have one: copies then only clone (``rewind``
says why) and the application connects as statekit does.

Trust, but verify: a rewind checks, in O(1), what could change outside the journal's sight (settings
on the database or the role, its password), and one rewind in ``verify_every`` (drawn from the
operating system, so an episode cannot tell which) compares every row, sequence and catalog entry
with the golden's fingerprints, on a snapshot of the rewound world beside the next episode
(``postgres/audit.py``); a world that fails either is replaced by a clone (one that fails the
sampled check, at its next reset).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from statekit.entropy import true_randbelow
from statekit.errors import ResetError, RewindError, ServerDown
from statekit.postgres import roles
from statekit.postgres.journal import DEFAULT_BOUND, NEEDS_SUPERUSER, Journal, Mark, install
from statekit.postgres.server import PostgresServer
from statekit.postgres.watch import ServerWatch
from statekit.strategies.base import Builder, Capabilities, Health, ResetStrategy, World
from statekit.strategies.naming import CopyNamer

log = logging.getLogger(__name__)

_CHECKED: set[tuple[str, bool]] = set()
"""Servers whose databases open to every role were closed or named in a warning (once a process)."""

VERIFY_EVERY = 100
"""One rewind in this many (at random) is checked against the golden's fingerprints in full: O(rows),
about 6 ms on a claims world against 3 ms for a rewind, so it runs beside the next episode on a
snapshot taken at the rewind (``postgres/audit.py``); ``verify_every=1`` checks every rewind inside
it instead, before the copy is handed out."""


def _no_journal(app_role: bool) -> str:
    if not app_role:
        return "the adapter's application connects with statekit's own rights (app_role=False)"
    return NEEDS_SUPERUSER


def _restarted(started: datetime | None) -> str:
    when = started.isoformat() if started else "?"
    return f"the database server restarted at {when}, after the world was made"


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
        app_role: bool = True,
        verify_every: int = VERIFY_EVERY,
    ) -> None:
        if verify_every < 1:
            raise ValueError("verify_every must be at least 1 (1: verify every rewind)")
        self.server = server
        self._on_close = on_close
        self.names = CopyNamer(prefix)
        self.journal_bound = journal_bound
        self.verify_every = verify_every
        self.app_role = app_role and server.is_superuser()
        """Whether copies get a login role of their own (and goldens a journal)."""
        self.journal_missing: str | None = None if self.app_role else _no_journal(app_role)
        """Why goldens built here carry no journal (None when they do)."""
        self._marks: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._born: dict[str, datetime | None] = {}
        """Each live copy, and when the server's postmaster started as it was made."""
        self._gone: dict[str, str] = {}
        """Copies that died with their server (already dropped), and why: until they are discarded."""
        self.watch = ServerWatch.of(server.admin_conninfo, server.restart)
        if self.app_role:
            self._close_server()
        self.swept = self.sweep_orphans()
        self._listening = self.watch.listen(self._server_back)

    def _close_server(self) -> None:
        """A world's role must reach no database but its own. statekit's own databases are closed
        to ``PUBLIC`` when made; on a server statekit runs, so are ``postgres`` and ``template1``; on
        another, the databases still open to every role are named in a warning, once."""
        # a serving process makes a strategy per session: check once per server and per kind of access
        # (a server statekit runs closes what a server given by URL only warns about)
        checked = (self.server.admin_conninfo, self.server.restart is not None)
        if checked in _CHECKED:
            return
        with self.server.admin() as conn:
            reachable = roles.open_databases(conn)
            if self.server.restart is not None and {"postgres", "template1"} & set(reachable):
                roles.close_server(conn)
                reachable = roles.open_databases(conn)
        _CHECKED.add(checked)
        if reachable:
            log.warning(
                "databases %s on %s let every role connect, so the application's role of each world "
                "may too (it can leave large objects or default privileges there): REVOKE CONNECT, "
                "TEMPORARY ON DATABASE ... FROM PUBLIC, or give statekit a server of its own",
                reachable,
                self.server.redacted(),
            )

    def sweep_orphans(self) -> list[str]:
        """Drop build and episode databases, and copies' roles, left by dead processes on this host;
        return their names."""
        dropped = []
        for name in self.server.databases(f"{self.names.prefix}_"):
            if self.names.is_orphan(name):
                log.warning("dropping orphan database %s", name)
                self.server.drop_database(name)
                dropped.append(name)
        if self.app_role:
            for name in self.server.roles(f"{self.names.prefix}_"):
                if self.names.is_orphan(name):
                    self.server.drop_role(name)
        return dropped

    @property
    def capabilities(self) -> Capabilities:
        """Copies rewind through their change journal (unless the world has none)."""
        return Capabilities(rewinds=not self.journal_missing)

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
            self._drop(scratch)
            if isinstance(exc, ServerDown):
                raise
            if isinstance(exc, Exception) and self.server.exists(golden):
                return  # lost a publish race to an identical build (another session or process)
            if isinstance(exc, ResetError | KeyboardInterrupt):
                raise
            raise ResetError(f"building golden {golden!r} failed: {exc}") from exc

    def _install_journal(self, database: str) -> None:
        """Capture on every table, an empty journal, the sequences' positions, the application's
        rights on the world group: before publishing."""
        if not self.app_role:  # an application with statekit's rights could un-journal its world
            return
        missing = install(self.server.conninfo(database), bound=self.journal_bound)
        if missing and missing != self.journal_missing:
            log.warning("worlds on %s will be cloned, never rewound: %s", self.server.redacted(), missing)
        self.journal_missing = missing

    def restore(self, key: str) -> World:
        return self._copy(self.names.episode(), key)

    def recreate(self, world: World, key: str) -> World:
        """Drop ``world``'s database and role and clone the golden again under the same name, its role
        with the same password: the same URL, so an application that keeps it reconnects to the fresh
        copy (its connections were ended by the drop, as by a rewind)."""
        with self._lock:
            if self._marks[world.id] > 0:
                raise RewindError(f"bookmarks of {world.id} need its journal")
            gone = self._gone.get(world.id)
        if gone is not None:
            raise RewindError(gone)
        password = make_url(world.location).password if self.app_role else None
        if isinstance(world.handle, Journal):
            world.handle.close()
        self.server.drop_database(world.id)
        if self.app_role:
            self.server.drop_role(world.id)
        return self._copy(world.id, key, password=password)

    def _copy(self, name: str, key: str, *, password: str | None = None) -> World:
        """Clone golden ``key`` as ``name`` with its journal (and role); nothing is left of a failed one."""
        try:
            url = self.server.create_database(name, template=self.names.golden(key))
            if self.server.started is not None:
                self.watch.seen_start(self.server.started)
            with self._lock:
                self._born[name] = self.watch.started
            if self.app_role:
                url = self.server.create_world_role(name, password=password)
            journal = Journal(
                self.server.conninfo(name), bound=self.journal_bound, role=name if self.app_role else None
            )
            journal.unavailable()  # connects now: a restore is what a reset pays for, the first step not
        except BaseException:
            with self._lock:
                self._born.pop(name, None)
            self._drop(name)
            raise
        return World(id=name, location=url, handle=journal)

    def discard(self, world: World) -> None:
        if isinstance(world.handle, Journal):
            world.handle.close()
        with self._lock:
            self._marks.pop(world.id, None)
            self._born.pop(world.id, None)
            gone = self._gone.pop(world.id, None)
        if gone is None:  # a copy that died with its server was dropped when the server came back
            self._drop(world.id)

    def _drop(self, name: str) -> None:
        """A copy and its role (the database first: its grants to the role go with it). While the
        server is down the drop waits for it to come back (``_server_back``), so nothing leaks."""
        try:
            self.server.drop_database(name)
            if self.app_role:
                self.server.drop_role(name)
        except (ServerDown, psycopg.OperationalError) as exc:
            log.warning("dropping %s waits for the database server: %s", name, exc)
            self.watch.defer(name, lambda: self._drop(name))

    # -- the server's liveness ------------------------------------------------------------------
    def health(self, *, fresh: bool = False) -> Health:
        return Health(self.watch.check(reconnect=True) if fresh else self.watch.down, self.watch.restarts)

    def lost(self, world: World, *, fresh: bool = False) -> str | None:
        if fresh:
            self.watch.check(reconnect=True)
        with self._lock:
            gone = self._gone.get(world.id)
            born = self._born.get(world.id)
        if gone is not None:
            return gone
        started = self.watch.started
        if born is not None and started is not None and born != started:
            return _restarted(started)
        return None

    def _server_back(self) -> None:
        """The server answers again (the watch thread): drop the copies made before it restarted
        (drops that failed while it was down are the watch's to retry: ``ServerWatch.defer``)."""
        started = self.watch.started
        reason = _restarted(started)
        with self._lock:
            dead = [name for name, born in self._born.items() if born is not None and born != started]
            for name in dead:
                del self._born[name]
                self._gone[name] = reason
        if dead:
            log.warning("dropping %d world(s) that died with the database server", len(dead))
        for name in dead:
            try:
                self._drop(name)
            except Exception:  # one that cannot be dropped must not keep the others
                log.exception("dropping %s, which died with the database server, failed", name)

    # -- rewinding in place ---------------------------------------------------------------------
    def _journal(self, world: World) -> Journal:
        if not isinstance(world.handle, Journal):
            raise RewindError(f"world {world.id!r} was not restored by a PostgresTemplate")
        if self.journal_missing:
            raise RewindError(self.journal_missing)
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
        journal = self._journal(world)
        # back at the golden with no bookmark left: the journal can be emptied, so it stays small
        journal.move(
            None if to is None else to.mark,
            reset=to is None and not marked,
            verify=to is None and self.verify_every == 1,
        )
        if to is None and self.verify_every > 1 and true_randbelow(self.verify_every) == 0:
            journal.audit()  # the sampled check, beside the next episode

    def forget(self, mark: Any) -> None:
        if isinstance(mark, _DatabaseMark):
            with self._lock:
                if self._marks[mark.world_id] > 0:
                    self._marks[mark.world_id] -= 1

    def changes(self, world: World) -> Any:
        return self._journal(world).changes()

    def apply_changes(self, world: World, changes: Any) -> None:
        self._journal(world).apply_changes(changes)

    def drop(self, key: str) -> None:
        self.server.drop_database(self.names.golden(key))

    def footprint(self, key: str) -> int | None:
        return self.server.database_size(self.names.golden(key))

    def close(self) -> None:
        self.watch.unlisten(self._listening)
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
