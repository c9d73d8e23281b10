"""An exported episode continues identically elsewhere: another environment, another process."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import statekit
from statekit.errors import ConfigError, ResetError

LEDGER = "statekit.testing.ledger:LedgerAdapter"

_CONTINUE = """
import json, sys
import statekit
blob, url, actions = open(sys.argv[1], "rb").read(), sys.argv[2], json.loads(sys.argv[3])
with statekit.make("claims_app", db_url=url) as env:
    observation, info = env.import_episode(blob)
    played = {"first": observation, "imported": info["imported"], "steps": []}
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        played["steps"].append([obs, reward, terminated, truncated, env.state().digest])
print(json.dumps(played))
"""


def test_a_claims_episode_moves_to_another_process_and_continues_identically(
    pg_url: str, tmp_path: Path
) -> None:
    with statekit.make("claims_app", db_url=pg_url) as env:
        env.reset(seed=7)
        script = env.adapter.reference_actions(env.task)
        head, tail = script[: len(script) // 2], script[len(script) // 2 :]
        last = None
        for action in head:
            last = env.step(action)[0]
        blob = env.export_episode()
        here = []
        for action in tail:
            obs, reward, terminated, truncated, _ = env.step(action)
            here.append([obs, reward, terminated, truncated, env.state().digest])
    (tmp_path / "episode").write_bytes(blob)
    moved = subprocess.run(
        [sys.executable, "-c", _CONTINUE, str(tmp_path / "episode"), pg_url, json.dumps(tail)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert moved.returncode == 0, moved.stderr[-3000:]
    there = json.loads(moved.stdout.splitlines()[-1])
    assert there["first"] == last and there["imported"] == "changes"  # the world travelled, not the path
    assert there["steps"] == here and here[-1][2] is True  # the reference script ends the episode


def test_changes_that_cannot_be_applied_fall_back_to_replay_and_another_golden_is_refused(
    pg_url: str,
) -> None:
    with (
        statekit.make("claims_app", db_url=pg_url) as env,
        statekit.make("claims_app", db_url=pg_url) as other,
    ):
        env.reset(seed=7)
        for action in env.adapter.reference_actions(env.task)[:2]:
            env.step(action)
        body = json.loads(zlib.decompress(env.export_episode()))
        rows = body["changes"]["db"]["rows"]
        assert rows, "the episode wrote rows"
        table = rows[0][0]
        body["changes"]["db"]["rows"] = [*rows, [table, -1, "(no such row)"]]  # not this golden's
        _, info = other.import_episode(zlib.compress(json.dumps(body).encode()))
        assert info["imported"] == "replay"
        assert other.state().digest == env.state().digest and other.state().step_count == 2
        body["golden"] = "0" * 64
        with pytest.raises(ResetError, match="another golden world"):
            other.import_episode(zlib.compress(json.dumps(body).encode()))


def test_an_episode_exported_after_a_restore_continues_from_the_snapshot() -> None:
    with statekit.make(LEDGER) as env, statekit.make(LEDGER) as other:
        env.reset(seed=3)
        env.step({"tool": "balances"})
        fork = env.snapshot()
        at_fork = env.state()
        env.step({"tool": "transfer", "source": "nowhere", "target": "x", "cents": 1})
        env.restore(fork)
        other.import_episode(env.export_episode())
        assert (other.state().digest, other.state().step_count) == (at_fork.digest, at_fork.step_count)
        assert other.step({"tool": "balances"})[0] == env.step({"tool": "balances"})[0]


def test_a_blob_from_another_world_or_tampered_with_is_refused_with_the_reason(pg_url: str) -> None:
    with statekit.make(LEDGER) as ledger:
        ledger.reset(seed=1)
        ledger.step({"tool": "balances"})
        blob = ledger.export_episode()
        with statekit.make(LEDGER, max_steps=3) as capped, pytest.raises(ConfigError, match="max_steps"):
            capped.import_episode(blob)
        body = json.loads(zlib.decompress(blob))
        body["digest"] = "0" * 64
        with pytest.raises(ResetError, match="came out different"):
            ledger.import_episode(zlib.compress(json.dumps(body).encode()))
        with pytest.raises(ValueError, match="not an exported statekit episode"):
            ledger.import_episode(b"garbage")
        with pytest.raises(ConfigError, match="not JSON"):
            ledger.step(object())  # a malformed action: an error observation, and a path that cannot move
            ledger.export_episode()
    with statekit.make(LEDGER) as deep:
        deep.reset(seed=1)
        nested: dict = {"tool": "balances"}
        for _ in range(50_000):  # deeper than Python's recursion limit: refused as malformed, not a crash
            nested = {"tool": "balances", "x": nested}
        assert deep.step(nested)[0]["error"]["code"] == "malformed_action"
        with pytest.raises(ConfigError, match="not JSON"):
            deep.export_episode()
    with statekit.make("claims_app", db_url=pg_url) as claims, pytest.raises(ConfigError, match="adapter"):
        claims.import_episode(blob)
