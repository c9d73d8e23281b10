"""The schema stage: what every seed's world shares is built once per fingerprint and cloned; each seed's
build only adds its data, and gives the same world a single-stage build gives."""

from __future__ import annotations

import psycopg

import statekit
from statekit.kit import SchemaStage, World
from tests.testing.shelf_adapters import Shelf, quantities

TABLES = (
    "CREATE TABLE items (id serial PRIMARY KEY, name text UNIQUE, qty int NOT NULL)",
    "CREATE TABLE visits (id serial PRIMARY KEY)",
)


class StagedShelf(Shelf, SchemaStage):
    """The shelf's tables from the schema stage, its quantities from the seed's stage."""

    name = "staged_shelf"

    def __init__(self) -> None:
        super().__init__()
        self.stages: list[str] = []

    def build_schema(self, world: World) -> None:
        self.stages.append("schema")
        with psycopg.connect(self.conninfo(world), autocommit=True) as conn:
            for statement in TABLES:
                conn.execute(statement)

    def build_world(self, world: World, seed: int) -> None:
        self.stages.append(f"seed {seed}")
        with psycopg.connect(self.conninfo(world), autocommit=True) as conn:
            for name, qty in quantities(seed).items():
                conn.execute("INSERT INTO items (name, qty) VALUES (%s, %s)", (name, qty))


def test_the_schema_is_built_once_and_each_seed_adds_only_its_data() -> None:
    adapter = StagedShelf()
    with statekit.make(adapter) as staged, statekit.make(Shelf()) as single:
        digests = {seed: staged.reset(seed=seed)[1]["digest"] for seed in (4, 5, 6)}
        assert adapter.stages == ["schema", "seed 4", "seed 5", "seed 6"]
        assert len(set(digests.values())) == 3, "the seeds' worlds differ"
        for seed in (4, 5):  # the same rows as a world built in one stage
            assert single.reset(seed=seed)[1]["digest"] == digests[seed]
        staged.reset(seed=4)
        staged.step({"tool": "bump", "name": "item-1"})
        assert staged.reset(seed=4)[1]["digest"] == digests[4], "a staged world rewinds to its golden"
        recorded = {entry.seed for entry in staged.cache.entries()}
    assert recorded == {-1, 4, 5, 6}, "the schema stage's golden is in the cache's record (its budget)"
