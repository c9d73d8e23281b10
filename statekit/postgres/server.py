"""Database-level administration on one PostgreSQL server: create, clone, drop, list.

Every identifier is quoted with ``psycopg.sql.Identifier``; names come from config and seeds, and a
name is never formatted into SQL as text.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row
from sqlalchemy.engine import make_url

from statekit.entropy import true_token
from statekit.errors import ConfigError, ResetError, ServerDown
from statekit.postgres import roles
from statekit.postgres.watch import ServerWatch

log = logging.getLogger(__name__)


def to_conninfo(url: str) -> str:
    """Turn a SQLAlchemy or libpq URL into a psycopg conninfo string."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("postgresql"):
        raise ConfigError(f"not a PostgreSQL URL: {parsed.render_as_string(hide_password=True)}")
    params: dict[str, str] = {}
    if parsed.host:
        params["host"] = parsed.host
    if parsed.port:
        params["port"] = str(parsed.port)
    if parsed.username:
        params["user"] = parsed.username
    if parsed.password:
        params["password"] = parsed.password
    params["dbname"] = parsed.database or "postgres"
    for key, value in parsed.query.items():
        params[key] = value if isinstance(value, str) else value[0]
    return psycopg.conninfo.make_conninfo(**params)


def tuples(conn: psycopg.Connection[Any], query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows as tuples, whatever row factory ``conn`` was made with (digest readers use dicts)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        return cur.execute(query, params).fetchall()


def rollback_prepared(conn: psycopg.Connection[Any]) -> None:
    """Roll back the prepared (two-phase) transactions of ``conn``'s database: they outlive their
    connection, hold their locks, and ROLLBACK PREPARED runs only inside their own database."""
    for (gid,) in tuples(conn, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"):
        log.warning("rolling back prepared transaction %r left in database %r", gid, conn.info.dbname)
        conn.execute(sql.SQL("ROLLBACK PREPARED {}").format(sql.Literal(gid)))


class PostgresServer:
    """A server reached through an admin URL; knows how to name and manage its databases."""

    def __init__(self, admin_url: str, *, restart: Callable[[], None] | None = None) -> None:
        self.admin_url = admin_url
        self._parsed = make_url(admin_url)
        self._admin_conninfo = to_conninfo(admin_url)
        self._idle: psycopg.Connection[tuple[object, ...]] | None = None
        self._lock = threading.Lock()
        self.restart = restart
        """Starts the server again after it died, when statekit runs it (the embedded cluster)."""
        self.started: datetime | None = None
        """When the server's postmaster started, as the latest clone saw it."""
        self._reached = False

    @property
    def admin_conninfo(self) -> str:
        """A psycopg conninfo for the admin database."""
        return self._admin_conninfo

    def url(self, dbname: str, *, role: str | None = None, password: str | None = None) -> str:
        """A SQLAlchemy URL for ``dbname`` on this server, as the admin role or as ``role``."""
        parsed = self._parsed.set(drivername="postgresql+psycopg", database=dbname)
        if role is not None:
            parsed = parsed.set(username=role, password=password)
        return parsed.render_as_string(hide_password=False)

    def conninfo(self, dbname: str) -> str:
        """A psycopg conninfo for ``dbname`` on this server."""
        return psycopg.conninfo.make_conninfo(self._admin_conninfo, dbname=dbname)

    @contextmanager
    def admin(self) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
        """An autocommit connection to the admin database (CREATE/DROP DATABASE need one).

        One connection is kept for the next call (a connect costs more than most admin statements);
        a concurrent caller gets its own.
        """
        with self._lock:
            conn, self._idle = self._idle, None
        if conn is None or conn.closed or conn.broken:
            try:
                conn = psycopg.connect(self._admin_conninfo, autocommit=True)
            except psycopg.OperationalError as exc:
                if self._reached or ServerWatch.known(self._admin_conninfo):  # answered before: down
                    raise ServerDown(f"PostgreSQL at {self.redacted()} cannot be reached: {exc}") from exc
                raise ConfigError(f"cannot connect to PostgreSQL at {self.redacted()}: {exc}") from exc
            self._reached = True
        try:
            yield conn
        except psycopg.OperationalError as exc:
            broken = conn.broken  # read before closing: a closed connection is never "broken"
            conn.close()
            if broken and self._reached:  # the server went away under the statement
                raise ServerDown(f"PostgreSQL at {self.redacted()} went away: {exc}") from exc
            raise
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if self._idle is None and not conn.broken:
                self._idle, conn = conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close the kept admin connection. Safe twice; the server stays usable (it reconnects)."""
        with self._lock:
            conn, self._idle = self._idle, None
        if conn is not None:
            conn.close()

    def is_superuser(self) -> bool:
        """Whether the admin role is a superuser (what the change journal and world roles need)."""
        with self.admin() as conn:
            row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        return bool(row and row[0])

    def create_world_role(self, database: str, *, password: str | None = None) -> str:
        """Give copy ``database`` a login role of its own (``statekit.postgres.roles``); its URL.
        ``password``: the one an earlier copy under this name had (a copy made again in place keeps
        its URL), else a new one."""
        password = password or true_token(16)
        with self.admin() as conn:
            roles.create_world_role(conn, database, password)
        return self.url(database, role=database, password=password)

    def drop_role(self, name: str) -> None:
        """Drop a world's role; what it left owning in the admin database goes first. One that still
        cannot be dropped is logged, never raised: it holds no rights on any world."""
        with self.admin() as conn:
            roles.drop_role(conn, name)

    def roles(self, prefix: str = "") -> list[str]:
        """Names of roles starting with ``prefix``, sorted."""
        with self.admin() as conn:
            return roles.roles(conn, prefix)

    def redacted(self) -> str:
        return self._parsed.render_as_string(hide_password=True)

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """Create ``name`` (empty, or a file copy of ``template``) and return its URL.

        It is closed to every role but superusers (and those granted ``CONNECT`` later) from its
        first moment: made refusing connections, ``PUBLIC``'s rights revoked, then opened. A new
        database otherwise lets anyone connect, and a world's role that connected in that instant
        would keep its connection (``statekit.postgres.roles``)."""
        database = sql.Identifier(name)
        with self.admin() as conn:
            if template is None:
                conn.execute(sql.SQL("CREATE DATABASE {} ALLOW_CONNECTIONS false").format(database))
            else:
                self._terminate(conn, template)
                try:
                    conn.execute(
                        sql.SQL(
                            "CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY ALLOW_CONNECTIONS false"
                        ).format(database, sql.Identifier(template))
                    )
                except psycopg.Error as exc:
                    raise ResetError(f"cloning database {template!r} into {name!r} failed: {exc}") from exc
            with conn.transaction():
                roles.close_database(conn, name)
                conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(database))
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop ``name`` if it exists, terminating its connections first and rolling back prepared
        transactions left in it (they outlive connections and would keep it forever)."""
        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        with self.admin() as conn:
            if tuples(conn, "SELECT 1 FROM pg_prepared_xacts WHERE database = %s", (name,)):
                with psycopg.connect(to_conninfo(self.url(name)), autocommit=True) as inside:
                    rollback_prepared(inside)
            conn.execute(drop)

    def rename_database(self, old: str, new: str) -> None:
        """Rename ``old`` to ``new`` (used to publish a finished build atomically)."""
        with self.admin() as conn:
            self._terminate(conn, old)
            conn.execute(
                sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(old), sql.Identifier(new))
            )

    def databases(self, prefix: str = "") -> list[str]:
        """Names of databases starting with ``prefix``, sorted."""
        with self.admin() as conn:
            rows = conn.execute(
                "SELECT datname FROM pg_database WHERE starts_with(datname, %s) ORDER BY datname",
                (prefix,),
            ).fetchall()
        return [str(row[0]) for row in rows]

    def vacuum(self, name: str) -> None:
        """``VACUUM (FREEZE, ANALYZE)`` every table of ``name``: a golden left as autovacuum would leave
        it, so autovacuum never rewrites (or grows) it after it is published.

        An autovacuum worker analysing the new tables meanwhile holds a snapshot from before the
        build's last writes, and the VACUUM could then neither freeze nor mark them all-visible: the
        golden grew later (by 160 KB on 12 tables under a loaded run). Such workers are ended first
        (where statekit's role may end them) and waited for."""
        try:
            with psycopg.connect(self.conninfo(name), autocommit=True) as conn:
                with suppress(psycopg.errors.InsufficientPrivilege):
                    conn.execute(
                        "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND backend_type = 'autovacuum worker'"
                    )
                conn.execute("VACUUM (FREEZE, ANALYZE)")
        except psycopg.Error as exc:
            raise ResetError(f"vacuuming database {name!r} failed: {exc}") from exc

    def database_size(self, name: str) -> int | None:
        """``pg_database_size`` of ``name`` in bytes, or None if there is no such database."""
        with self.admin() as conn:
            row = conn.execute(
                "SELECT pg_database_size(datname) FROM pg_database WHERE datname = %s", (name,)
            ).fetchone()
        return None if row is None else int(str(row[0]))

    def exists(self, name: str) -> bool:
        with self.admin() as conn:
            row = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        return row is not None

    def _terminate(self, conn: psycopg.Connection[tuple[object, ...]], name: str) -> None:
        """A database cannot be a template while anyone is connected to it. Notes when the server's
        postmaster started, in the same round trip (a clone is made under that start)."""
        row = conn.execute(
            "SELECT pg_postmaster_start_time(), (SELECT count(pg_terminate_backend(pid)) "
            "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid())",
            (name,),
        ).fetchone()
        if row is not None and isinstance(row[0], datetime):
            self.started = row[0]
