"""The claims adapter end to end on real PostgreSQL: digests, tasks, bad input, forks."""

from __future__ import annotations

import gc
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.dialects.postgresql.base import PGDialect

import statekit
from statekit.checks import check_task
from statekit.errors import ConfigError, EnvironmentClosed, SpecError
from statekit.postgres import PostgresServer
from statekit.settings import statekit_home
from statekit_examples.adapters.claims_app import ClaimsAdapter
from statekit_examples.apps.claims_app.config import Settings

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statekit.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


@pytest.fixture(scope="module")
def env(pg_url: str) -> Iterator[statekit.Environment]:
    with statekit.make("claims_app", db_url=pg_url) as made:
        yield made


def test_digest_is_the_same_from_two_fresh_processes_and_differs_by_seed(tmp_path: Path) -> None:
    """Each process starts its own embedded cluster and builds seed 7's world from nothing."""
    runs = [
        _cli("digest", "claims_app", "--seed", "7", "--json", env={"STATEKIT_HOME": str(tmp_path / h)})
        for h in "ab"
    ]
    for run in runs:
        assert run.returncode == 0, run.stderr
    first, second = (json.loads(r.stdout) for r in runs)
    assert first == second
    assert first["format"] == 2 and len(first["digest"]) == 64
    assert first["tables"]["claims"]["rows"] > 100
    other = _cli("digest", "claims_app", "--seed", "8", "--json", env={"STATEKIT_HOME": str(tmp_path / "a")})
    assert json.loads(other.stdout)["digest"] != first["digest"]


def test_a_new_model_column_makes_check_fail_naming_it(pg_url: str) -> None:
    run = _cli("check", "tests.adapters.new_column:ClaimsWithRiskBand", "--json", "--db-url", pg_url)
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert report["coverage"] is False
    coverage = [problem for problem in report["problems"] if problem.startswith("coverage:")]
    assert coverage and "claims: risk_band" in coverage[0], report["problems"]


@pytest.mark.parametrize("kind", ClaimsAdapter(scale=1).task_kinds())
def test_every_task_kind_is_valid(env: statekit.Environment, kind: str) -> None:
    assert check_task(env, kind, seed=11, repeats=5) is None  # SWE-bench's rule, five times over


@pytest.mark.parametrize(
    ("reason", "reward"),
    [("no", 0.0), ("rejected", 0.0), ("Filed 41 days after the incident: past the 30-day window", 1.0)],
)
def test_a_late_filing_denial_must_name_the_rule(
    env: statekit.Environment, reason: str, reward: float
) -> None:
    """The prompt asks for a reason that names the rule; any other reason is not the task done."""
    env.reset(seed=11, options={"task": "deny_late_filing"})
    [deny, submit] = env.adapter.reference_actions(env.task)
    env.step({**deny, "reason": reason})
    assert env.step(submit)[1] == reward


def test_tools_reach_the_app_and_errors_are_observations(env: statekit.Environment) -> None:
    _, info = env.reset(seed=7)
    listed, *_ = env.step({"tool": "list_claims", "status": "submitted", "limit": 3})
    assert listed["status"] == 200 and len(listed["body"]["items"]) == 3
    missing, reward, *_ = env.step({"tool": "get_claim", "reference": "CLM-999999"})
    assert missing["status"] == 404 and missing["body"]["error"]["code"] and reward == 0.0
    bad, *_ = env.step({"tool": "get_claim", "reference": "'; DROP TABLE claims; --"})
    assert bad["error"]["code"] == "invalid_arguments" and "reference" in bad["error"]["message"]
    unknown, *_ = env.step({"tool": "delete_everything"})
    assert unknown["error"]["code"] == "unknown_tool"
    assert env.state().digest == info["digest"], "reads and rejected actions change nothing"


