"""TRL's own code drives statekit worlds: its schema extraction reads the generated tools, and its
``GRPOTrainer.train()`` runs real optimiser steps on claims seeds (``examples/train_trl.py``)."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from transformers.utils import get_json_schema

import statekit
from statekit.harness import HarnessConfig, create_app
from statekit.integrations.trl import (
    RESERVED,
    InfrastructureFailure,
    StatekitToolEnv,
    _tool_method,
    environment_factory,
)
from statekit.servers import ThreadedServer

from .conftest import LEDGER, reference

ROOT = Path(__file__).resolve().parents[2]


def play(env: StatekitToolEnv, seed: int, script: list[dict[str, Any]]) -> dict[str, Any]:
    """One rollout as TRL plays it: reset(**row), tool methods by name with keyword arguments."""
    first = env.reset(prompt=[{"role": "user", "content": "go"}], seed=seed)
    observations = [
        json.loads(getattr(env, a["tool"])(**{k: v for k, v in a.items() if k != "tool"})) for a in script
    ]
    return {"first": json.loads(first), "observations": observations, "reward": env.get_reward(), **env.info}


def test_transformers_reads_each_tool_as_the_environment_describes_it() -> None:
    env = environment_factory(LEDGER)()
    schemas = {
        name: get_json_schema(getattr(env, name))["function"] for name in ("balances", "transfer", "submit")
    }
    with statekit.make(LEDGER) as direct:
        direct.reset(seed=0)
        tools = {t["name"]: t for t in direct.tools}
    for name, schema in schemas.items():
        assert schema["description"] == tools[name]["description"]
        expected = tools[name]["input_schema"]
        assert sorted(schema["parameters"]["properties"]) == sorted(expected.get("properties", {}))
        assert sorted(schema["parameters"].get("required", [])) == sorted(expected.get("required", []))
    assert schemas["transfer"]["parameters"]["properties"]["cents"]["type"] == "integer"
    env._close()


def test_in_process_and_served_rollouts_match_statekit_and_score_its_verifier(served_ledger: str) -> None:
    script = reference(3)
    local = play(environment_factory(LEDGER)(), 3, script)
    remote = play(environment_factory(url=served_ledger)(), 3, script)
    assert local == remote
    with statekit.make(LEDGER) as env:
        first, info = env.reset(seed=3)
        steps = [env.step(action) for action in script]
    assert local["first"] == first and local["initial_digest"] == info["digest"]
    assert local["observations"] == [s[0] for s in steps]
    assert local["reward"] == sum(s[1] for s in steps) == 1.0


def test_bad_rows_and_malformed_calls_are_answered_not_crashed() -> None:
    env = environment_factory(LEDGER)()
    with pytest.raises(ValueError, match="integer 'seed' column"):
        env.reset(prompt="no seed here")
    env.reset(seed=4)
    wrong = json.loads(env.transfer(source="nobody", target=7, cents="lots"))  # the model's bad call
    assert "error" in wrong and env.info["steps"][-1]["reward"] == 0.0
    json.loads(env.submit())
    assert json.loads(env.balances())["error"]["code"] == "episode_over"
    assert env.get_reward() == 0.0  # a finished, wrong episode: the verifier's 0, not a failure
    env._close()


def test_a_group_shares_one_world_and_a_stray_start_is_refused() -> None:
    factory = environment_factory(LEDGER)
    group = [factory() for _ in range(3)]
    digests = {play(env, 5, [])["initial_digest"] for env in group}
    assert len(digests) == 1 and len(factory.rollouts) == 3
    factory.group_digest(6, None, "0" * 64)  # as if seed 6's group had begun elsewhere
    with pytest.raises(InfrastructureFailure, match="must share one world"):
        group[0].reset(seed=6)
    for env in group:
        env._close()


def test_a_dead_server_is_an_unscorable_rollout_not_reward_zero() -> None:
    server = ThreadedServer(create_app(HarnessConfig.of(LEDGER, workers=0))).start()
    env = environment_factory(url=server.url)()
    env.reset(seed=1)
    server.stop()
    with pytest.raises(InfrastructureFailure, match="could not be served"):
        env.balances()
    assert env.get_reward() is None  # TRL: None is unscorable (NaN), kept out of the group's baseline
    answer = json.loads(env.reset(seed=1))  # TRL's reset has no error path: answered, not raised
    assert answer["error"]["code"] == "environment_unavailable" and env.get_reward() is None
    with pytest.raises(InfrastructureFailure):
        env.balances()


def test_tools_trl_could_not_call_are_refused_with_their_names() -> None:
    def tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": name,
            "description": "Line one.\nLine two.",
            "input_schema": {"properties": properties},
        }

    method = _tool_method(tool("note", {"text": {"type": ["string", "null"], "description": "a\nb: c"}}))
    schema = get_json_schema(method)["function"]  # a description over lines is one line to TRL's parser
    assert schema["parameters"]["properties"]["text"] == {"type": "string", "description": "a b: c"}
    with pytest.raises(ValueError, match=r"\['from'\] are not Python parameter names"):
        _tool_method(tool("move", {"from": {"type": "string"}}))
    assert "info" in RESERVED and "get_reward" in RESERVED


def _play_in_child(blob: bytes, seed: int, script: list[dict[str, Any]], out: Any) -> None:
    env = pickle.loads(blob)()
    out.put(play(env, seed, script))
    env._close()


def test_the_factory_pickles_for_a_rollout_process() -> None:
    factory = environment_factory(LEDGER, tools=["transfer", "submit"])
    blob = pickle.dumps(factory)
    script = reference(2)
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_play_in_child, args=(blob, 2, script, queue))
    child.start()
    remote = queue.get(timeout=120)
    child.join(60)
    here = play(factory(), 2, script)
    assert remote == here and here["reward"] == 1.0
    assert not hasattr(type(factory()), "balances")  # only the tools asked for


def test_grpo_trains_on_claims_seeds_each_group_from_one_world(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    # One torch thread: OpenMP's threads spin while they wait for a core, and beside the suite's other
    # processes on two cores that made the run five times slower, not faster.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_trl.py"), "--model", "tiny", "--seeds", "1,2",
         "--generations", "4", "--steps", "2", "--output-dir", str(tmp_path / "out"),
         "--report", str(report)],
        capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    done = json.loads(report.read_text())
    print("\n".join(line for line in run.stdout.splitlines() if "group seed=" in line))
    assert done["global_step"] == 2 and any("loss" in entry for entry in done["log_history"])
    rollouts = done["rollouts"]
    assert sorted(r["seed"] for r in rollouts) == [1] * 4 + [2] * 4
    with statekit.make("claims_app") as claims:
        for seed in (1, 2):
            _, info = claims.reset(seed=seed)
            assert {r["initial_digest"] for r in rollouts if r["seed"] == seed} == {info["digest"]}
        assert any(r["steps"] for r in rollouts), "no rollout called a tool through TRL"
        for rollout in rollouts:  # each reward is what statekit's verifier gives the same actions
            assert rollout["failure"] is None
            claims.reset(seed=rollout["seed"])
            replayed = [claims.step(step["action"]) for step in rollout["steps"]]
            assert rollout["reward"] == sum(step[1] for step in replayed)
            assert [s["terminated"] for s in rollout["steps"]] == [s[2] for s in replayed]
    assert f"group seed=1 initial_digest={rollouts[0]['initial_digest'][:16]}" in run.stdout
