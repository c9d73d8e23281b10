"""Gymnasium: ``gymnasium.make("statekit/claims_app")`` in-process or remote, and Gymnasium's checker."""

from __future__ import annotations

import json
from collections.abc import Callable

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import statekit
import statekit.gym
from statekit.gym import StatekitEnv

from .conftest import ClaimsReference
from .helpers import LEDGER


def _play(env: gymnasium.Env, seed: int, script: list[dict]) -> tuple[list[object], list[float]]:
    text, _ = env.reset(seed=seed)
    assert env.observation_space.contains(text)
    observations, rewards = [json.loads(text)], []
    for action in script:
        text, reward, terminated, truncated, _ = env.step(json.dumps(action))
        assert env.observation_space.contains(text)
        observations.append(json.loads(text))
        rewards.append(float(reward))
        if terminated or truncated:
            break
    return observations, rewards


def test_importing_statekit_gym_registers_every_adapter() -> None:
    assert "statekit/claims_app" in statekit.gym.register_envs()
    assert gymnasium.spec("statekit/claims_app").entry_point == "statekit.gym:StatekitEnv"


def test_gymnasium_make_plays_the_claims_reference_episode(
    pg_url: str, claims_reference: ClaimsReference
) -> None:
    env = gymnasium.make("statekit/claims_app", db_url=pg_url)
    try:
        observations, rewards = _play(env, 7, claims_reference.script(7))
    finally:
        env.close()
    assert observations == claims_reference.trace(7).observations
    assert rewards == claims_reference.trace(7).rewards


def test_gymnasium_make_drives_a_remote_harness(
    claims_server: str, claims_reference: ClaimsReference
) -> None:
    env = gymnasium.make("statekit.gym:statekit/claims_app", url=claims_server)
    try:
        observations, rewards = _play(env, 7, claims_reference.script(7))
    finally:
        env.close()
    assert observations == claims_reference.trace(7).observations
    assert rewards == claims_reference.trace(7).rewards


def test_gymnasiums_own_checker_accepts_it() -> None:
    env = StatekitEnv(LEDGER)
    try:
        check_env(env, skip_render_check=True)
    finally:
        env.close()


def test_a_random_text_action_is_an_error_observation_not_a_crash() -> None:
    env = StatekitEnv(LEDGER)
    try:
        env.reset(seed=1)
        env.action_space.seed(0)
        text, reward, terminated, _, _ = env.step(env.action_space.sample())
        assert json.loads(text)["error"]["code"] == "malformed_action"
        assert reward == 0.0 and not terminated
        text, *_ = env.step({"tool": "balances"})
        assert "accounts" in json.loads(text)
    finally:
        env.close()


def test_one_seeded_reset_fixes_the_sequence_of_worlds() -> None:
    def worlds() -> list[object]:
        env = StatekitEnv(LEDGER)
        try:
            return [env.reset(seed=11)[1]["seed"], env.reset()[1]["seed"], env.reset()[1]["seed"]]
        finally:
            env.close()

    first = worlds()
    assert first == worlds() and first[0] == 11 and len(set(first)) == 3


def test_gymnasiums_draws_stay_in_the_environments_world_set(serve_app: Callable[..., str]) -> None:
    """In-process (num_worlds given) and remote (read from the harness's /health) alike."""
    url = serve_app(num_worlds=2, start_seed=40)
    for env in (StatekitEnv(LEDGER, num_worlds=3, start_seed=40), StatekitEnv(url=url)):
        try:
            first = env.reset(seed=5)[1]["seed"]
            drawn = {env.reset()[1]["seed"] for _ in range(30)}
        finally:
            env.close()
        assert first == 5 and drawn <= {40, 41, 42} and len(drawn) >= 2
    assert drawn == {40, 41}


def test_an_in_process_env_needs_its_adapter_named() -> None:
    with pytest.raises(statekit.ConfigError, match="StatekitEnv needs an adapter"):
        StatekitEnv()
