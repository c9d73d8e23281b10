"""Collateral damage: the changes an episode made, which of them its task expected, and the reward."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import statekit
from statekit import Change, ChangeSet, ResetNeeded
from statekit.collateral import GoldenDumps
from statekit.digest.dump import StateDump, TableDump
from statekit.kit import Allow, Expectation
from statekit.testing.ledger import LedgerAdapter


@pytest.fixture
def env() -> Iterator[statekit.Environment]:
    with statekit.make(LedgerAdapter()) as made:
        yield made


def _reference(env: statekit.Environment) -> list[dict]:
    return env.adapter.reference_actions(env.task)


def test_changes_are_the_rows_that_differ_from_the_golden(env: statekit.Environment) -> None:
    env.reset(seed=3)
    assert len(env.changes()) == 0
    transfer = _reference(env)[0]
    env.step(transfer)
    changes = env.changes()
    changed = {c.key[0]: c for c in changes.in_table("accounts")}
    assert set(changed) == {transfer["source"], transfer["target"]}
    source = changed[transfer["source"]]
    assert source.kind == "changed" and source.columns == {"cents"}
    assert source.before is not None and source.after is not None
    assert source.before["cents"] - source.after["cents"] == transfer["cents"]
    (entry,) = changes.in_table("journal")
    assert entry.kind == "added" and entry.row["target"] == transfer["target"]


def test_a_stray_change_zeroes_the_reward_and_the_verdict_names_it(env: statekit.Environment) -> None:
    env.reset(seed=3)
    transfer, submit = _reference(env)
    others = sorted(set(env.world.handle["accounts"]) - {transfer["source"], transfer["target"]})
    env.step(transfer)
    env.step({"tool": "transfer", "source": others[0], "target": others[1], "cents": 1})
    _, reward, terminated, _, info = env.step(submit)
    assert terminated and reward == 0.0
    verdict = info["verdict"]
    assert verdict["score"] == 1.0 and verdict["reward"] == 0.0 and verdict["penalty"] is None
    assert verdict["stray_count"] == 3  # two accounts and a journal entry
    assert {tuple(c["key"]) for c in verdict["stray"] if c["table"] == "accounts"} == {
        (o,) for o in others[:2]
    }
    assert env.last_verdict is not None and len(env.last_verdict.stray) == 3


def test_the_reference_keeps_its_reward_and_reports_no_stray(env: statekit.Environment) -> None:
    env.reset(seed=4)
    for action in _reference(env):
        _, reward, *_, info = env.step(action)
    assert reward == 1.0 and info["verdict"]["stray_count"] == 0


def test_a_failed_task_is_not_diffed(env: statekit.Environment) -> None:
    env.reset(seed=4)
    _, reward, *_, info = env.step({"tool": "submit"})
    assert reward == 0.0 and "verdict" not in info and env.last_verdict is None


def test_changes_need_an_episode(env: statekit.Environment) -> None:
    with pytest.raises(ResetNeeded):
        env.changes()


def test_changes_after_a_fork_are_still_measured_from_the_seeds_golden(env: statekit.Environment) -> None:
    env.reset(seed=5)
    env.step(_reference(env)[0])
    fork = env.snapshot()
    env.reset(seed=6)
    env.restore(fork)
    assert {c.table for c in env.changes()} == {"accounts", "journal"}


def _change(table: str, kind: str, key: object, before: dict | None, after: dict | None) -> Change:
    return Change(table, kind, (key,), before, after)


CLAIM = _change(
    "claims",
    "changed",
    "C-1",
    {"id": "C-1", "status": "open", "n": 1},
    {"id": "C-1", "status": "shut", "n": 1},
)
NOTE = _change("notes", "added", 7, None, {"claim": "C-1", "body": "hi"})
OTHER_NOTE = _change("notes", "added", 8, None, {"claim": "C-2", "body": "hi"})


@pytest.mark.parametrize(
    ("rule", "matches"),
    [
        (Allow.changed("claims", key=["C-1"]), [CLAIM]),
        (Allow.changed("claims", key=["C-2"]), []),
        (Allow.changed("claims", columns=["status"]), [CLAIM]),
        (Allow.changed("claims", columns=["n"]), []),
        (Allow.added("notes", where=lambda row: row["claim"] == "C-1"), [NOTE]),
        (Allow.added("claims"), []),
        (Allow.any("notes"), [NOTE, OTHER_NOTE]),
        (Allow.removed("notes"), []),
    ],
)
def test_allow_rules_match_by_table_kind_key_columns_and_predicate(
    rule: Allow, matches: list[Change]
) -> None:
    assert [c for c in (CLAIM, NOTE, OTHER_NOTE) if rule.matches(c)] == matches


def test_a_penalty_costs_each_stray_change_down_to_zero() -> None:
    changes = ChangeSet((CLAIM, NOTE, OTHER_NOTE))
    allowed = (
        Allow.changed("claims", key=["C-1"]),
        Allow.added("notes", where=lambda r: r["claim"] == "C-1"),
    )
    assert Expectation(allowed, penalty=0.25).judge(1.0, changes).reward == 0.75
    assert Expectation(allowed[:1], penalty=0.25).judge(1.0, changes).reward == 0.5
    assert Expectation(allowed[:1], penalty=0.75).judge(1.0, changes).reward == 0.0
    strict = Expectation(allowed).judge(1.0, changes)
    assert strict.reward == 0.0 and strict.stray == (OTHER_NOTE,)
    assert Expectation((*allowed, Allow.any("notes"))).judge(0.5, changes).reward == 0.5


def test_bad_expectations_are_refused_naming_the_problem() -> None:
    with pytest.raises(ValueError, match="unknown change kinds"):
        Allow("claims", frozenset({"edited"}))
    with pytest.raises(ValueError, match="penalty must be positive"):
        Expectation((), penalty=0)


def _dump(**tables: TableDump) -> StateDump:
    return StateDump(tables=dict(tables))


def test_changeset_between_dumps_keeps_rows_before_and_after() -> None:
    rows = [{"key": [k], "row": {"id": k, "v": v}} for k, v in [(1, "a"), (2, "b")]]
    golden = _dump(t=TableDump(["id"], True, rows), gone=TableDump(["id"], True, rows[:1]))
    now = _dump(
        t=TableDump(
            ["id"],
            True,
            [rows[0], {"key": [2], "row": {"id": 2, "v": "B"}}, {"key": [3], "row": {"id": 3, "v": "c"}}],
        ),
        s=TableDump(["x"], False, [{"key": ["q"], "row": {"x": "q"}}]),
    )
    found = {(c.table, c.kind, c.key): c for c in ChangeSet.between(golden, now)}
    assert set(found) == {
        ("t", "changed", (2,)),
        ("t", "added", (3,)),
        ("gone", "removed", (1,)),
        ("s", "added", ("q",)),
    }
    edit = found[("t", "changed", (2,))]
    assert edit.before == {"id": 2, "v": "b"} and edit.after == {"id": 2, "v": "B"} and edit.columns == {"v"}
    assert len(ChangeSet.between(golden, golden)) == 0


def test_golden_dumps_load_once_and_forget_the_least_recent() -> None:
    loads: list[str] = []

    def load(key: str) -> StateDump:
        loads.append(key)
        return _dump()

    cache = GoldenDumps(capacity=2)
    for key in ["a", "b", "a", "c", "b", "a"]:
        cache.get(key, lambda key=key: load(key))  # type: ignore[misc]
    assert loads == ["a", "b", "c", "b", "a"]
    with pytest.raises(ValueError):
        GoldenDumps(capacity=0)
