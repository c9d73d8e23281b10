"""The strategy contract suite against every strategy, with real PostgreSQL for the database ones."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import psycopg
import pytest

from statekit.postgres import PostgresServer
from statekit.postgres.server import to_conninfo
from statekit.strategies.base import ResetStrategy, World
from statekit.strategies.memory import InMemory
from statekit.strategies.pg_template import PostgresTemplate
from statekit.strategies.prewarmed import Prewarmed
from statekit.strategies.rewinding import Rewinding
from statekit.testing.strategies import REWIND_CHECKS, STRATEGY_CHECKS, Probe


def _sql(world: World, statement: str) -> list[tuple[object, ...]]:
    with psycopg.connect(to_conninfo(world.location), autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


PG_PROBE = Probe(
    build=lambda w: _sql(w, "CREATE TABLE t (v int); INSERT INTO t VALUES (1), (2)"),
    mutate=lambda w: _sql(w, "INSERT INTO t VALUES (3)"),
    read=lambda w: _sql(w, "SELECT v FROM t ORDER BY v"),
)
MEMORY_PROBE = Probe(
    build=lambda w: w.handle.update(values=[1, 2]),
    mutate=lambda w: w.handle["values"].append(3),
    read=lambda w: list(w.handle["values"]),
)


def _memory(_: PostgresServer) -> ResetStrategy:
    return InMemory()


def _template(server: PostgresServer) -> ResetStrategy:
    return PostgresTemplate(server, prefix="skc")


def _prewarmed(server: PostgresServer) -> ResetStrategy:
    return Prewarmed(PostgresTemplate(server, prefix="skp"), depth=2)


def _rewinding_memory(_: PostgresServer) -> ResetStrategy:
    return Rewinding(InMemory())


def _rewinding_template(server: PostgresServer) -> ResetStrategy:
    return Rewinding(PostgresTemplate(server, prefix="skr"), max_parked=1)


FACTORIES: dict[str, tuple[Callable[[PostgresServer], ResetStrategy], Probe]] = {
    "memory": (_memory, MEMORY_PROBE),
    "template": (_template, PG_PROBE),
    "prewarmed-template": (_prewarmed, PG_PROBE),
    "rewind-memory": (_rewinding_memory, MEMORY_PROBE),
    "rewind-template": (_rewinding_template, PG_PROBE),
}


@pytest.fixture(params=sorted(FACTORIES))
def strategy_and_probe(
    request: pytest.FixtureRequest, pg_cluster: PostgresServer
) -> Iterator[tuple[ResetStrategy, Probe]]:
    factory, probe = FACTORIES[request.param]
    strategy = factory(pg_cluster)
    yield strategy, probe
    strategy.close()
    strategy.close()  # close() is safe twice


@pytest.mark.parametrize(
    "check", [*STRATEGY_CHECKS, *REWIND_CHECKS], ids=lambda c: c.__name__.removeprefix("check_")
)
def test_strategy_contract(
    check: Callable[[ResetStrategy, Probe], None], strategy_and_probe: tuple[ResetStrategy, Probe]
) -> None:
    strategy, probe = strategy_and_probe
    check(strategy, probe)
