"""SkyRL's own registry and ``BaseTextEnv`` contract drive statekit worlds, in-process and served."""

from __future__ import annotations

import json
from typing import Any

import pytest
import skyrl_gym

import statekit
import statekit.integrations.skyrl  # registers "statekit" with skyrl_gym
from statekit.harness import HarnessConfig, create_app
from statekit.servers import ThreadedServer

from .conftest import LEDGER, reference

PROMPT = [{"role": "system", "content": "You are a careful clerk."}]


def as_text(action: dict[str, Any]) -> str:
    call = {"name": action["tool"], "arguments": {k: v for k, v in action.items() if k != "tool"}}
    return f"I will do that now.\n<tool_call>{json.dumps(call)}</tool_call>"


def observed(message: dict[str, str]) -> Any:
    return json.loads(message["content"].split("Observation: ", 1)[1])


def trajectory(env_config: dict[str, Any], seed: int, turns: list[str]) -> dict[str, Any]:
    env = skyrl_gym.make("statekit", env_config=env_config, extras={"seed": seed})
    try:
        conversation, meta = env.init(PROMPT)
        outputs = [env.step(text) for text in turns]
        return {
            "first": observed(conversation[-1]),
            "system": conversation[0],
            "initial_digest": meta["initial_digest"],
            "observations": [observed(out["observations"][0]) for out in outputs],
            "rewards": [out["reward"] for out in outputs],
            "done": [out["done"] for out in outputs],
            "terminated": [out["metadata"]["terminated"] for out in outputs],
            "metrics": env.get_metrics(),
        }
    finally:
        env.close()


def test_skyrl_plays_an_episode_in_process_and_served_alike(served_ledger: str) -> None:
    script = reference(3)
    local = trajectory({"adapter": LEDGER}, 3, [as_text(a) for a in script])
    remote = trajectory({"url": served_ledger}, 3, [as_text(a) for a in script])
    assert local == remote
    assert local["system"] == PROMPT[0] and "Move" in local["first"]["task"]
    assert local["rewards"] == [0.0, 1.0] and local["done"] == [False, True] == local["terminated"]
    with statekit.make(LEDGER) as env:  # the same episode played on statekit's own API
        first, info = env.reset(seed=3)
        steps = [env.step(action) for action in script]
    assert local["first"] == first and local["initial_digest"] == info["digest"]
    assert local["observations"] == [step[0] for step in steps]


def test_a_group_starts_from_one_world_and_seeds_differ() -> None:
    group = [trajectory({"adapter": LEDGER}, 5, []) for _ in range(3)]
    assert (
        len({t["initial_digest"] for t in group}) == 1 and len({json.dumps(t["first"]) for t in group}) == 1
    )
    assert trajectory({"adapter": LEDGER}, 6, [])["initial_digest"] != group[0]["initial_digest"]


def test_model_text_without_a_call_is_an_error_observation_and_the_episode_goes_on() -> None:
    script = reference(4)
    turns = ["I am not sure what to do.", '<tool_call>{"name": "balances", "arguments": "{"}</tool_call>']
    played = trajectory({"adapter": LEDGER}, 4, [*turns, *[as_text(a) for a in script]])
    assert [o.get("error", {}).get("code") for o in played["observations"][:2]] == ["malformed_action"] * 2
    assert played["rewards"] == [0.0, 0.0, 0.0, 1.0] and played["done"][-1] is True


def test_a_row_without_a_seed_is_refused_with_the_reason() -> None:
    for extras in ({}, {"seed": "7"}, {"seed": True}, {"seed": 7, "options": "file_new_claim"}):
        with pytest.raises(ValueError, match=r"seed|options"):
            skyrl_gym.make("statekit", env_config={"adapter": LEDGER}, extras=extras)


def test_a_dead_server_is_an_exception_not_a_reward_of_0() -> None:
    server = ThreadedServer(create_app(HarnessConfig.of(LEDGER, workers=0))).start(timeout=60)
    try:
        env = skyrl_gym.make("statekit", env_config={"url": server.url}, extras={"seed": 1})
        env.init(PROMPT)
    finally:
        server.stop()
    with pytest.raises(statekit.RemoteError) as failed:
        env.step(as_text({"tool": "balances"}))
    assert failed.value.code == "unreachable"
    with pytest.raises(statekit.RemoteError):  # closing says the session could not be closed either
        env.close()


def test_adapter_and_url_together_are_refused() -> None:
    with pytest.raises(TypeError, match="server's"):
        skyrl_gym.make(
            "statekit", env_config={"adapter": LEDGER, "url": "http://127.0.0.1:9"}, extras={"seed": 1}
        )
