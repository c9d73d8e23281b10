"""The vector API: B environments on B actors stepped as a batch, equal to in-process, loss or not."""

from __future__ import annotations

import os
import signal

import ray

import statekit
from statekit.ray import LocalCluster, VectorEnv
from statekit.rollouts import Turn
from statekit.testing.ledger import ledger_policy

LEDGER = "statekit.testing.ledger:LedgerAdapter"


def test_batched_steps_equal_in_process_ones_and_survive_a_killed_actor(ray_cluster: LocalCluster) -> None:
    seeds = [3, 4]
    local = []
    for seed in seeds:
        with statekit.make(LEDGER) as env:
            obs, info = env.reset(seed=seed)
            turn = Turn(seed, {}, info, (obs,), ())
            first = ledger_policy(turn)
            second = ledger_policy(Turn(seed, {}, info, (obs, env.step(first)[0]), (first,)))
            local.append((info["digest"], first, second, env.step(second)))
    spec = statekit.EnvSpec(LEDGER, max_steps=6, adapter_options={"accounts": 4})
    with VectorEnv(spec, 2, num_cpus=0.5) as vector:
        assert len({node for node, _ in vector.placement}) == 2
        made = ray.get([member.handle.spec_made.remote() for member in vector.fleet.members])
        assert made == [spec.as_dict()] * 2, "each actor makes its environment from the one spec it was given"
        _, infos = vector.reset(seeds)
        assert [i["digest"] for i in infos] == [row[0] for row in local]
        vector.step([row[1] for row in local])
        os.kill(vector.placement[0][1], signal.SIGKILL)  # between two batches: the next one notices
        observations, rewards, terminated, truncated, _ = vector.step([row[2] for row in local])
        assert vector.losses == 1
    assert observations == [row[3][0] for row in local]
    assert rewards == [row[3][1] for row in local] and terminated == [row[3][2] for row in local]
    assert truncated == [False, False]


def test_a_golden_built_on_one_node_is_shipped_to_the_other(
    ray_cluster: LocalCluster, pg_url: str, claims_scripts: dict[int, list[dict[str, object]]]
) -> None:
    with statekit.make("claims_app", db_url=pg_url) as env:
        _, expected = env.reset(seed=11)
        first_observation = env.step(claims_scripts[11][0])[0]
    with VectorEnv("claims_app", 2, num_cpus=0.5) as vector:
        assert len({node for node, _ in vector.placement}) == 2
        _, infos = vector.reset([11, 11])
        stats = ray.get(vector.exchange.stats.remote())
        observations, *_ = vector.step([claims_scripts[11][0]] * 2)
        per_actor = ray.get([m.handle.stats.remote() for m in vector.fleet.members])
    assert stats["built"] == 1 and stats["shipped"] == 1 and stats["bytes"] > 0
    assert sorted(s["built"] + 10 * s["shipped"] for s in per_actor) == [1, 10], per_actor
    assert [i["digest"] for i in infos] == [expected["digest"]] * 2
    assert observations == [first_observation] * 2