@pytest.mark.parametrize(
    "action",
    [
        {"tool": "get_claim", "reference": "CLM-000149\n"},  # Python's `$` matches before a final newline
        {"tool": "add_note", "reference": "CLM-000149\n", "body": "x"},
        {
            "tool": "file_claim",
            "policy_number": "P",
            "incident_date": "2026-01-01\n",
            "amount": "10",
            "description": "d",
            "loss_line1": "l",
            "loss_city": "c",
            "loss_postcode": "p",
            "loss_country": "US",
        },
        {"tool": "list_claims", "q": "\ud800"},  # a lone surrogate: valid JSON, not valid text
        {"tool": "add_note", "reference": "CLM-000149", "body": "a\udfffb"},
        {
            "tool": "list_claims",
            "q": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
        },
    ],
    ids=["newline-ref", "newline-ref-note", "newline-date", "lone-surrogate", "lone-surrogate-body", "deep"],
)
def test_schema_edge_cases_are_refused_as_arguments_not_crashes(
    env: statekit.Environment, action: dict[str, object]
) -> None:
    _, info = env.reset(seed=7)
    obs, reward, terminated, truncated, _ = env.step(action)
    assert obs["error"]["code"] in ("invalid_arguments", "malformed_action"), obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.state().digest == info["digest"]
    assert env.step({"tool": "list_claims", "limit": 1})[0]["status"] == 200, "the episode goes on"


def test_integral_floats_are_integers_as_json_schema_says(env: statekit.Environment) -> None:
    _, info = env.reset(seed=7)
    waited, _, _, truncated, _ = env.step({"tool": "wait", "hours": 2.0})
    assert waited == {"waited_hours": 2} and not truncated
    moved = datetime.fromisoformat(env.state().clock) - datetime.fromisoformat(info["clock"])
    assert moved == timedelta(hours=2)
    listed, _, _, truncated, _ = env.step({"tool": "list_claims", "limit": 3.0})
    assert listed["status"] == 200 and len(listed["body"]["items"]) == 3 and not truncated
    half, *_ = env.step({"tool": "wait", "hours": 1.5})
    assert half["error"]["code"] == "invalid_arguments"


def test_hidden_facts_are_not_in_observations_or_info(env: statekit.Environment) -> None:
    obs, info = env.reset(seed=11, options={"task": "deny_duplicate"})
    facts = env.task.facts  # type: ignore[attr-defined]
    assert facts["reference"] not in json.dumps(obs) + json.dumps(info)


def test_snapshot_and_restore_fork_the_database(env: statekit.Environment) -> None:
    env.reset(seed=9, options={"task": "triage_overdue"})
    script = env.adapter.reference_actions(env.task)
    env.step(script[0])
    fork = env.snapshot()
    at_fork = env.state()
    after_note = env.step(script[1])
    env.restore(fork)
    assert env.state().digest == at_fork.digest
    assert env.state().step_count == at_fork.step_count
    assert env.step(script[1])[:4] == after_note[:4]


def test_failed_resets_leave_no_database_behind(
    env: statekit.Environment, pg_cluster: PostgresServer
) -> None:
    env.reset(seed=7)
    live = env.world.handle["db"].id
    before = pg_cluster.databases("skclaims_e_")
    assert live in before
    env.step({"tool": "list_claims", "limit": 1})
    state = env.state()
    with pytest.raises(ConfigError, match="unknown task kind 'nope'"):
        env.reset(seed=7, options={"task": "nope"})
    with pytest.raises(ConfigError, match=r"takes no reset option\(s\) \['tsak'\]; it takes \['task'\]"):
        env.reset(seed=7, options={"tsak": "approve"})  # once accepted and ignored by claims alone
    assert pg_cluster.databases("skclaims_e_") == before, "the refused copy is gone, the live episode stays"
    assert env.state() == state and env.world.handle["db"].id == live
    assert env.step({"tool": "list_claims", "limit": 1})[0]["status"] == 200


def test_a_closed_environment_creates_no_database_copy_or_golden(
    pg_url: str, pg_cluster: PostgresServer
) -> None:
    files = statekit_home() / "files" / "claims_app" / "uploads"
    made = statekit.make("claims_app", db_url=pg_url)
    made.reset(seed=7)
    made.close()
    databases = pg_cluster.databases("skclaims_")
    trees = sorted(str(p.relative_to(files)) for p in files.glob("*/*"))
    for call in (lambda: made.reset(seed=9), made.snapshot, lambda: made.prefetch([10])):
        with pytest.raises(EnvironmentClosed):
            call()
    assert pg_cluster.databases("skclaims_") == databases
    assert sorted(str(p.relative_to(files)) for p in files.glob("*/*")) == trees


