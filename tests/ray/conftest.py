"""One real Ray cluster for the whole test session: two nodes on this machine, loopback only.

Each node has one CPU and its own ``STATEKIT_HOME`` (its own embedded PostgreSQL and goldens), as
two machines would. Actors take half a CPU, so a node that survives a failure has room for the
replacement of an actor that died elsewhere. Tests that remove a node add one back.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from statekit.postgres.cluster import PgCluster
from statekit.ray import LocalCluster
from statekit.rollouts import Policy, Trajectory, run, scripted

SEEDS = [7, 8, 9, 10]


_CLUSTER: list[LocalCluster] = []
"""The running cluster, if any: started by the first test that needs it, stopped after the last test
of a run of such tests in this process (``pytest_runtest_teardown``), since an idle Ray cluster keeps
both cores busy with its health checks while the process runs other tests."""


@pytest.fixture
def ray_cluster() -> Iterator[LocalCluster]:
    if not _CLUSTER:
        _CLUSTER.append(LocalCluster(2, cpus_per_node=1).__enter__())
    yield _CLUSTER[0]


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if _CLUSTER and (nextitem is None or "ray_cluster" not in getattr(nextitem, "fixturenames", ())):
        _CLUSTER.pop().__exit__(None, None, None)


@pytest.fixture(scope="session")
def claims_scripts(pg_url: str) -> dict[int, list[dict[str, object]]]:
    """Each seed's reference script, found in-process (its task's hidden facts stay on this side)."""
    import statekit

    scripts = {}
    with statekit.make("claims_app", db_url=pg_url) as env:
        for seed in [*SEEDS, 11]:
            env.reset(seed=seed)
            scripts[seed] = env.adapter.reference_actions(env.task)
    return scripts


@pytest.fixture(scope="session")
def claims_policy(claims_scripts: dict[int, list[dict[str, object]]]) -> Policy:
    return scripted(claims_scripts)


@pytest.fixture(scope="session")
def claims_serial(pg_url: str, claims_policy: Policy) -> list[Trajectory]:
    """The undisturbed, in-process run of SEEDS: what every other engine must reproduce byte for byte."""
    import statekit

    played = run(lambda: statekit.make("claims_app", db_url=pg_url), SEEDS, claims_policy)
    assert all(t.rewards[-1] == 1.0 for t in played)
    return played


def leftovers(home: Path) -> list[str]:
    """Episode and build copies (databases, directories, mounts) left in one node's STATEKIT_HOME."""
    found = []
    files = home / "files" / "claims_app" / "uploads"
    for folder in ("copies", "building", "upper"):
        if (files / folder).exists():
            found += [f"{folder}/{entry}" for entry in os.listdir(files / folder)]
    found += [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(home) in line]
    if (home / "pg" / "data").exists():
        cluster = PgCluster(home / "pg")
        was_running = cluster.is_running()
        if not was_running:
            cluster.start()
        try:
            found += [
                name
                for name in cluster.server().databases("skclaims_")
                if name.startswith(("skclaims_e_", "skclaims_b_"))
            ]
        finally:
            if not was_running:
                cluster.stop_server()
    return found


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that need no cluster first, so those that do run back to back on one cluster."""
    positions = [i for i, item in enumerate(items) if item.nodeid.startswith("tests/ray/")]
    ordered = sorted((items[i] for i in positions), key=lambda item: "ray_cluster" in item.fixturenames)
    for position, item in zip(positions, ordered, strict=True):
        items[position] = item
