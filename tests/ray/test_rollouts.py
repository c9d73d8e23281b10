"""The same episodes give byte-identical trajectories serially, over harness workers and on Ray."""

from __future__ import annotations

from collections.abc import Sequence

import statekit
from statekit.client import RemoteEnvironment
from statekit.harness import HarnessConfig, create_app
from statekit.ray import LocalCluster, RayRollouts
from statekit.rollouts import Policy, Trajectory, run
from statekit.servers import ThreadedServer
from statekit.testing.ledger import ledger_policy

from .conftest import SEEDS

LEDGER = "statekit.testing.ledger:LedgerAdapter"


def _bytes(trajectories: Sequence[Trajectory]) -> list[bytes]:
    return [t.to_json() for t in trajectories]


def _over_workers(adapter: str, episodes: list, policy: Policy, **config: object) -> list[Trajectory]:
    app = create_app(HarnessConfig.of(adapter, workers=2, max_sessions=8, **config))
    server = ThreadedServer(app).start(timeout=120)
    try:
        return run(lambda: RemoteEnvironment(server.url), episodes, policy, concurrency=4)
    finally:
        server.stop()


def test_64_ledger_rollouts_are_identical_serially_over_workers_and_on_ray(ray_cluster: LocalCluster) -> None:
    episodes = [(seed, {"max_steps": 2} if seed % 8 == 0 else None) for seed in range(64)]
    serial = run(lambda: statekit.make(LEDGER), episodes, ledger_policy)
    assert {t.truncated for t in serial} == {True, False}, "some episodes hit their step cap"
    workers = _over_workers(LEDGER, episodes, ledger_policy)
    with RayRollouts(LEDGER, actors=2, num_cpus=0.5) as runner:
        assert len({m.node_id for m in runner.fleet.members}) == 2, "one actor on each node"
        distributed = runner.run(episodes, ledger_policy)
    assert len(serial) == 64
    assert _bytes(workers) == _bytes(serial)
    assert _bytes(distributed) == _bytes(serial)


def test_claims_rollouts_are_identical_serially_over_workers_and_on_ray(
    ray_cluster: LocalCluster, pg_url: str, claims_policy: Policy, claims_serial: list[Trajectory]
) -> None:
    workers = _over_workers("claims_app", SEEDS, claims_policy, db_url=pg_url)
    with RayRollouts("claims_app", actors=2, num_cpus=0.5) as runner:
        assert len({m.node_id for m in runner.fleet.members}) == 2, "one actor on each node"
        distributed = runner.run(SEEDS, claims_policy)
        goldens = runner.golden_stats()
    assert _bytes(workers) == _bytes(claims_serial)
    assert _bytes(distributed) == _bytes(claims_serial)
    assert goldens["built"] + goldens["shipped"] <= len(SEEDS), "no seed built twice in the cluster"
