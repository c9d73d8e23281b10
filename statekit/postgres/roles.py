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

from typing import Any

import psycopg
from psycopg import sql

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
    sequence and schema go to the group, ``PUBLIC`` may not create in the schemas (PostgreSQL < 15
    lets it in ``public``) nor connect to the database."""
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
    close_database(conn, str(conn.info.dbname))


def close_database(conn: psycopg.Connection[Any], database: str) -> None:
    """Nobody but superusers (and roles granted it later) may connect to ``database``."""
    conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(database)))


def create_world_role(conn: psycopg.Connection[Any], name: str, password: str) -> None:
    """The login role of one world copy (named like its database), a member of the group, the only
    one that may connect to it. ``conn`` is an admin connection (autocommit)."""
    role, database = sql.Identifier(name), sql.Identifier(name)
    with conn.transaction():
        conn.execute(
            sql.SQL(
                "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS "
                "PASSWORD {} IN ROLE {}"
            ).format(role, sql.Literal(password), sql.Identifier(GROUP))
        )
        close_database(conn, name)
        conn.execute(sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(database, role))


def drop_role(conn: psycopg.Connection[Any], name: str) -> None:
    """Drop a world's login role, if it exists (its database goes first: that ends its grants)."""
    conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def roles(conn: psycopg.Connection[Any], prefix: str) -> list[str]:
    """Login roles whose names start with ``prefix``, sorted."""
    rows = conn.execute(
        "SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s) ORDER BY 1", (prefix,)
    ).fetchall()
    return [str(row[0]) for row in rows]
