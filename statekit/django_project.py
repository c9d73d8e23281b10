"""A Django project whose database is a statekit world: set up once per process, pointed at a world per
thread, and told when statekit rewinds it.

Django reads its settings once, before any model is imported (``django.setup()``), and keeps one
connection per alias per thread. statekit hands each episode a world whose database URL it chooses
(one per world; several worlds in one process when environments share it), and ends every connection
to a world when it rewinds it. ``DjangoProject`` bridges the two:

- ``setup()`` configures the project once per process (later calls are no-ops); an adapter calls it
  before importing the project's models, as ``django.setup()`` is called in any Django program. No
  database is needed for it: ``DATABASES[alias]`` is filled in per thread, from a world's URL
  (statekit's SQLAlchemy-style ``postgresql+psycopg://user@/name?host=/socket&port=N``, translated by
  ``databases_entry``);
- ``on(url)`` points the calling thread's connection at a world for a block: every build, step and
  verifier runs inside one, so environments sharing a process (or a thread pool) each reach their
  own world; the connection stays open between blocks on the same world (no reconnect per step),
  and a thread's connections to its last few other worlds are parked open, not closed (``PARKED``);
- ``keep(url, world)`` at an episode's end (``Episode.close``), before statekit rewinds the world:
  the thread's connection to it is reset server-side (``DISCARD ALL``: no temporary table, prepared
  statement, advisory lock, setting or sequence cache is left of the episode) and named to the
  world's journal, which then spares it through the rewind (``Journal.keep``) instead of ending it:
  the next episode on the world reuses a warm backend, with no reconnect and no backend exit beside
  the rewind (most of a Django app's reset otherwise);
- ``rewound(url)`` says statekit put the world back (call it from ``Adapter.on_rewind``): every
  thread's connection to it was ended but a kept one, so each other is closed and reopened at its
  next ``on``, and what Django's process caches hold of the old state (``ContentType``, ``Site``,
  local-memory caches, ``mail.outbox``) is cleared; ``ended(url)`` does the first half where a
  world's connections must go without a rewind (``Episode.quiesce`` before a snapshot,
  ``Adapter.detach``), and ``building(url)`` is ``on`` for a build, ended with it (statekit
  captures the world next);
- ``migrate(url)`` runs the project's migrations on a world (``SchemaStage.build_schema``: once per
  fingerprint, then cloned for every seed).

Django is imported only when a project is used: it is not a dependency of statekit itself.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from statekit.errors import ConfigError
from statekit.kept import keep_session

if TYPE_CHECKING:
    from statekit.world import World

PARKED = 4
"""Per thread, how many connections to other worlds stay open (the least recently used one beyond is
closed): episodes that alternate between a few worlds reconnect to none of them."""


def databases_entry(url: str) -> dict[str, Any]:
    """A Django ``DATABASES`` entry for a statekit world's URL (PostgreSQL through psycopg 3).

    Persistent connections (``CONN_MAX_AGE = None``): Django closes a connection at the end of every
    request otherwise, and a step through a view would pay a reconnect; ``DjangoProject.rewound``
    closes them when the world is put back instead."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("postgresql"):
        raise ConfigError(f"a Django world must be PostgreSQL, not {parsed.drivername!r} ({url})")
    query = {key: str(value) for key, value in parsed.query.items()}
    host = parsed.host or query.pop("host", "")
    port = parsed.port or query.pop("port", "")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parsed.database or "",
        "USER": parsed.username or "",
        "PASSWORD": parsed.password or "",
        "HOST": host,
        "PORT": str(port),
        "OPTIONS": query,
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": False,
    }


_WORLD_KEYS = ("NAME", "USER", "PASSWORD", "HOST", "PORT", "OPTIONS")
"""What differs between two worlds' entries: what ``on`` swaps on a thread's connection."""


