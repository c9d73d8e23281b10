"""A real multi-node Ray cluster on this machine, all on loopback: for tests, benchmarks and demos.

Each node is a real raylet with its own object store and worker processes, and its own
``$STATEKIT_HOME`` (so its own embedded PostgreSQL and goldens), as separate machines would have.
Everything listens on 127.0.0.1: Ray replaces a loopback address by the machine's own unless its
local-only mode is on (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read when ``ray`` is imported and
by every Ray process this one starts), so ``LocalCluster`` turns it on; the dashboard and usage
statistics are off. Node deaths are noticed within about two seconds (Ray's default is 15-30 s).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from statekit.postgres.cluster import EmbeddedCluster

LOOPBACK = "127.0.0.1"
_ENVIRONMENT = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
_FAST_FAILURE_DETECTION = {"health_check_period_ms": 500, "health_check_failure_threshold": 4}


class LocalCluster:
    """``nodes`` Ray nodes of ``cpus_per_node`` CPUs on loopback; the driver connects to the first.

    ``homes`` maps each node id to its ``STATEKIT_HOME``. ``remove_node`` kills a node (its raylet
    and worker processes) as a machine failure would; ``add_node`` adds one.
    """

    def __init__(self, nodes: int = 2, *, cpus_per_node: float = 1, root: str | Path | None = None) -> None:
        os.environ.update(_ENVIRONMENT)
        import ray
        import ray._private.ray_constants as constants
        from ray.cluster_utils import Cluster

        constants.ENABLE_RAY_CLUSTER = False  # in case ray was imported before the variable was set
        self._ray = ray
        self.cpus_per_node = cpus_per_node
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="statekit-ray-"))
        self.homes: dict[str, Path] = {}
        self._nodes: dict[str, Any] = {}
        self._count = 0
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args=self._node_args(include_dashboard=False, _system_config=_FAST_FAILURE_DETECTION),
        )
        self._remember(self.cluster.head_node)
        try:
            for _ in range(nodes - 1):
                self.add_node()
            ray.init(address=self.cluster.address, logging_level=logging.WARNING, log_to_driver=False)
        except BaseException:
            self.shutdown()
            raise

    @property
    def head_id(self) -> str:
        head = self.cluster.head_node
        assert head is not None
        return str(head.node_id)

    @property
    def node_ids(self) -> list[str]:
        return list(self._nodes)

    def add_node(self) -> str:
        node = self.cluster.add_node(**self._node_args())
        self._remember(node)
        return str(node.node_id)

    def remove_node(self, node_id: str) -> None:
        """Kill a worker node abruptly (the head, which the driver uses, cannot be removed)."""
        if node_id == self.head_id:
            raise ValueError("the head node carries the driver; remove a worker node")
        self.cluster.remove_node(self._nodes.pop(node_id), allow_graceful=False)

    def shutdown(self) -> None:
        """Disconnect, stop every node, stop each node's PostgreSQL, delete the homes. Safe twice."""
        if self._ray.is_initialized():
            self._ray.shutdown()
        self.cluster.shutdown()
        for home in self.homes.values():  # a dead node's server outlives it, as on a real machine
            if (home / "pg" / "data").exists():
                EmbeddedCluster(home / "pg").stop_server()
        shutil.rmtree(self.root, ignore_errors=True)
        self.homes.clear()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    # -- internals ----------------------------------------------------------------------------
    def _node_args(self, **extra: Any) -> dict[str, Any]:
        self._count += 1
        home = self.root / f"node-{self._count}"
        home.mkdir(parents=True, exist_ok=True)
        self._next_home = home
        return {
            "num_cpus": self.cpus_per_node,
            "node_ip_address": LOOPBACK,
            "env_vars": {**_ENVIRONMENT, "STATEKIT_HOME": str(home)},
            "object_store_memory": 100 * 1024 * 1024,
            **extra,
        }

    def _remember(self, node: Any) -> None:
        self._nodes[str(node.node_id)] = node
        self.homes[str(node.node_id)] = self._next_home