def test_closed_environments_and_builds_leave_nothing_of_their_apps_or_engines_alive(pg_url: str) -> None:
    """A worker opens thousands of sessions and builds hundreds of worlds. Each closed session's app
    and each engine it or a build made must be garbage, not kept by a library's module-level cache
    (FastAPI's callable classification, the ORM's flush statements per dialect) until hundreds of
    later ones push it out."""

    def alive() -> list[object]:
        gc.collect()
        # type(), not isinstance(): isinstance reads __class__, which a lazy object (Django's
        # admin.site, in a process that imported Django) resolves by setting itself up
        return [o for o in gc.get_objects() if issubclass(type(o), (Settings, PGDialect))]

    kept = alive()  # held, so no id in ``before`` is reused by a new object
    before = {id(o) for o in kept}
    fresh = secrets.SystemRandom().sample(range(10**6, 2**31), 2)  # worlds no test built
    for seed in (*fresh, 7):
        with statekit.make("claims_app", db_url=pg_url) as made:
            made.reset(seed=seed)
            assert seed == 7 or made.cache.last == "miss", "a fresh seed's reset builds its world"
            mine = made.step({"tool": "list_claims", "assigned_to_me": True, "limit": 1})[0]
            reference = mine["body"]["items"][0]["reference"]
            note = made.step({"tool": "add_note", "reference": reference, "body": "seen"})[0]
            assert note["status"] == 201, note  # a write: the ORM flushed through this app's engine
            assert any(id(o) not in before for o in alive()), "the open environment's app is alive"
    with statekit.make("claims_app", db_url=pg_url) as made:  # the fresh worlds go, on any server
        for seed in fresh:
            made.strategy.drop(made.cache.key(seed))
    left = [o for o in alive() if id(o) not in before]
    holders = {type(r).__qualname__ for o in left for r in gc.get_referrers(o) if r is not left}
    assert left == [], f"kept by {sorted(holders)}"
    del kept


def test_bad_adapter_inputs_are_clear_errors(tmp_path: Path, pg_url: str) -> None:
    run = _cli("digest", "no_such_adapter", "--seed", "1")
    assert run.returncode == 2 and "unknown adapter 'no_such_adapter'" in run.stderr

    class BadSpec(ClaimsAdapter):
        pass

    broken = tmp_path / "claims.toml"
    broken.write_text(
        "format = 1\n[directories]\nuploads = 'documents'\n"
        "[tables.claims]\nkey = ['reference']\ninclude = ['reference', 'colour']\n"
    )
    import statekit_examples.adapters.claims_app as module

    original = module.SPEC_PATH
    module.SPEC_PATH = broken
    try:
        adapter = BadSpec()
    finally:
        module.SPEC_PATH = original
    with (
        statekit.make(adapter, db_url=pg_url) as bad_env,
        pytest.raises(SpecError, match=r"lacks: claims.colour"),
    ):
        bad_env.reset(seed=7)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_uploads_are_part_of_the_world_and_reset_byte_identical(env: statekit.Environment) -> None:
    _, info = env.reset(seed=7, options={"task": "triage_overdue"})
    world = env.world
    assert world is not None
    uploads = Path(world.handle["uploads"].location)
    golden = _tree(uploads)
    assert golden, "the seed script wrote the fixtures' documents into the upload directory"
    ref = env.adapter.reference_actions(env.task)[0]["reference"]
    obs, *_ = env.step(
        {"tool": "upload_document", "reference": ref, "filename": "estimate.txt", "content": "roof: $1200"}
    )
    assert obs["status"] == 201
    after = _tree(uploads)
    assert len(after) == len(golden) + 1 and any(name.endswith("estimate.txt") for name in after)
    report = env.digest_report()
    assert report.digest != info["digest"]
    assert report.tables["files:uploads"].rows > 0
    env.reset(seed=7, options={"task": "triage_overdue"})
    fresh = env.world
    assert fresh is not None
    assert _tree(Path(fresh.handle["uploads"].location)) == golden, "the tree is byte-identical to the golden"
    assert env.state().digest == info["digest"]


def test_the_digest_sees_a_changed_file(env: statekit.Environment) -> None:
    _, info = env.reset(seed=7)
    world = env.world
    assert world is not None
    some_file = next(p for p in Path(world.handle["uploads"].location).rglob("*") if p.is_file())
    some_file.write_bytes(some_file.read_bytes() + b"!")
    assert env.state().digest != info["digest"]
    diff = env.dump().tables["files:uploads"]
    assert any(r["row"]["path"].endswith(some_file.name) for r in diff.rows)
