"""Kept sessions: an application's connection reset server-side at an episode's end and spared by the
next rewind, so the next episode does not reconnect (docs/ARCHITECTURE.md, "Kept sessions").

A rewind ends every session on the world (``_statekit.quiet()``): a session's state (settings,
temporary tables, prepared plans, advisory locks) could carry one episode into the next. A session
reset with ``DISCARD ALL`` carries none of that, so the world's journal may spare it, once, if it is
still idle outside a transaction when the rewind comes (``Journal.keep``). Reconnecting cost every
episode a new backend (its start, its catalog caches warmed again by the first requests, its exit
beside the next rewind).

``keep_session`` is the step every framework shares; ``keep_pooled`` applies it to a SQLAlchemy
engine's pool, ``DjangoProject.keep`` to Django's connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from statekit.world import World


def keep_session(raw: Any, database: str, world: World, renew: Callable[[], None] = lambda: None) -> bool:
    """Reset the idle psycopg connection ``raw`` to ``database`` server-side, run ``renew`` (what the
    framework runs on a new connection), and name its backend to the journal of that database in
    ``world``. False, nothing named, if it cannot be kept: inside a transaction, broken, or a world
    with no journal for that database (its strategy ends connections its own way)."""
    from psycopg.pq import TransactionStatus

    from statekit.postgres.journal import journals_of  # psycopg: not imported with statekit

    ours = [journal for journal in journals_of(world) if journal.database == database]
    if not ours or raw.closed or raw.broken or raw.info.transaction_status != TransactionStatus.IDLE:
        return False
    autocommit = raw.autocommit
    try:
        raw.autocommit = True  # DISCARD ALL cannot run in a transaction block
        raw.execute("DISCARD ALL")  # psycopg forgets its prepared statements too
        raw.autocommit = autocommit
        renew()
        if raw.info.transaction_status != TransactionStatus.IDLE:  # renew left a transaction open
            return False
        for journal in ours:
            journal.keep([int(raw.info.backend_pid)])
    except Exception:  # a session (or journal) the episode broke: psycopg's or the framework's error
        return False
    return True


def keep_pooled(engine: Engine, world: World) -> bool:
    """Keep one connection of a SQLAlchemy ``engine`` (a psycopg one, made with ``pool_pre_ping=True``:
    a session the rewind ended after all is then replaced at its next checkout) through the next
    rewind of ``world``: the pool's other idle connections are closed (the rewind would end them),
    the kept one is reset as ``keep_session`` says and its engine's ``connect`` listeners run again.
    Call it at the episode's end instead of ``engine.dispose()``; False (the pool disposed) if it
    could not be kept."""
    database = engine.url.database
    with engine.connect() as connection:  # the pool's oldest idle connection, or a new one
        engine.pool.dispose()  # the other idle ones; the one checked out stays
        proxied = connection.connection
        record = proxied._connection_record  # the pool's entry (no public name): its listeners' argument
        raw = proxied.driver_connection
        if database is None or record is None or raw is None:
            kept = False
        else:

            def renew() -> None:  # what the pool runs on a new connection (its one-time hooks stay spent)
                engine.pool.dispatch.connect(proxied.dbapi_connection, record)

            kept = keep_session(raw, database, world, renew)
    if not kept:
        engine.dispose()
    return kept
