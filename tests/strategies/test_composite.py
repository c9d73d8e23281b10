"""Composite over real PostgreSQL and a real CowFilesystem: the contract suite, and all-or-nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from statekit.digest.files import file_rows
from statekit.errors import ResetError
from statekit.postgres import PostgresServer
from statekit.postgres.server import to_conninfo
from statekit.strategies.base import Builder, ResetStrategy, World
from statekit.strategies.composite import Composite
from statekit.strategies.cow_fs import CowFilesystem, mounts_under
from statekit.strategies.memory import InMemory
from statekit.strategies.pg_template import PostgresTemplate
from statekit.testing.strategies import REWIND_CHECKS, STRATEGY_CHECKS, Probe
from tests.strategies.conftest import make_cow


def _sql(world: World, statement: str) -> list[tuple[object, ...]]:
    with psycopg.connect(to_conninfo(world.location), autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


def _build(world: World) -> None:
    """One builder fills both parts, as an application's seed script would."""
    _sql(world.handle["db"], "CREATE TABLE claims (ref text); INSERT INTO claims VALUES ('c1'), ('c2')")
    uploads = Path(world.handle["files"].location)
    (uploads / "c1").mkdir()
    (uploads / "c1" / "scan.pdf").write_bytes(b"%PDF-1.4 c1")


def _mutate(world: World) -> None:
    _sql(world.handle["db"], "INSERT INTO claims VALUES ('c3')")
    (Path(world.handle["files"].location) / "c3.pdf").write_bytes(b"%PDF-1.4 c3")


def _read(world: World) -> object:
    rows = _sql(world.handle["db"], "SELECT ref FROM claims ORDER BY ref")
    return rows, list(file_rows(world.handle["files"].location))


COMPOSITE_PROBE = Probe(build=_build, mutate=_mutate, read=_read)


@pytest.fixture
def parts(pg_cluster: PostgresServer, tmp_path: Path) -> Iterator[tuple[PostgresTemplate, CowFilesystem]]:
    db = PostgresTemplate(pg_cluster, prefix="skcmp")
    files = make_cow(tmp_path / "cow", "auto")
    yield db, files
    db.close()
    files.close()
    assert pg_cluster.databases("skcmp_e_") == [], "an episode database was left behind"
    assert pg_cluster.databases("skcmp_b_") == [], "a build database was left behind"


@pytest.mark.parametrize(
    "check", [*STRATEGY_CHECKS, *REWIND_CHECKS], ids=lambda c: c.__name__.removeprefix("check_")
)
def test_contract(
    check: Callable[[ResetStrategy, Probe], None], parts: tuple[PostgresTemplate, CowFilesystem]
) -> None:
    db, files = parts
    strategy = Composite({"db": db, "files": files})
    assert strategy.name == f"composite(db=template,files={files.name})"
    check(strategy, COMPOSITE_PROBE)
    strategy.close()
    strategy.close()


def test_world_location_names_every_part(parts: tuple[PostgresTemplate, CowFilesystem]) -> None:
    db, files = parts
    with Composite({"db": db, "files": files}) as strategy:
        strategy.capture("k1", _build)
        world = strategy.restore("k1")
        assert set(json.loads(world.location)) == {"db", "files"}
        assert json.loads(world.location)["files"] == world.handle["files"].location
        strategy.discard(world)
        strategy.drop("k1")


def test_has_is_true_only_when_every_part_has_the_key(parts: tuple[PostgresTemplate, CowFilesystem]) -> None:
    db, files = parts
    strategy = Composite({"db": db, "files": files})
    strategy.capture("k1", _build)
    files.drop("k1")
    assert db.has("k1") and not strategy.has("k1")
    strategy.capture("k1", _build)  # a half-present golden is rebuilt whole
    assert strategy.has("k1")
    world = strategy.restore("k1")
    assert _read(world) == ([("c1",), ("c2",)], list(file_rows(world.handle["files"].location)))
    strategy.discard(world)
    strategy.drop("k1")


@pytest.mark.parametrize("order", [("db", "files"), ("files", "db")], ids=["files-fails", "db-fails"])
def test_a_failed_restore_rolls_back_the_parts_already_restored(
    order: tuple[str, str], parts: tuple[PostgresTemplate, CowFilesystem], pg_cluster: PostgresServer
) -> None:
    db, files = parts
    by_name: dict[str, ResetStrategy] = {"db": db, "files": files}
    strategy = Composite({name: by_name[name] for name in order})
    strategy.capture("k1", _build)
    first, second = order
    by_name[second].drop("k1")  # the second part's restore will fail
    with pytest.raises(ResetError, match=rf"part '{second}' failed .* discarded the copies of \['{first}'\]"):
        strategy.restore("k1")
    assert pg_cluster.databases("skcmp_e_") == [], "no database copy may be left"
    assert os.listdir(files.root / "copies") == [], "no directory copy may be left"
    assert mounts_under(files.root) == []
    strategy.drop("k1")


class _PublishFails(InMemory):
    """Builds fine, then fails to publish: the other parts have published by then."""

    def capture(self, key: str, source: Builder | World) -> None:
        super().capture(key, source)
        super().drop(key)
        raise RuntimeError("publishing failed")


def test_a_failed_capture_drops_the_goldens_other_parts_published(
    parts: tuple[PostgresTemplate, CowFilesystem],
) -> None:
    db, files = parts
    strategy = Composite({"broken": _PublishFails(), "db": db, "files": files})

    def build(world: World) -> None:
        _build(world)

    with pytest.raises(ResetError, match="publishing failed"):
        strategy.capture("k1", build)
    assert not db.has("k1") and not files.has("k1")


def test_an_outer_part_never_publishes_a_world_its_builder_did_not_fill(
    parts: tuple[PostgresTemplate, CowFilesystem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another builder publishes the files part while this one builds: the innermost capture returns
    early, the builder never runs, and the database part must not publish its empty scratch database
    (a soak found clones of such a golden with no tables at all)."""
    db, files = parts
    capture = files.capture

    def published_meanwhile(key: str, source: Builder | World) -> None:
        capture(key, lambda world: (Path(world.location) / "theirs.txt").write_text("published first"))
        capture(key, source)  # this builder's turn: the golden exists, so it returns without building

    monkeypatch.setattr(files, "capture", published_meanwhile)
    with pytest.raises(ResetError, match=r"published by another builder while this one built"):
        Composite({"db": db, "files": files}).capture("k", _build)
    assert not db.has("k"), "the empty database golden was published"
    assert files.has("k"), "the other builder's golden is not ours to drop"