@dataclass
class _Thread:
    """One thread's connections to worlds."""

    opened: dict[str, int] = field(default_factory=dict)
    """Per world name, the generation (``DjangoProject._generations``) its connection was opened in."""
    parked: OrderedDict[str, Any] = field(default_factory=OrderedDict)
    """Per world name, its open connection while another world's is current (least recently used
    first)."""
    kept: dict[str, int] = field(default_factory=dict)
    """Per world name, the backend ``keep`` reset and named to its journal."""


def _serves(connection: Any, wanted: dict[str, Any]) -> bool:
    """Whether a Django connection is set up for the world of entry ``wanted``."""
    return all(connection.settings_dict.get(key) == wanted[key] for key in _WORLD_KEYS)


class DjangoProject:
    """One Django project (its settings module) serving statekit worlds; one per process and module."""

    def __init__(self, settings_module: str, *, alias: str = "default") -> None:
        self.settings_module = settings_module
        self.alias = alias
        self._lock = threading.Lock()
        self._ready = False
        self._generations: dict[str, int] = {}
        """Per world database (its name), how many times it was rewound: a thread's connection opened
        under an older generation is one the rewind ended."""
        self._local = threading.local()

    def setup(self, url: str | None = None) -> None:
        """Configure the project (once per process): its settings module, with ``DATABASES[alias]``
        pointed at ``url`` if given, then ``django.setup()``. A process whose Django is another
        project (``DJANGO_SETTINGS_MODULE`` naming another module) is refused: its models are not
        ours."""
        with self._lock:
            if self._ready:
                return
            named = os.environ.setdefault("DJANGO_SETTINGS_MODULE", self.settings_module)
            if named != self.settings_module:
                raise ConfigError(
                    f"this process's Django is {named!r} (DJANGO_SETTINGS_MODULE), not "
                    f"{self.settings_module!r}: one Django project per process (run the other in a "
                    "process of its own)"
                )
            import django
            from django.conf import settings

            entry = databases_entry(url) if url else {"ENGINE": "django.db.backends.postgresql"}
            settings.DATABASES[self.alias] = {**settings.DATABASES.get(self.alias, {}), **entry}
            django.setup()
            self._ready = True

    @contextmanager
    def on(self, url: str) -> Iterator[None]:
        """This thread's connection on ``url``'s world for the block (set up first if need be)."""
        self.setup(url)
        from django.db import connections

        connection = connections[self.alias]
        wanted = databases_entry(url)
        name = wanted["NAME"]
        if not _serves(connection, wanted):  # another world's: parked open, this world's taken out
            connection = self._switch(connection, wanted)
        opened = self._thread().opened
        if opened.get(name, 0) != self._generations.get(name, 0):
            connection.close()  # one a rewind or an end ended: reopened on first use
            opened[name] = self._generations.get(name, 0)
        yield

    def _switch(self, current: Any, wanted: dict[str, Any]) -> Any:
        """The thread's connection for ``wanted``'s world, in place of ``current`` (parked if open)."""
        from django.db import connections

        parked = self._thread().parked
        if current.in_atomic_block:  # a transaction is not parked: closed, as it always was
            current.close()
        elif current.connection is not None and current.settings_dict.get("NAME"):
            parked[current.settings_dict["NAME"]] = current
            parked.move_to_end(current.settings_dict["NAME"])
        taken = parked.pop(wanted["NAME"], None)
        if taken is None or not _serves(taken, wanted):
            if taken is not None:
                taken.close()
            taken = connections.create_connection(self.alias)
            # a new dict: Django shares the settings dict between threads' connections of an alias
            taken.settings_dict = {**taken.settings_dict, **wanted}
        while len(parked) > PARKED:
            parked.popitem(last=False)[1].close()
        connections[self.alias] = taken
        return taken

    def _thread(self) -> _Thread:
        """The calling thread's connections."""
        if not hasattr(self._local, "state"):
            self._local.state = _Thread()
        state: _Thread = self._local.state
        return state

    def _connection_to(self, name: str) -> Any | None:
        """This thread's connection to world ``name``: the current one, or a parked one."""
        from django.db import connections

        current = connections[self.alias]
        if current.settings_dict.get("NAME") == name:
            return current
        return self._thread().parked.get(name)

    def keep(self, url: str, world: World) -> bool:
        """Reset this thread's open connection to ``url``'s world server-side and name it to the world's
        journal, which spares it through the next rewind (see the module); False if there is none to
        keep (not open, inside a transaction). Call it at the episode's end, before the rewind."""
        if not self._ready:
            return False
        name = databases_entry(url)["NAME"]
        connection = self._connection_to(name)
        if connection is None or connection.connection is None:
            return False
        raw = connection.connection
        if connection.in_atomic_block or not raw.autocommit:  # Django's transaction (keep_session: psycopg's)
            return False
        from django.db.backends.signals import connection_created

        def renew() -> None:
            # what Django and the project do to a new connection: its time zone and role, then the
            # project's connection_created receivers (a search_path, a statement timeout, ...)
            connection.init_connection_state()
            connection_created.send(sender=connection.__class__, connection=connection)

        pid = keep_session(raw, name, world, renew)
        if pid is None:
            return False
        self._thread().kept[name] = pid
        return True

    @contextmanager
    def building(self, url: str) -> Iterator[None]:
        """``on(url)`` for a world's build: its connections are ended with the block (statekit
        captures the world next, which needs none open)."""
        try:
            with self.on(url):
                yield
        finally:
            self.ended(url)

    def ended(self, url: str) -> None:
        """``url``'s world lost its connections, or is about to (a rewind ended them, a snapshot or a
        drop needs them gone: ``Episode.quiesce``, ``Adapter.detach``): this thread's is closed now,
        every other thread's at its next ``on`` (a thread cannot close another's)."""
        name = databases_entry(url)["NAME"]
        with self._lock:
            self._generations[name] = self._generations.get(name, 0) + 1
        if self._ready:
            thread = self._thread()
            thread.kept.pop(name, None)
            parked = thread.parked.pop(name, None)
            if parked is not None:
                parked.close()
            connection = self._connection_to(name)
            if connection is not None:
                connection.close()

    def rewound(self, url: str) -> None:
        """statekit put ``url``'s world back and ended its connections (call from
        ``Adapter.on_rewind``): every thread reconnects at its next ``on``, and the process's
        caches of the old state are cleared."""
        name = databases_entry(url)["NAME"]
        kept = self._thread().kept.pop(name, None)
        with self._lock:
            self._generations[name] = self._generations.get(name, 0) + 1
            generation = self._generations[name]
        if kept is not None and self._survived(self._connection_to(name), kept):
            self._thread().opened[name] = generation  # this thread's kept connection serves on
        if self._ready:
            clear_caches()

    @staticmethod
    def _survived(connection: Any, pid: int) -> bool:
        """Whether ``connection`` is still the session ``keep`` named (the rewind spared it: it ends
        a session that was not idle after all)."""
        raw = connection.connection if connection is not None else None
        if raw is None or raw.closed or raw.broken or int(raw.info.backend_pid) != pid:
            return False
        return bool(connection.is_usable())

    def migrate(self, url: str) -> None:
        """Apply every migration of the project to ``url``'s world (quietly; fails loudly): the
        schema stage (``SchemaStage.build_schema``)."""
        from django.core.management import call_command

        with self.building(url):
            call_command("migrate", interactive=False, verbosity=0)


def clear_caches() -> None:
    """Forget what Django's process keeps of a database's rows: the ``ContentType`` and ``Site`` caches
    (ids of rows a world may not hold), local-memory caches, the test mail outbox."""
    from django.apps import apps
    from django.core import mail
    from django.core.cache import caches

    if apps.is_installed("django.contrib.contenttypes"):
        from django.contrib.contenttypes.models import ContentType

        ContentType.objects.clear_cache()
    if apps.is_installed("django.contrib.sites"):
        from django.contrib.sites.models import Site

        Site.objects.clear_cache()
    for cache in caches.all(initialized_only=True):
        if type(cache).__name__ == "LocMemCache":
            cache.clear()
    if hasattr(mail, "outbox"):
        mail.outbox = []
