"""A digest that misses nothing a task can change: each case here gave equal digests for different
worlds in digest format 1."""

from __future__ import annotations

import math
from datetime import UTC, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import psycopg
import pytest

from statekit.digest.canonical import CANONICALISERS, canonical_value
from statekit.digest.postgres import postgres_digest, postgres_dump
from statekit.digest.spec import DigestSpec
from statekit.errors import SpecError
from statekit.postgres.server import to_conninfo


def _db(url: str, *statements: str) -> None:
    with psycopg.connect(to_conninfo(url), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def _spec(tables: dict[str, Any], **extra: Any) -> DigestSpec:
    return DigestSpec.from_dict({"format": 1, "tables": tables, "ignored_tables": {}, **extra})


def _digest(url: str, spec: DigestSpec) -> str:
    return postgres_digest(to_conninfo(url), spec).digest


def test_a_failed_insert_moves_a_sequence_and_the_digest_sees_it(fresh_db_url: str) -> None:
    _db(
        fresh_db_url,
        "CREATE TABLE t (id serial PRIMARY KEY, name text NOT NULL)",
        "INSERT INTO t (name) VALUES ('a')",
    )
    spec = _spec({"t": {"key": ["id"], "include": ["id", "name"]}})
    before = _digest(fresh_db_url, spec)
    with pytest.raises(psycopg.errors.NotNullViolation):
        _db(fresh_db_url, "INSERT INTO t (name) VALUES (NULL)")  # no row, but nextval ran
    assert _digest(fresh_db_url, spec) != before, "the next row's id changed: so must the digest"


def test_every_sequence_is_digested_or_ignored_with_a_reason(fresh_db_url: str) -> None:
    _db(fresh_db_url, "CREATE TABLE t (id int PRIMARY KEY)", "CREATE SEQUENCE tickets")
    spec = _spec({"t": {"key": ["id"], "include": ["id"]}})
    before = _digest(fresh_db_url, spec)
    _db(fresh_db_url, "SELECT nextval('tickets')")
    assert _digest(fresh_db_url, spec) != before, "a free-standing sequence is state too"
    ignoring = _spec({"t": {"key": ["id"], "include": ["id"]}}, ignored_sequences={"tickets": "display only"})
    assert _digest(fresh_db_url, ignoring) == _digest(
        fresh_db_url,
        _spec({"t": {"key": ["id"], "include": ["id"]}}, ignored_sequences={"tickets": "display only"}),
    )
    stale = _spec({"t": {"key": ["id"], "include": ["id"]}}, ignored_sequences={"gone": "renamed"})
    with pytest.raises(SpecError, match=r"lacks: gone \(sequence\)"):
        _digest(fresh_db_url, stale)


def test_double_precision_columns_digest_exactly(fresh_db_url: str) -> None:
    _db(
        fresh_db_url,
        "CREATE TABLE m (id int PRIMARY KEY, x float8, y real)",
        "INSERT INTO m VALUES (1, 0.1, 0.5)",
    )
    spec = _spec({"m": {"key": ["id"], "include": ["id", "x", "y"]}})
    before = _digest(fresh_db_url, spec)
    _db(fresh_db_url, "UPDATE m SET x = 0.1 + 1e-16")  # the next double after 0.1: another value
    assert _digest(fresh_db_url, spec) != before
    _db(fresh_db_url, "UPDATE m SET x = 0.1")
    assert _digest(fresh_db_url, spec) == before
    for special in ("'NaN'", "'Infinity'", "'-0'"):
        _db(fresh_db_url, f"UPDATE m SET x = {special}")
        assert _digest(fresh_db_url, spec) != before
    assert canonical_value(math.nan) == "nan" and canonical_value(-0.0) != canonical_value(0.0)


def test_json_scalars_keep_their_type(fresh_db_url: str) -> None:
    _db(fresh_db_url, "CREATE TABLE d (id int PRIMARY KEY, doc jsonb, raw json)")
    spec = _spec({"d": {"key": ["id"], "include": ["id", "doc", "raw"]}})
    digests = {}
    for name, doc in {
        "number": "2.5",
        "string": '"2.5"',
        "object": '{"v": 2.5}',
        "object-string": '{"v": "2.5"}',
    }.items():
        _db(fresh_db_url, "DELETE FROM d", f"INSERT INTO d VALUES (1, '{doc}', '{doc}')")
        digests[name] = _digest(fresh_db_url, spec)
    assert len(set(digests.values())) == 4, digests
    _db(fresh_db_url, "DELETE FROM d", """INSERT INTO d VALUES (1, '{"v": 2.5}', '{ "v" :  2.50 }')""")
    same = _digest(fresh_db_url, spec)
    _db(fresh_db_url, "DELETE FROM d", """INSERT INTO d VALUES (1, '{"v": 2.50}', '{"v":2.5}')""")
    assert _digest(fresh_db_url, spec) == same, "whitespace, key order and a number's scale are not state"


def test_every_accepted_canonicaliser_is_implemented() -> None:
    samples: dict[str, Any] = {
        "auto": Decimal("2.50"),
        "number": Decimal("2.50"),
        "decimal": Decimal("2.50"),
        "timestamp": __import__("datetime").datetime(2025, 1, 1, tzinfo=UTC),
        "date": __import__("datetime").date(2025, 1, 1),
        "json": {"b": [1, "x"], "a": None},
        "sorted": ["b", "a"],
        "text": "x",
    }
    assert set(samples) == set(CANONICALISERS), "a test sample for each registered canonicaliser"
    for name, value in samples.items():
        DigestSpec.from_dict(
            {"format": 1, "tables": {"t": {"key": ["id"], "include": ["id", "v"], "canonical": {"v": name}}}}
        )
        assert canonical_value(value, name) is not None
    with pytest.raises(SpecError, match=r"unknown canonicaliser 'float'; known: \['auto'"):
        DigestSpec.from_dict(
            {
                "format": 1,
                "tables": {"t": {"key": ["id"], "include": ["id", "v"], "canonical": {"v": "float"}}},
            }
        )


def test_a_key_the_schema_does_not_prove_unique_is_refused(fresh_db_url: str) -> None:
    _db(
        fresh_db_url,
        "CREATE TABLE k (id int PRIMARY KEY, code text, label text NOT NULL UNIQUE, tag text)",
        "INSERT INTO k VALUES (1, 'x', 'one', 't'), (2, 'x', 'two', 't')",
    )
    include = ["id", "code", "label", "tag"]
    with pytest.raises(SpecError, match=r"no unique index .* proves these keys unique.*k.key \['code'\]"):
        _digest(fresh_db_url, _spec({"k": {"key": ["code"], "include": include}}))
    for key in (["id"], ["label"], ["code", "id"]):  # a primary key, a unique NOT NULL column, a superset
        _digest(fresh_db_url, _spec({"k": {"key": key, "include": include}}))
    _digest(fresh_db_url, _spec({"k": {"key": ["tag"], "include": include, "ordered": False}}))  # a set


def test_dump_order_is_byte_order_whatever_the_collation(fresh_db_url: str) -> None:
    _db(
        fresh_db_url,
        'CREATE TABLE c (name text COLLATE "und-x-icu" PRIMARY KEY)',
        "INSERT INTO c VALUES ('b'), ('B'), ('a'), ('é')",
    )
    dump = postgres_dump(to_conninfo(fresh_db_url), _spec({"c": {"key": ["name"], "include": ["name"]}}))
    assert [r["key"][0] for r in dump.tables["c"].rows] == ["B", "a", "b", "é"]


def test_times_with_a_zone_have_one_form() -> None:
    plus_two = timezone(timedelta(hours=2))
    assert canonical_value(time(10, 0, tzinfo=plus_two)) == "10:00:00.000000+02:00:00"
    assert canonical_value(time(8, 0, tzinfo=UTC)) == "08:00:00.000000+00:00:00"
    assert canonical_value(time(8, 0)) == "08:00:00.000000"
