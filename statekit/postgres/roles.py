"""Least privilege for the application: the role a world's application connects as.

statekit connects to its worlds as a superuser (the journal needs one: event triggers, the replica
role of its moves). The application never does. Two kinds of role carry that:

- ``statekit_world``, a group role that cannot log in: every golden grants it what an application
  needs on its own tables (``SELECT, INSERT, UPDATE, DELETE, TRUNCATE``), sequences (``USAGE,
  SELECT, UPDATE``) and schemas (``USAGE``), and nothing else;
- per world copy, a login role of the same name as the copy's database, a member of the group, and
  the only role besides statekit's that may connect to that database (``CONNECT, TEMPORARY`` are
  revoked from ``PUBLIC`` on every database statekit makes: goldens, builds and copies).

So the application owns nothing it could alter: no ``ALTER TABLE`` (a trigger disabled, an index
made), no ``CREATE TRIGGER``, no ``ALTER SEQUENCE``, no ``ALTER DATABASE ... SET``; it cannot set
``session_replication_role`` (superuser only), reach the ``_statekit`` schema, or connect to a golden
or another world. Two things remain within a role's own rights, and the journal checks both at every
move (``_statekit.outside``): its own defaults (``ALTER ROLE CURRENT_USER SET ...``) and its password;
large objects it may create are refused by the move as before.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

GROUP = "statekit_world"
"""The group role every golden grants the application's rights to."""

APPLICATION_SCHEMAS = """
SELECT n.nspname FROM pg_namespace n
WHERE n.nspname NOT IN ('information_schema', '_statekit') AND n.nspname NOT LIKE 'pg\\_%'
ORDER BY 1
"""


def ensure_group(conn: psycopg.Connection[Any]) -> None:
    """Create the group role if this server lacks it (a race with another process is harmless)."""
    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (GROUP,)).fetchone():
        return
    try:
        with conn.transaction():
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(GROUP)))
    except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
        pass  # another process made it first


def grant_to_group(conn: psycopg.Connection[Any]) -> None:
    """Inside a golden being published (as a superuser): the application's rights on every table,
    sequence and schema go to the group, and ``PUBLIC`` may not create in the schemas (PostgreSQL
    < 15 lets it in ``public``). The database itself was closed to ``PUBLIC`` when it was made."""
    group = sql.Identifier(GROUP)
    for (schema,) in conn.execute(APPLICATION_SCHEMAS).fetchall():
        name = sql.Identifier(str(schema))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(name, group))
        conn.execute(
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA {} TO {}").format(
                name, group
            )
        )
        conn.execute(
            sql.SQL("GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA {} TO {}").format(name, group)
        )
        conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA {} FROM PUBLIC").format(name))


def close_database(conn: psycopg.Connection[Any], database: str) -> None:
    """Nobody but superusers (and roles granted it later) may connect to ``database``."""
    conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(database)))


def close_server(conn: psycopg.Connection[Any]) -> None:
    """On a server statekit runs (the embedded one): the databases every cluster has, ``postgres``
    and ``template1``, closed to ``PUBLIC`` too, so a world's role reaches no database but its own
    (in ``template1`` a large object it left would be in every world built after)."""
    for name in ("postgres", "template1"):
        close_database(conn, name)


def open_databases(conn: psycopg.Connection[Any]) -> list[str]:
    """Databases that let ``PUBLIC`` connect, which a world's role could therefore reach."""
    rows = conn.execute(
        "SELECT datname FROM pg_database WHERE datallowconn AND (datacl IS NULL OR EXISTS "
        "(SELECT 1 FROM aclexplode(datacl) a WHERE a.grantee = 0 AND a.privilege_type = 'CONNECT')) "
        "ORDER BY 1"
    ).fetchall()
    return [str(row[0]) for row in rows]


def create_world_role(conn: psycopg.Connection[Any], name: str, password: str) -> None:
    """The login role of one world copy (named like its database, which ``create_database`` made
    closed to ``PUBLIC``), a member of the group, the only one that may connect to it. ``conn`` is
    an admin connection (autocommit)."""
    role, database = sql.Identifier(name), sql.Identifier(name)
    with conn.transaction():
        conn.execute(
            sql.SQL(
                "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS "
                "PASSWORD {} IN ROLE {}"
            ).format(role, sql.Literal(password), sql.Identifier(GROUP))
        )
        conn.execute(sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(database, role))


def drop_role(conn: psycopg.Connection[Any], name: str) -> None:
    """Drop a world's login role, if it exists (its database goes first: that ends its grants). What
    it owns in the admin database (default privileges it set itself) goes first; a role that still
    owns something elsewhere (a database open to ``PUBLIC`` on a server not statekit's) stays, and
    is logged: it can reach no world."""
    role = sql.Identifier(name)
    if not _exists(conn, name):
        return
    try:
        with conn.transaction():
            conn.execute(sql.SQL("DROP OWNED BY {}").format(role))
            conn.execute(sql.SQL("DROP ROLE {}").format(role))
    except psycopg.errors.DependentObjectsStillExist as exc:
        log.warning("the world role %s cannot be dropped, it owns objects elsewhere: %s", name, exc)
    except psycopg.DatabaseError:  # another process's sweep dropped it meanwhile ("concurrently deleted")
        if _exists(conn, name):
            raise


def _exists(conn: psycopg.Connection[Any], name: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone() is not None


def roles(conn: psycopg.Connection[Any], prefix: str) -> list[str]:
    """Login roles whose names start with ``prefix``, sorted."""
    rows = conn.execute(
        "SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s) ORDER BY 1", (prefix,)
    ).fetchall()
    return [str(row[0]) for row in rows]
