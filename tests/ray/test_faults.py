"""Kill an actor, or a whole node, mid-rollout: the trajectories do not change and nothing is left over."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from statekit.ray import LocalCluster, RayRollouts
from statekit.rollouts import Policy, Trajectory, Turn

from .conftest import SEEDS, leftovers


@pytest.fixture
def serial(claims_serial: list[Trajectory]) -> list[bytes]:
    return [t.to_json() for t in claims_serial]


@pytest.fixture
def two_nodes(ray_cluster: LocalCluster) -> Iterator[LocalCluster]:
    """The session's cluster, with two live nodes again after the test (a test may kill one)."""
    yield ray_cluster
    alive = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
    for _ in range(2 - len(alive)):
        ray_cluster.add_node()


def test_an_actor_killed_mid_rollout_changes_nothing_and_leaves_nothing(
    two_nodes: LocalCluster, claims_policy: Policy, serial: list[bytes]
) -> None:
    runner = RayRollouts("claims_app", actors=2, num_cpus=0.5)
    killed: list[int] = []

    def policy(turn: Turn) -> Any:
        if turn.seed == SEEDS[0] and len(turn.actions) == 1 and not killed:  # member 0's open episode
            killed.append(runner.fleet.members[0].pid)
            os.kill(killed[0], signal.SIGKILL)
        return claims_policy(turn)

    with runner:
        trajectories = runner.run(SEEDS, policy)
    assert killed and len(runner.losses) >= 1 and runner.losses[0].pid == killed[0]
    assert [t.to_json() for t in trajectories] == serial
    for node_id, home in two_nodes.homes.items():
        if node_id in two_nodes.node_ids:
            assert leftovers(home) == [], f"node {node_id[:8]} kept copies of dead processes"


def test_a_node_killed_mid_rollout_changes_nothing_and_the_survivor_keeps_nothing(
    two_nodes: LocalCluster, claims_policy: Policy, serial: list[bytes]
) -> None:
    runner = RayRollouts("claims_app", actors=2, num_cpus=0.5)
    member = next(i for i, m in enumerate(runner.fleet.members) if m.node_id != two_nodes.head_id)
    doomed = runner.fleet.members[member].node_id
    removed: list[str] = []

    def policy(turn: Turn) -> Any:
        # Member i starts with SEEDS[i]: the node goes while that episode is open on it, whatever the
        # load (a node removed between its episodes would be lost to nobody).
        if turn.seed == SEEDS[member] and len(turn.actions) == 1 and not removed:
            removed.append(doomed)
            two_nodes.remove_node(doomed)
        return claims_policy(turn)

    with runner:
        trajectories = runner.run(SEEDS, policy)
        survivors = {m.node_id for m in runner.fleet.members}
    assert removed and {loss.node_id for loss in runner.losses} == {doomed}
    assert survivors == {two_nodes.head_id}, "the lost node's episodes moved to the survivor"
    assert [t.to_json() for t in trajectories] == serial
    assert leftovers(two_nodes.homes[two_nodes.head_id]) == []
