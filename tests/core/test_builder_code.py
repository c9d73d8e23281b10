"""A changed world builder is never served an old world without a word: the default fingerprint follows
the builder's code, and a hand-written one that does not is warned about when its cached world is used."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import statekit
from statekit.builder_code import builder_code, builder_modules
from statekit.kit import SqlAdapter

MODULE = """
import psycopg
from statekit.kit import SqlAdapter
from tests.testing.shelf_adapters import Shelf

BONUS = {bonus}


class Versioned(Shelf):
    name = "versioned"
    fingerprint = SqlAdapter.fingerprint  # the default: it follows this file


class Pinned(Shelf):
    name = "pinned"

    def fingerprint(self):
        return {{"app": "pinned", "builder": "1"}}  # written by hand: it does not


def _build(self, world, seed):
    Shelf.build_world(self, world, seed)
    with psycopg.connect(self.conninfo(world), autocommit=True) as conn:
        conn.execute("UPDATE items SET qty = qty + %s", (BONUS,))


Versioned.build_world = Pinned.build_world = _build
"""


@pytest.fixture
def builders(tmp_path: Path) -> Iterator[tuple[Path, ModuleType]]:
    """A module of two adapters whose builder adds ``BONUS`` to every quantity, importable and rewritable."""
    source = tmp_path / "builders_under_test.py"
    source.write_text(MODULE.format(bonus=1))
    sys.path.insert(0, str(tmp_path))
    try:
        yield source, importlib.import_module("builders_under_test")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("builders_under_test", None)


def _rewrite(source: Path, bonus: int) -> ModuleType:
    source.write_text(MODULE.format(bonus=bonus))  # another size: a stale .pyc cannot be taken for it
    importlib.invalidate_caches()
    return importlib.reload(sys.modules["builders_under_test"])


def _quantity(adapter: SqlAdapter) -> int:
    with statekit.make(adapter) as env:
        env.reset(seed=3)
        shelf = env.step({"tool": "shelf"})[0]
    return sum(item["qty"] for item in shelf["items"])


def test_the_default_fingerprint_follows_the_builders_code(builders: tuple[Path, ModuleType]) -> None:
    source, module = builders
    before = module.Versioned()
    assert builder_modules(before) == ["builders_under_test", "tests.testing.shelf_adapters"]
    first, code = _quantity(before), builder_code(before)
    changed = _rewrite(source, 20).Versioned()
    assert changed.fingerprint()["code"] == builder_code(changed) != code
    assert _quantity(changed) == first + 19 * 12, "the old world was served to the changed builder"


def test_a_hand_written_fingerprint_that_misses_a_change_is_warned_about(
    builders: tuple[Path, ModuleType], caplog: pytest.LogCaptureFixture
) -> None:
    source, module = builders
    first = _quantity(module.Pinned())
    changed = _rewrite(source, 300).Pinned()
    with caplog.at_level(logging.WARNING, logger="statekit.cache"):
        assert _quantity(changed) == first  # same fingerprint: the world built before is served ...
    (warning,) = [r.getMessage() for r in caplog.records if "other code" in r.getMessage()]
    assert "the world of seed 3" in warning and "fingerprint() change with it" in warning, warning
