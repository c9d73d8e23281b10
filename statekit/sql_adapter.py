"""The adapter kit's base for the common case: an application whose state is one PostgreSQL database
plus some directories.

A subclass names its digest spec and writes what only it can know: how to build a world for a seed
(``build_world``), how to start an episode on one (``start_episode``: tools, task, verifier), and,
optionally, what to keep warm per world (``attach``). Everything else comes from the spec:

- strategies ``rewind`` (the default: worlds rewound in place from their change journal) and
  ``template`` (a clone per episode): the database by ``PostgresTemplate``, each of the spec's
  ``[directories]`` by a ``CowFilesystem`` under ``$STATEKIT_HOME/files/<adapter>/<directory>``,
  reset together by a ``Composite``;
- the digest (incremental through the journal and the overlay upper dirs), the dump, the live
  schema and the coverage check.

Inside ``build_world`` and ``start_episode`` reach the world's parts with ``self.database_url(world)``
(a SQLAlchemy URL), ``self.conninfo(world)`` (psycopg) and ``self.directory(world, name)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from statekit.adapter import Adapter
from statekit.builder_code import builder_code
from statekit.capabilities import DatabaseWorld, StateDumps
from statekit.collateral import journal_changes
from statekit.digest.compute import Digest, merge
from statekit.digest.coverage import coverage_problems, live_columns
from statekit.digest.dump import StateDump
from statekit.digest.files import TABLE_PREFIX, directory_digest, file_dump
from statekit.digest.postgres import connect, postgres_digest, postgres_dump
from statekit.digest.spec import DEFAULT_SCHEMA, DigestSpec
from statekit.errors import ConfigError
from statekit.postgres import ServerLease
from statekit.postgres.journal import DEFAULT_BOUND, Journal
from statekit.postgres.server import to_conninfo
from statekit.settings import statekit_home
from statekit.strategies.base import ResetStrategy, World
from statekit.strategies.composite import Composite
from statekit.strategies.cow_fs import CowCopy, CowFilesystem
from statekit.strategies.pg_template import PostgresTemplate
from statekit.strategies.rewinding import Rewinding

DATABASE = "db"
"""The name of the database part of a world (``world.handle[DATABASE]``)."""


class SqlAdapter(Adapter, StateDumps, DatabaseWorld):
    """A PostgreSQL database plus the spec's directories; subclasses set ``name`` and ``spec``."""

    spec: DigestSpec | None = None
    """The digest spec (``DigestSpec.load``); None while there is none yet: worlds build and
    ``statekit spec init ADAPTER`` drafts one from them, and anything that needs it says so."""
    journal_bound: int = DEFAULT_BOUND
    """Row changes an episode may make and still be rewound (beyond it: a clone instead)."""
    app_role: bool = True
    """The application connects as a login role of its own per world, with rights on its tables'
    rows only (``statekit.postgres.roles``). An application that must alter its schema, own its
    tables or set superuser-only settings sets this False: it then connects as statekit does, its
    worlds carry no journal, and only ``template`` (a clone per episode) is offered, never a rewind
    it could corrupt."""

    database_prefix: str | None = None
    """What the world databases' names start with (``sk<name>`` when None): PostgreSQL names are
    at most 63 bytes, so an adapter with a long name picks a short prefix."""

    builder_modules: tuple[str, ...] = ()
    """Modules besides the adapter's own whose code builds its worlds (the app's seed script, say):
    the default ``fingerprint`` follows their source too."""

    def fingerprint(self) -> dict[str, str]:
        """The adapter's class and a hash of the code that builds its worlds (``builder_code``): a
        changed builder gets new worlds. Override it to add what the code does not show (data files,
        the app's version), keeping ``builder_code(self)`` in it."""
        return {"adapter": f"{type(self).__module__}.{type(self).__qualname__}", "code": builder_code(self)}

    @property
    def strategies(self) -> tuple[str, ...]:  # type: ignore[override]  # derived from app_role here
        return ("rewind", "template") if self.app_role else ("template",)

    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        if name not in self.strategies:
            why = (
                " (its application connects with statekit's rights: app_role=False)"
                if name == "rewind"
                else ""
            )
            raise ConfigError(
                f"adapter {self.name!r} offers strategies {list(self.strategies)}, not {name!r}{why}"
            )
        lease = ServerLease(options.get("db_url"))
        prefix = self.database_prefix or f"sk{self.name}"
        parts: dict[str, ResetStrategy] = {
            DATABASE: PostgresTemplate(
                lease.server,
                prefix=prefix,
                on_close=lease.close,
                journal_bound=self.journal_bound,
                app_role=self.app_role,
            )
        }
        for directory in self._directories():
            parts[directory] = CowFilesystem(statekit_home() / "files" / self.name / directory)
        world = Composite(parts)
        return Rewinding(world) if name == "rewind" else world

    # -- a world's parts --------------------------------------------------------------------------
    @staticmethod
    def database_url(world: World) -> str:
        """The world database's SQLAlchemy URL (``postgresql+psycopg://...``)."""
        return str(world.handle[DATABASE].location)

    @staticmethod
    def conninfo(world: World) -> str:
        """The world database's libpq connection string (for psycopg)."""
        return to_conninfo(SqlAdapter.database_url(world))

    def directory(self, world: World, name: str) -> Path:
        """Where the world's directory ``name`` (one of the spec's ``[directories]``) lives."""
        if name not in self._directories():
            known = sorted(self._directories())
            raise ConfigError(f"{self._spec().source}: no directory {name!r}; [directories] has {known}")
        return Path(world.handle[name].location)

    @staticmethod
    def _database(world: World) -> Journal | str:
        part = world.handle[DATABASE]
        return part.handle if isinstance(part.handle, Journal) else to_conninfo(part.location)

    # -- digest, dump, schema: derived from the spec ----------------------------------------------
    def _spec(self) -> DigestSpec:
        if self.spec is None:
            raise ConfigError(
                f"adapter {self.name!r} has no digest spec yet: draft one from its world with `statekit spec "
                f"init {self.name} --out {self.name}.toml`, review its DECIDE: lines, then set "
                f"`spec = DigestSpec.load(...)` on the adapter"
            )
        return self.spec

    def _directories(self) -> list[str]:
        return sorted(self.spec.directories or {}) if self.spec is not None else []

    def digest(self, world: World, since: Digest | None = None) -> Digest:
        parts = [postgres_digest(self._database(world), self._spec(), since=since)]
        for name in self._directories():
            copy = world.handle[name].handle
            if isinstance(copy, CowCopy) and copy.upper is not None:  # overlay: changes are in upper
                parts.append(
                    directory_digest(
                        name, self.directory(world, name), golden=copy.golden, upper=copy.upper, since=since
                    )
                )
            else:
                parts.append(directory_digest(name, self.directory(world, name)))
        return merge(*parts)

    def dump(self, world: World) -> StateDump:
        dump = postgres_dump(self._database(world), self._spec())
        for name in self._directories():
            dump.tables[f"{TABLE_PREFIX}{name}"] = file_dump(self.directory(world, name))
        return dump

    def dump_changes(self, world: World, golden: Digest, now: Digest) -> tuple[StateDump, StateDump] | None:
        return journal_changes(self._database(world), self._spec(), golden, now)

    def live_schema(self, world: World) -> dict[str, dict[str, str]]:
        with connect(self.conninfo(world)) as conn:
            return live_columns(conn, self.spec.schema if self.spec is not None else DEFAULT_SCHEMA)

    def check_schema(self, world: World) -> list[str]:
        uncovered, unknown = coverage_problems(self.live_schema(world), self._spec())
        return uncovered + unknown
