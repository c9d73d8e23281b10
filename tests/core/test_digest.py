"""The digest spec, canonical form, coverage check and digest sensitivity on real PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statekit.digest import canonical
from statekit.digest.canonical import canonical_json, canonical_value
from statekit.digest.postgres import postgres_digest
from statekit.digest.spec import DigestSpec
from statekit.errors import CoverageError, SpecError
from statekit.postgres.server import to_conninfo

SPEC = {
    "format": 1,
    "tables": {
        "items": {
            "key": ["name"],
            "include": ["name", "price", "tags"],
            "exclude": {"id": "surrogate key", "touched_at": "audit timestamp"},
            "canonical": {"tags": "sorted"},
        }
    },
    "ignored_tables": {"sessions": "login rows"},
}


def _db(url: str, *statements: str) -> None:
    with psycopg.connect(to_conninfo(url), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture
def items_db(fresh_db_url: str) -> str:
    _db(
        fresh_db_url,
        "CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL UNIQUE, price numeric(8,2),"
        " tags text[],"
        " touched_at timestamptz DEFAULT now())",
        "CREATE TABLE sessions (token text PRIMARY KEY)",
        "INSERT INTO items (name, price, tags) VALUES ('b', 2.50, '{y,x}'), ('a', 1.00, '{z}')",
        "INSERT INTO sessions VALUES ('t1')",
    )
    return fresh_db_url


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": 2}, "`format` must be 1"),
        ({"tables": {}}, "`[tables.NAME]` sections are required"),
        ({"ignored_tables": {"sessions": ""}}, "maps each table to a non-empty reason"),
        (
            {"tables": {"items": {**SPEC["tables"]["items"], "include": []}}},
            "tables.items.include must be a non-empty list",
        ),
        (
            {"tables": {"items": {**SPEC["tables"]["items"], "exclude": {"id": ""}}}},
            "tables.items.exclude maps each column to a non-empty reason",
        ),
        (
            {"tables": {"items": {**SPEC["tables"]["items"], "include": ["name", "id"]}}},
            "both included and excluded",
        ),
        (
            {"tables": {"items": {**SPEC["tables"]["items"], "canonical": {"price": "float"}}}},
            "unknown canonicaliser 'float'",
        ),
        ({"tables": {"items": {**SPEC["tables"]["items"], "colour": 1}}}, "unknown field(s) ['colour']"),
    ],
)
def test_malformed_specs_name_the_problem(change: dict, message: str) -> None:
    with pytest.raises(SpecError) as err:
        DigestSpec.from_dict({**SPEC, **change}, source="spec.toml")
    assert message in str(err.value) and str(err.value).startswith("spec.toml: ")


def test_missing_and_invalid_spec_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="digest spec not found"):
        DigestSpec.load(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("format = = 1")
    with pytest.raises(SpecError, match="is not valid TOML"):
        DigestSpec.load(bad)


def test_canonical_values() -> None:
    assert canonical_value(Decimal("25.50")) == "25.50"
    tz = timezone(timedelta(hours=2))
    assert canonical_value(datetime(2025, 1, 1, 12, tzinfo=tz)) == "2025-01-01T10:00:00Z"
    assert canonical_value(["b", "a"], "sorted") == ["a", "b"]
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == '{"a":[1,{"c":3,"d":2}],"b":1}'
    assert canonical_value(0.1) == "0.1" and canonical_value(-0.0) == "-0.0"  # floats: exact (repr)
    with pytest.raises(SpecError, match=r"items.price: no 'number' canonical form for str value"):
        canonical_value("1.5", "number", where="items.price")


def test_digest_is_stable_and_blind_to_excluded_columns(items_db: str) -> None:
    spec = DigestSpec.from_dict(SPEC)
    first = postgres_digest(to_conninfo(items_db), spec)
    _db(
        items_db,
        "UPDATE items SET touched_at = now() + interval '1 day'",
        "INSERT INTO sessions VALUES ('t2')",
    )
    again = postgres_digest(to_conninfo(items_db), spec)
    assert first == again
    assert first.tables["items"].rows == 2
    assert first.as_dict()["format"] == 2


def test_digest_ignores_insertion_order_and_set_order(items_db: str) -> None:
    spec = DigestSpec.from_dict(SPEC)
    before = postgres_digest(to_conninfo(items_db), spec)
    _db(
        items_db,
        "DELETE FROM items",
        "INSERT INTO items (id, name, price, tags) VALUES (2, 'a', 1.00, '{z}'), (1, 'b', 2.50, '{x,y}')",
    )
    assert postgres_digest(to_conninfo(items_db), spec).digest == before.digest


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE items SET price = 2.51 WHERE name = 'b'",
        "INSERT INTO items (name, price, tags) VALUES ('c', 0, '{}')",
        "DELETE FROM items WHERE name = 'a'",
        "UPDATE items SET tags = '{x}' WHERE name = 'b'",
    ],
)
def test_digest_sees_every_included_change(items_db: str, statement: str) -> None:
    spec = DigestSpec.from_dict(SPEC)
    before = postgres_digest(to_conninfo(items_db), spec)
    _db(items_db, statement)
    after = postgres_digest(to_conninfo(items_db), spec)
    assert before.digest != after.digest
    assert before.tables["items"] != after.tables["items"]


def test_coverage_names_new_columns_and_tables(items_db: str) -> None:
    spec = DigestSpec.from_dict(SPEC)
    _db(items_db, "ALTER TABLE items ADD COLUMN colour text", "CREATE TABLE extras (x int)")
    with pytest.raises(CoverageError) as err:
        postgres_digest(to_conninfo(items_db), spec)
    assert err.value.missing == ["extras.x", "items.colour"]
    assert "items: colour" in str(err.value) and "`exclude` with a reason" in str(err.value)


def test_spec_naming_what_the_schema_lacks_is_an_error(items_db: str) -> None:
    raw = {
        **SPEC,
        "tables": {"items": {**SPEC["tables"]["items"], "include": ["name", "price", "tags", "weight"]}},
    }
    with pytest.raises(SpecError, match=r"lacks: items.weight"):
        postgres_digest(to_conninfo(items_db), DigestSpec.from_dict(raw))


def test_a_digested_column_filled_by_the_database_clock_is_an_error(items_db: str) -> None:
    raw = {
        **SPEC,
        "tables": {
            "items": {
                **SPEC["tables"]["items"],
                "include": ["name", "price", "tags", "touched_at"],
                "exclude": {"id": "key"},
            }
        },
    }
    with pytest.raises(SpecError, match=r"database's clock.*items.touched_at \(DEFAULT now\(\)\)"):
        postgres_digest(to_conninfo(items_db), DigestSpec.from_dict(raw))


def test_timestamps_canonicalise_to_utc(items_db: str) -> None:
    assert canonical_value(datetime(2025, 5, 1, tzinfo=UTC)) == "2025-05-01T00:00:00Z"


_JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.decimals(allow_nan=False, allow_infinity=False, places=3),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
_JSON_DOCS = st.recursive(
    _JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_JSON_DOCS)
def test_the_json_canonicaliser_fast_path_writes_what_the_walk_defines(doc: object) -> None:
    """Documents of strings and small integers skip the walk (one C encoder call); the bytes must be
    the walk's for every document, whichever path it takes."""
    assert canonical._json_text(doc, "t.doc") == canonical._json_walk(doc, "t.doc")
