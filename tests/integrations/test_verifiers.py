"""verifiers (0.4) plays ``statekit serve`` episodes: its own OpenEnv taskset, and statekit's native one.

verifiers runs in ``.venv-verifiers`` (``scripts/venv-verifiers.sh``: its pins clash with the dev
venv's), as a user runs it: ``vf-eval @ eval.toml`` (the three evaluations in one process), its
player's chat program (through uv) asking a model for each action. The model is a scripted stand-in
on loopback that knows each seed's first observation and the reference actions for it: a server that
ignored the seed would show it an observation it does not know, and the rewards must be statekit's
own for those seeds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest

import statekit
from statekit.harness import HarnessConfig, create_app
from statekit.integrations import as_text
from statekit.servers import ThreadedServer

from ..chat_standin import ChatStandIn
from . import vf
from .conftest import LEDGER

ADAPTER = "claims_app"
SEEDS = (3, 4)
ROLLOUTS = 2


@dataclass
class Expected:
    """What statekit itself gives each seed: the first observation, the reference actions, the reward."""

    scripts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    rewards: dict[int, float] = field(default_factory=dict)
    digests: dict[int, str] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)

    def script_for(self, observation: Any) -> list[dict[str, Any]] | None:
        script = self.scripts.get(as_text(observation))
        if script is None:
            self.unknown.append(as_text(observation))
        return script


@pytest.fixture(scope="module")
def expected() -> Expected:
    out = Expected()
    with statekit.make(ADAPTER) as env:
        for seed in SEEDS:
            first, info = env.reset(seed=seed)
            script = env.adapter.reference_actions(env.task)
            out.rewards[seed] = sum(env.step(action)[1] for action in script)
            out.scripts[as_text(first)] = script
            out.digests[seed] = info["digest"]
    return out


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with ThreadedServer(create_app(HarnessConfig.of(ADAPTER, workers=0))) as server:
        yield server.url


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory, expected: Expected, served: str) -> dict[str, Any]:
    """The three evaluations below in one ``vf-eval`` process (its imports paid once): verifiers' own
    OpenEnv taskset and statekit's native one against the served claims episodes, and the native one
    against a server that is gone."""
    with ThreadedServer(create_app(HarnessConfig.of(LEDGER, workers=0))) as gone:
        dead = gone.url  # a port nothing listens on once the server stops
    resets = ", ".join(f"{{seed = {seed}}}" for seed in SEEDS)
    seeds = ", ".join(str(seed) for seed in SEEDS)
    return vf.vf_evals(
        tmp_path_factory.mktemp("vf"),
        {
            "openenv": vf.Eval(
                ChatStandIn(partial(openenv_player, expected)),
                f'id = "openenv"\nbase_url = "{served}"\nresets = [{resets}]',
                ROLLOUTS,
                "player",
            ),
            "native": vf.Eval(
                ChatStandIn(partial(tool_caller, expected)),
                f'id = "statekit-verifiers"\nurl = "{served}"\nseeds = [{seeds}]',
                ROLLOUTS,
                "player",
            ),
            "dead": vf.Eval(
                ChatStandIn(lambda _body: {"role": "assistant", "content": "hello"}),
                f'id = "statekit-verifiers"\nurl = "{dead}"\nseeds = [1]',
                ROLLOUTS,
                "player",
            ),
        },
    )


def openenv_player(expected: Expected, body: dict[str, Any]) -> dict[str, Any]:
    """The model of OpenEnv's player: its user turns are ``{"observation", "action_schema"}``."""
    messages = body["messages"]
    script = expected.script_for(json.loads(first_user(messages))["observation"])
    turn = sum(m["role"] == "assistant" for m in messages)
    content = json.dumps(script[turn]) if script is not None and turn < len(script) else ""
    return {"role": "assistant", "content": content}


def tool_caller(expected: Expected, body: dict[str, Any]) -> dict[str, Any]:
    """A model writing Hermes-style tool calls."""
    messages = body["messages"]
    script = expected.script_for(json.loads(first_user(messages).split("Observation: ", 1)[1]))
    turn = sum(m["role"] == "assistant" for m in messages)
    if script is None or turn >= len(script):
        return {"role": "assistant", "content": "I am done."}
    action = script[turn]
    call = {"name": action["tool"], "arguments": {k: v for k, v in action.items() if k != "tool"}}
    return {"role": "assistant", "content": f"<tool_call>{json.dumps(call)}</tool_call>"}


def first_user(messages: list[dict[str, Any]]) -> str:
    content = next(m["content"] for m in messages if m["role"] == "user")
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


def test_verifiers_openenv_taskset_plays_served_episodes_with_seeds_honoured(
    evaluated: dict[str, Any], expected: Expected
) -> None:
    played = sorted(
        (e["task"]["data"]["reset"]["seed"], e["traces"][0]["rewards"]["openenv_reward"]["score"], e["ok"])
        for e in evaluated["openenv"]
    )
    assert not expected.unknown, (
        f"the served episodes began from worlds no seed gives: {expected.unknown[:1]}"
    )
    assert played == sorted((seed, expected.rewards[seed], True) for seed in SEEDS for _ in range(ROLLOUTS))


def test_the_native_taskset_keeps_statekits_digests_verdict_and_reward(
    evaluated: dict[str, Any], expected: Expected
) -> None:
    episodes = evaluated["native"]
    assert not expected.unknown, (
        f"the served episodes began from worlds no seed gives: {expected.unknown[:1]}"
    )
    assert sorted(e["task"]["data"]["seed"] for e in episodes) == sorted(SEEDS * ROLLOUTS)
    for episode in episodes:
        assert episode["ok"], episode["errors"]
        trace = episode["traces"][0]
        seed, record = episode["task"]["data"]["seed"], trace["info"]["statekit"]
        assert trace["rewards"]["statekit_reward"]["score"] == expected.rewards[seed]
        assert record["initial_digest"] == expected.digests[seed]  # every rollout of the group: one world
        assert record["terminated"] and not record["truncated"]
        assert record["verdict"]["reward"] == expected.rewards[seed]
        assert record["final_digest"] != record["initial_digest"]


def test_a_dead_server_is_a_rollout_error_not_a_reward_of_zero(evaluated: dict[str, Any]) -> None:
    episodes = evaluated["dead"]
    assert len(episodes) == ROLLOUTS
    for episode in episodes:
        assert not episode["ok"] and episode["errors"], episode
        assert "statekit_reward" not in (episode["traces"][0]["rewards"] if episode["traces"] else {})
