"""``statekit spec init``: a draft that covers every table and column, noise marked for a decision."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from statekit.digest.postgres import postgres_digest
from statekit.digest.spec import DigestSpec
from statekit.errors import CoverageError
from statekit.postgres.server import to_conninfo

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statekit.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=os.environ,
        timeout=300,
    )


def test_a_draft_covers_every_column_and_marks_the_noise(fresh_db_url: str, tmp_path: Path) -> None:
    with psycopg.connect(to_conninfo(fresh_db_url), autocommit=True) as conn:
        conn.execute(
            """
            CREATE TABLE orders (id serial PRIMARY KEY, ref text NOT NULL UNIQUE, total numeric(10,2),
                                 view_count int, created_at timestamptz DEFAULT now(), shipped_on date);
            CREATE TABLE user_sessions (token text PRIMARY KEY, user_id int);
            CREATE TABLE tags (label text, weight int);
            CREATE TABLE events (id int, kind text, PRIMARY KEY (id, kind)) PARTITION BY LIST (kind);
            CREATE TABLE events_a PARTITION OF events FOR VALUES IN ('a');
            """
        )
    out = tmp_path / "spec.toml"
    run = _cli("spec", "init", "--url", fresh_db_url, "--out", str(out))
    assert run.returncode == 0, run.stderr
    assert "decision(s) marked DECIDE:" in run.stdout
    text = out.read_text()
    spec = DigestSpec.load(out)
    assert spec.tables["orders"].key == ("id",) and "ref" in spec.tables["orders"].include
    assert spec.tables["orders"].exclude["created_at"].startswith("DECIDE: looks like an audit timestamp")
    assert spec.tables["orders"].exclude["view_count"] == "DECIDE: looks like a counter"
    assert spec.ignored_tables["user_sessions"].startswith("DECIDE: looks like session rows")
    assert spec.tables["tags"].ordered is False and "# DECIDE: no primary key" in text
    assert "events_a" in spec.ignored_tables and spec.tables["events"].key == ("id", "kind")
    postgres_digest(to_conninfo(fresh_db_url), spec)  # covers everything: the digest's own check passes


def test_coverage_errors_are_grouped_by_table(fresh_db_url: str, tmp_path: Path) -> None:
    with psycopg.connect(to_conninfo(fresh_db_url), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE a (id int PRIMARY KEY, x int, y int); CREATE TABLE b (id int PRIMARY KEY, z int)"
        )
    spec = DigestSpec.from_dict({"format": 1, "tables": {"a": {"key": ["id"], "include": ["id"]}}})
    with pytest.raises(CoverageError) as refused:
        postgres_digest(to_conninfo(fresh_db_url), spec)
    message = str(refused.value)
    assert "4 column(s) in 2 table(s):\n  a: x, y\n  b: id, z\n" in message
    assert "statekit spec init" in message


def test_an_adapter_without_a_spec_yet_gets_one_drafted_from_its_world(tmp_path: Path, pg_url: str) -> None:
    """The order a new author works in: the adapter builds worlds before its spec exists; ``spec init``
    drafts the spec from one; anything that needs the spec says how to get it."""
    import statekit
    from tests.testing.shelf_adapters import SpeclessShelf

    out = tmp_path / "shelf.toml"
    run = _cli(
        "spec", "init", "tests.testing.shelf_adapters:SpeclessShelf", "--db-url", pg_url, "--out", str(out)
    )
    assert run.returncode == 0, run.stdout + run.stderr
    spec = DigestSpec.load(out)
    assert spec.tables["items"].key == ("id",) and {"name", "qty"} <= set(spec.tables["items"].include)
    with pytest.raises(statekit.ConfigError) as missing, statekit.make(SpeclessShelf(), db_url=pg_url) as env:
        env.reset(seed=1)
    assert "has no digest spec yet" in str(missing.value) and "statekit spec init" in str(missing.value)


def test_a_stub_adapter_and_an_empty_spec_are_refused_naming_the_fix(tmp_path: Path) -> None:
    import statekit
    from statekit.errors import SpecError
    from statekit.kit import SqlAdapter

    class Stub(SqlAdapter):
        name = "stub"

    with pytest.raises(statekit.ConfigError, match="does not implement build_world, start_episode"):
        statekit.make(Stub)
    empty = tmp_path / "empty.toml"
    empty.write_text("format = 1\n")
    with pytest.raises(SpecError, match="statekit spec init ADAPTER --out FILE"):
        DigestSpec.load(empty)
