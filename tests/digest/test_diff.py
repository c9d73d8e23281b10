"""Dumps, diffs, first divergence and drift: the digest's debugging tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import statekit
from statekit.digest.canonical import canonical_value
from statekit.digest.diff import diff_dumps
from statekit.digest.dump import StateDump, TableDump
from statekit.digest.postgres import postgres_digest, postgres_dump
from statekit.digest.spec import DigestSpec
from statekit.errors import SpecError
from statekit.postgres import PostgresServer
from statekit.postgres.server import to_conninfo

ROOT = Path(__file__).resolve().parents[2]
SPEC = DigestSpec.from_dict(
    {
        "format": 1,
        "tables": {
            "items": {"key": ["sku"], "include": ["sku", "name", "price"], "exclude": {"id": "surrogate"}},
            "tags": {
                "key": ["id"],
                "include": ["label", "weight"],
                "exclude": {"id": "surrogate id: a set of labels"},
                "ordered": False,
                "canonical": {"weight": "number"},
            },
        },
    }
)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "statekit.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )


def _world(server: PostgresServer, name: str, *statements: str) -> str:
    server.drop_database(name)
    url = server.create_database(name)
    with psycopg.connect(to_conninfo(url), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE items (id serial PRIMARY KEY, sku text NOT NULL UNIQUE, name text,"
            " price numeric(8,2))"
        )
        conn.execute("CREATE TABLE tags (id serial PRIMARY KEY, label text, weight numeric(6,2))")
        conn.execute(
            "INSERT INTO items (sku, name, price)"
            " VALUES ('a', 'apple', 1.00), ('b', 'bean', 2.00), ('c', 'corn', 3.00)"
        )
        conn.execute("INSERT INTO tags (label, weight) VALUES ('fresh', 1), ('local', 2.5)")
        for statement in statements:
            conn.execute(statement)
    return to_conninfo(url)


def test_diff_names_exactly_one_cell_one_added_and_one_removed_row(
    pg_cluster: PostgresServer, tmp_path: Path
) -> None:
    a = _world(pg_cluster, "diff_a")
    b = _world(
        pg_cluster,
        "diff_b",
        "UPDATE items SET price = 2.50 WHERE sku = 'b'",
        "INSERT INTO items (sku, name, price) VALUES ('d', 'date', 4.00)",
        "DELETE FROM items WHERE sku = 'a'",
    )
    dump_a, dump_b = postgres_dump(a, SPEC), postgres_dump(b, SPEC)
    assert dump_a.digest() == postgres_digest(a, SPEC), "a dump hashes to the digest of its world"
    dump_a.save(tmp_path / "a.json")
    dump_b.save(tmp_path / "b.json")
    run = _cli("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json")
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert report == {
        "equal": False,
        "tables": {
            "items": {
                "added": [{"key": ["d"], "row": {"name": "date", "price": "4.00", "sku": "d"}}],
                "removed": [{"key": ["a"], "row": {"name": "apple", "price": "1.00", "sku": "a"}}],
                "changed": [{"key": ["b"], "columns": {"price": ["2.00", "2.50"]}}],
                "only_in": None,
            },
            "sequences:public": {  # the insert drew an id: the next row's id moved too
                "added": [],
                "removed": [],
                "changed": [{"key": ["items_id_seq"], "columns": {"last_value": [3, 4]}}],
                "only_in": None,
            },
        },
    }
    human = _cli("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert human.returncode == 1 and "price" in human.stdout and "changed" in human.stdout
    same = _cli("diff", str(tmp_path / "a.json"), str(tmp_path / "a.json"), "--json")
    assert same.returncode == 0 and json.loads(same.stdout) == {"equal": True, "tables": {}}
    for name in ("diff_a", "diff_b"):
        pg_cluster.drop_database(name)


def test_set_tables_ignore_surrogate_ids_and_numbers_canonicalise(pg_cluster: PostgresServer) -> None:
    a = _world(pg_cluster, "set_a")
    b = _world(
        pg_cluster,
        "set_b",
        "DELETE FROM tags",
        "INSERT INTO tags (id, label, weight) VALUES (40, 'local', 2.50), (41, 'fresh', 1.0)",
    )
    assert postgres_digest(a, SPEC) == postgres_digest(b, SPEC)
    assert diff_dumps(postgres_dump(a, SPEC), postgres_dump(b, SPEC)).equal
    assert canonical_value(Decimal("25.0"), "number") == canonical_value(25, "number") == "25"
    assert canonical_value(Decimal("25.0")) == "25.0", "without 'number' the scale is kept"
    for name in ("set_a", "set_b"):
        pg_cluster.drop_database(name)


def test_a_tampered_or_foreign_dump_is_rejected(tmp_path: Path) -> None:
    dump = StateDump(tables={"t": TableDump(key=["k"], ordered=True, rows=[{"key": [1], "row": {"k": 1}}])})
    path = tmp_path / "d.json"
    dump.save(path)
    data = json.loads(path.read_text())
    data["tables"]["t"]["rows"][0]["row"]["k"] = 2
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match="do not hash to the digest"):
        StateDump.load(path)
    (tmp_path / "x.json").write_text("[]")
    run = _cli("diff", str(tmp_path / "x.json"), str(tmp_path / "x.json"))
    assert run.returncode == 2 and "not a statekit dump" in run.stderr


rows_strategy = st.lists(
    st.fixed_dictionaries(
        {"k": st.integers(0, 6), "v": st.sampled_from(["x", "y", None]), "n": st.integers(0, 2)}
    ),
    max_size=6,
)


def _table(rows: list[dict[str, Any]], mode: str) -> TableDump:
    if mode == "keyed":
        unique = list({r["k"]: r for r in rows}.values())
        ordered = sorted(unique, key=lambda r: r["k"])
        return TableDump(key=["k"], ordered=True, rows=[{"key": [r["k"]], "row": r} for r in ordered])
    if mode == "surrogate":
        ordered = sorted(rows, key=lambda r: r["k"])
        return TableDump(
            key=["id"],
            ordered=True,
            rows=[{"key": [i], "row": {"v": r["v"], "n": r["n"]}} for i, r in enumerate(ordered)],
        )
    content = sorted(({"v": r["v"] or "", "n": r["n"]} for r in rows), key=lambda r: (r["v"], r["n"]))
    return TableDump(key=["id"], ordered=False, rows=[{"key": [i], "row": r} for i, r in enumerate(content)])


@settings(max_examples=300, deadline=None)
@given(
    mode=st.sampled_from(["keyed", "surrogate", "set"]),
    left=rows_strategy,
    right=rows_strategy,
    same=st.booleans(),
)
def test_equal_digests_iff_empty_diff(
    mode: str, left: list[dict[str, Any]], right: list[dict[str, Any]], same: bool
) -> None:
    a = StateDump(tables={"t": _table(left, mode)})
    b = StateDump(tables={"t": _table(left if same else right, mode)})
    assert (a.digest() == b.digest()) == diff_dumps(a, b).equal


def _script(env: statekit.Environment, priority: str) -> list[dict[str, Any]]:
    env.reset(seed=7, options={"task": "triage_overdue"})
    triage, note, _ = env.adapter.reference_actions(env.task)
    ref = triage["reference"]
    return [
        {"tool": "list_claims", "status": "submitted"},
        {"tool": "get_claim", "reference": ref},
        {"tool": "triage", "reference": ref, "priority": priority},
        note,
    ]


def test_diverge_reports_the_first_diverging_step(pg_url: str, tmp_path: Path) -> None:
    with statekit.make("claims_app", db_url=pg_url) as env:
        a, b = _script(env, "high"), _script(env, "low")
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    base = ["diverge", "claims_app", "--seed", "7", "--task", "triage_overdue", "--db-url", pg_url, "--json"]
    run = _cli(*base, "--actions", str(tmp_path / "a.json"), "--actions-b", str(tmp_path / "b.json"))
    assert run.returncode == 1, run.stderr
    found = json.loads(run.stdout)
    assert found["step"] == 3
    changed = found["diff"]["tables"]["claims"]["changed"]
    assert changed == [{"key": [a[2]["reference"]], "columns": {"priority": ["high", "low"]}}]
    same = _cli(*base, "--actions", str(tmp_path / "a.json"))
    assert same.returncode == 0 and json.loads(same.stdout)["step"] is None


def test_drift_names_a_new_model_column(pg_url: str) -> None:
    run = _cli(
        "drift",
        "claims_app",
        "tests.adapters.new_column:ClaimsWithRiskBand",
        "--seeds",
        "7",
        "--db-url",
        pg_url,
        "--json",
    )
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert report["schema"] == ["added column claims.risk_band (character varying)"]
    assert any("claims.risk_band" in problem for problem in report["coverage"])
    unchanged = _cli("drift", "claims_app", "claims_app", "--seeds", "7,8", "--db-url", pg_url, "--json")
    assert unchanged.returncode == 0, unchanged.stdout
    assert json.loads(unchanged.stdout)["drifted"] is False


def test_values_equal_in_python_but_not_in_a_digest_are_a_difference() -> None:
    """True == 1 in Python; their canonical forms (and so the digests) differ, so the diff must too."""
    a = StateDump(
        tables={"t": TableDump(key=["k"], ordered=True, rows=[{"key": [1], "row": {"k": 1, "v": True}}])}
    )
    b = StateDump(
        tables={"t": TableDump(key=["k"], ordered=True, rows=[{"key": [1], "row": {"k": 1, "v": 1}}])}
    )
    assert a.digest() != b.digest()
    assert diff_dumps(a, b).as_dict()["tables"]["t"]["changed"] == [{"key": [1], "columns": {"v": [True, 1]}}]
