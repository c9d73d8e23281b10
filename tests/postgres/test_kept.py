"""Kept sessions for a SQLAlchemy pool (``statekit.kit.keep_pooled``): what is reset, and that a session
that cannot be kept costs the pool and nothing else (the claims app's use is tested with the app in
tests/adapters/test_claims_rewind.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import Engine, make_url

import statekit
from statekit.kit import World, keep_pooled

QUERY = "SELECT count(*) FROM claims WHERE length(reference) > %(x)s"


@pytest.fixture(scope="module")
def env(pg_url: str) -> Iterator[statekit.Environment]:
    with statekit.make("claims_app", db_url=pg_url) as made:
        made.reset(seed=7)
        yield made


def _engine(env: statekit.Environment, **changes: object) -> Engine:
    url = make_url(env.adapter.database_url(env.world))  # type: ignore[attr-defined]
    return create_engine(url.set(**changes), pool_pre_ping=True)


def _run(engine: Engine, times: int) -> tuple[int, int]:
    """Run ``QUERY`` ``times`` on the pool's connection: (its backend, statements prepared on it)."""
    with engine.connect() as connection:
        for _ in range(times):
            connection.exec_driver_sql(QUERY, {"x": 0})
        pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        prepared = connection.exec_driver_sql("SELECT count(*) FROM pg_prepared_statements").scalar_one()
        connection.commit()  # as an app's write ends (a rollback would make psycopg forget the counts)
    return int(pid), int(prepared)


def test_a_kept_session_prepares_its_statements_as_a_new_one_would(env: statekit.Environment) -> None:
    """psycopg prepares a statement at its fifth run: four runs before the keep and two after would
    prepare it on a session that remembered its count; a new session runs it twice unprepared."""
    engine = _engine(env)
    try:
        pid, _ = _run(engine, 4)
        assert keep_pooled(engine, env.world)
        assert _run(engine, 2) == (pid, 0), "the same backend, nothing prepared"
    finally:
        engine.dispose()


def test_a_world_without_a_journal_keeps_nothing_and_the_pool_is_disposed(env: statekit.Environment) -> None:
    """A world whose strategy journals nothing (here: the same database, but no journal handed out)
    ends connections its own way: nothing is named, and the pool is closed as before."""
    engine = _engine(env)
    try:
        _run(engine, 1)
        assert engine.pool.checkedin() == 1
        unjournaled = World(id=env.world.id, location=env.world.location)
        assert not keep_pooled(engine, unjournaled)
        assert engine.pool.checkedin() == 0
    finally:
        engine.dispose()


def test_a_server_out_of_reach_is_not_kept_and_nothing_is_raised(env: statekit.Environment) -> None:
    engine = _engine(env, host="127.0.0.1", port=1, query={})  # the world's database name, no server
    assert not keep_pooled(engine, env.world)
