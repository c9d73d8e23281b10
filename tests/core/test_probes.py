"""Exploit probes: schema-driven degenerate policies catch a deliberately weak verifier, and only it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import statekit
from statekit.checks import ProbeSettings, check_env, check_exploits
from statekit.checks.arguments import Harvest
from statekit.checks.arguments import argument_tuples as _tuples
from statekit.testing.ledger import LedgerAdapter
from tests.adapters.desk import HiddenDesk, PagedDesk, StrictDesk, WeakDesk

ROOT = Path(__file__).resolve().parents[2]
REF = {"type": "string", "pattern": "^T-[0-9]{3}$"}


def test_harvest_finds_pattern_matches_in_values_and_prompt_words_prompt_first() -> None:
    seen = Harvest()
    seen.add({"task": "Close ticket T-007, then submit."}, first=True)
    seen.add({"tickets": [{"ticket": "T-001", "owner": "ann"}, {"ticket": "T-002", "owner": "T-007"}]})
    seen.add({"tickets": [{"ticket": "T-003", "queue": "ops"}], "note": "see T-009 and T-1"})
    assert seen.values("ticket", REF) == ["T-007", "T-002", "T-001", "T-003", "T-009"]


def test_harvest_fills_free_strings_from_values_under_the_same_key() -> None:
    seen = Harvest()
    seen.add({"task": "File a claim."}, first=True)
    seen.add({"items": [{"policy_number": "POL-1"}, {"policy_number": "POL-2"}, {"owner": "x"}]})
    assert seen.values("policy_number", {"type": "string"}) == ["POL-1", "POL-2"]
    assert seen.values("body", {"type": "string"}) is None  # not an entity: free text gets a filler
    assert seen.values("policy_number", {"type": "string", "maxLength": 3}) == []
    assert seen.values("state", {"type": "string", "enum": ["a"]}) is None


def test_argument_tuples_are_every_combination_when_few_else_each_value_once() -> None:
    assert _tuples({"a": ["1", "2"], "b": ["x", "y"]}, cap=10) == [
        {"a": "1", "b": "x"},
        {"a": "1", "b": "y"},
        {"a": "2", "b": "x"},
        {"a": "2", "b": "y"},
    ]
    diagonal = _tuples({"a": ["1", "2", "3"], "b": ["x", "y"]}, cap=5)
    assert diagonal == [{"a": "1", "b": "x"}, {"a": "2", "b": "y"}, {"a": "3", "b": "x"}]
    assert _tuples({"a": []}, cap=5) == []


def test_probes_catch_a_verifier_that_checks_only_the_target_row() -> None:
    with statekit.make(WeakDesk()) as env:
        report = check_exploits(env, seeds=[3, 4], settings=ProbeSettings(budget=50))
    won = {run.policy for run in report.exploits}
    assert "every_entity[close_ticket]" in won
    run = next(r for r in report.exploits if r.policy == "every_entity[close_ticket]")
    assert run.terminated and run.actions[-1] == {"tool": "submit"}
    closed = {a["ticket"] for a in run.actions if a["tool"] == "close_ticket"}
    assert len(closed) == 12, "every ticket the listing showed"
    assert "close_ticket" in report.exploited_kinds and "every_entity[close_ticket]" in run.describe()


def test_the_same_probes_find_nothing_once_the_task_declares_its_changes() -> None:
    with statekit.make(StrictDesk()) as env:
        report = check_exploits(env, seeds=[3, 4], settings=ProbeSettings(budget=50))
    assert report.runs and not report.exploits and not report.notes
    table = report.rewards()["close_ticket"]
    assert set(table) == {
        "do_nothing",
        "submit_at_once[submit]",
        "submit_at_once[list_tickets]",
        "every_entity[close_ticket]",
        "random_walk",
    }
    assert all(reward == 0.0 for rewards in table.values() for reward in rewards.values())
    assert all(set(rewards) == {3, 4} for rewards in table.values()), "every policy on every seed"
    do_nothing = next(r for r in report.runs if r.policy == "do_nothing")
    assert len(do_nothing.actions) == 50 and not do_nothing.terminated, "the whole budget, never finishing"


def test_a_floor_allows_partial_credit_up_to_it() -> None:
    class FlooredDesk(WeakDesk):
        exploit_floors = {"close_ticket": 1.0}

    with statekit.make(FlooredDesk()) as env:
        report = check_exploits(env, seeds=[3], settings=ProbeSettings(budget=50))
    assert report.runs and not report.exploits


def test_check_env_counts_an_exploited_task_as_not_robust_and_excludes_it() -> None:
    with statekit.make(WeakDesk()) as env:
        report = check_env(env, repeats=2, task_repeats=1, probes=ProbeSettings(budget=40), controls=False)
    assert report.tasks_valid and report.tasks_robust is False and not report.ok
    assert "close_ticket" in report.excluded_tasks
    assert any(e["policy"] == "every_entity[close_ticket]" for e in report.exploits)
    with statekit.make(LedgerAdapter()) as env:
        skipped = check_env(env, repeats=2, task_repeats=1, probes=None, controls=False)
    assert skipped.tasks_robust is None and any("not checked" in note for note in skipped.notes)


def test_a_cursor_starts_at_the_first_page_so_the_probes_find_what_to_act_on() -> None:
    """``page`` says where a listing starts: looking around at its largest value (page 20) showed an
    empty page, found no ticket, and the writing tool was never tried."""
    with statekit.make(PagedDesk()) as env:
        report = check_exploits(env, seeds=[3], settings=ProbeSettings(budget=50, walk_steps=0))
    looked = next(r for r in report.runs if r.policy == "random_walk")  # it looks around first
    assert looked.actions[0] == {"tool": "list_tickets", "page": 1}
    run = next(r for r in report.runs if r.policy == "every_entity[close_ticket]")
    assert run.entities == 3 and run.actions[0] == {"tool": "close_ticket", "ticket": "T-001"}
    assert run.changed and run.terminated and not report.unexercised()


def test_probes_that_touch_nothing_leave_the_kind_unexercised_never_robust() -> None:
    with statekit.make(HiddenDesk()) as env:
        report = check_env(env, repeats=2, task_repeats=1, probes=ProbeSettings(budget=40), controls=False)
    assert report.tasks_valid and report.tasks_robust is None and report.ok
    why = report.unexercised["close_ticket"]
    assert why.startswith("no probe changed the world"), why
    assert f"tasks_robust[close_ticket]: not exercised: {why}" in report.notes
    played = report.probes["close_ticket"]
    assert {p["policy"] for p in played} >= {"do_nothing", "random_walk", "submit_at_once[submit]"}
    assert not any(p["changed_the_world"] for p in played)
    assert any(p["reached_the_verifier"] and p["calls"] for p in played)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statekit.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_statekit_check_names_the_task_kind_and_the_winning_policy() -> None:
    run = _cli("check", "tests.adapters.desk:WeakDesk", "--json", "--skip-controls", "--probe-budget", "40")
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert report["tasks_valid"] is True and report["tasks_robust"] is False
    problem = next(p for p in report["problems"] if p.startswith("tasks_robust"))
    assert "task 'close_ticket'" in problem and "every_entity[close_ticket]" in problem
    assert set(report["excluded_tasks"]) == {"close_ticket"}
    assert report["exploits"][0]["actions"][-1] == {"tool": "submit"}

    strict = _cli(
        "check", "tests.adapters.desk:StrictDesk", "--json", "--skip-controls", "--probe-budget", "40"
    )
    assert strict.returncode == 0, strict.stdout + strict.stderr
    assert json.loads(strict.stdout)["tasks_robust"] is True


@pytest.mark.parametrize(("adapter", "passes"), [("WeakDesk", False), ("StrictDesk", True)])
def test_the_pytest_plugin_generates_the_probes_per_task_kind(
    tmp_path: Path, adapter: str, passes: bool
) -> None:
    (tmp_path / "pytest.ini").write_text(
        f"[pytest]\nstatekit_adapters = tests.adapters.desk:{adapter}\nstatekit_seeds = 3,4\n"
    )
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    args = [
        "-p",
        "statekit.pytest_plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "-c",
        str(tmp_path / "pytest.ini"),
    ]
    run = subprocess.run(  # only statekit's plugin: the others' imports would dominate the run
        [sys.executable, "-m", "pytest", *args, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        timeout=300,
    )
    name = f"statekit[tests.adapters.desk:{adapter}]::test_rewards_resist_exploits[close_ticket]"
    if passes:
        assert run.returncode == 0, run.stdout
        assert "12 passed" in run.stdout  # test_nothing and the plan's eleven steps on one task kind
    else:
        assert run.returncode == 1 and name in run.stdout and "1 failed" in run.stdout, run.stdout
        assert "every_entity[close_ticket]" in run.stdout
