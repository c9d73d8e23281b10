"""Kept sessions: an application's connection reset server-side at an episode's end and spared by the
next rewind, so the next episode does not reconnect (docs/ARCHITECTURE.md, "Kept sessions").

A rewind ends every session on the world (``_statekit.quiet()``): a session's state (settings,
temporary tables, prepared plans, advisory locks) could carry one episode into the next. A session
reset with ``DISCARD ALL`` carries none of that, so the world's journal may spare it, once, if it is
still idle outside a transaction when the rewind comes (``Journal.keep``). Reconnecting cost every
episode a new backend (its start, its catalog caches warmed again by the first requests, its exit
beside the next rewind).

``keep_session`` is the step every framework shares; ``keep_pooled`` applies it to a SQLAlchemy
engine's pool, ``DjangoProject.keep`` to Django's connection. What the client side holds is the
application's to reset: handlers it added to the connection, its framework's per-connection records
(SQLAlchemy's ``connection.info``); psycopg's own prepared-statement state is cleared here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from statekit.postgres.journal import Journal
    from statekit.world import World

log = logging.getLogger(__name__)


def _journals(world: World, database: str) -> list[Journal]:
    """The journals of ``world`` on ``database`` (none: a world its strategy does not journal)."""
    from statekit.postgres.journal import journals_of  # psycopg: not imported with statekit

    return [journal for journal in journals_of(world) if journal.database == database]


def keep_session(
    raw: Any, database: str, world: World, renew: Callable[[], None] = lambda: None
) -> int | None:
    """Reset the idle psycopg connection ``raw`` to ``database`` server-side, run ``renew`` (what the
    framework runs on a new connection), and name its backend to the journal of that database in
    ``world``: that backend's pid. None, nothing named, if it cannot be kept: inside a transaction,
    closed or broken, or a world with no journal for that database (its strategy ends connections
    its own way)."""
    from psycopg.pq import TransactionStatus

    ours = _journals(world, database)
    if not ours or raw.closed or raw.broken or raw.info.transaction_status != TransactionStatus.IDLE:
        return None
    pid = int(raw.info.backend_pid)
    autocommit = raw.autocommit
    try:
        raw.autocommit = True  # DISCARD ALL cannot run in a transaction block
        raw.execute("DISCARD ALL")
        _forget_preparing(raw)
        raw.autocommit = autocommit
        renew()
        if raw.info.transaction_status != TransactionStatus.IDLE:  # renew left a transaction open
            return None
        for journal in ours:
            journal.keep([pid])
    except Exception:  # a session (or journal) the episode broke: psycopg's or the framework's error
        log.debug("a session to %s could not be kept", database, exc_info=True)
        return None
    return pid


def _forget_preparing(raw: Any) -> None:
    """psycopg forgets the statements it prepared when it sees ``DISCARD ALL``, but not (when it had
    prepared none) how often it ran each other one; it prepares a statement at its fifth run, and a
    prepared statement may be planned otherwise (a generic plan). A kept session would then prepare
    sooner than a new one: its manager (private, hence looked for) is cleared."""
    manager = getattr(raw, "_prepared", None)
    if manager is not None and callable(getattr(manager, "clear", None)):
        manager.clear()


def keep_pooled(engine: Engine, world: World, renew: Callable[[Any], None] | None = None) -> bool:
    """Keep one connection of a SQLAlchemy ``engine`` (a psycopg one, made with ``pool_pre_ping=True``:
    a session the rewind ended after all is then replaced at its next checkout) through the next
    rewind of ``world``, reset as ``keep_session`` says; ``renew(dbapi_connection)`` is what the app
    runs on a new connection (a ``search_path``, say: the pool's ``connect`` listeners are not run
    again). The pool's other idle connections are closed (the rewind would end them; the pool's count
    of connections out is then one low until the next ``dispose``). Call it at the episode's end
    instead of ``engine.dispose()``; False, and the pool disposed, if nothing could be kept. It
    raises nothing: a database gone with its server is found by whoever uses it next."""
    database = engine.url.database
    kept = False
    if database is not None and _journals(world, database):  # else no checkout: nothing to keep
        try:
            with engine.connect() as connection:  # the pool's oldest idle connection, or a new one
                engine.pool.dispose()  # the other idle ones; the one checked out stays
                raw = connection.connection.driver_connection
                if raw is not None:
                    renewing = (lambda: renew(raw)) if renew is not None else (lambda: None)
                    kept = keep_session(raw, database, world, renewing) is not None
        except Exception:  # the server or the connection gone: the pool goes, as it did
            log.debug("no connection of %s could be kept", engine.url, exc_info=True)
            kept = False
    if not kept:
        engine.dispose()
    return kept
