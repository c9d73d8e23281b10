"""A real multi-node Ray cluster on this machine, all on loopback: for tests, benchmarks and demos.

Each node is a real raylet with its own object store and worker processes, and its own
``$STATEKIT_HOME`` (so its own embedded PostgreSQL and goldens), as separate machines would have.
Everything listens on 127.0.0.1: Ray replaces a loopback address by the machine's own unless its
local-only mode is on (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read when ``ray`` is imported and
by every Ray process this one starts), so ``LocalCluster`` turns it on; the dashboard and usage
statistics are off. Node deaths are noticed within about two seconds (Ray's default is 15-30 s).

``remove_node`` is a machine failure: Ray stops the node's raylet, and every other process of that
"machine" (its actors' processes, which would otherwise finish what they were doing, and its
PostgreSQL) is killed too: they are the processes whose ``STATEKIT_HOME`` is the node's. On
``shutdown`` what a dead node left (its overlay mounts, its stopped server's files) is removed, as
it would have gone with the machine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any

from statekit.postgres.cluster import PgCluster
from statekit.strategies.filesystems import mounts_under

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
        _kill_processes_of(self.homes[node_id])  # its server is stopped cleanly on shutdown

    def shutdown(self) -> None:
        """Disconnect, stop every node, stop each node's PostgreSQL, delete the homes. Safe twice."""
        if self._ray.is_initialized():
            self._ray.shutdown()
        self.cluster.shutdown()
        for home in self.homes.values():
            _kill_processes_of(home)
            if (home / "pg" / "data").exists():
                PgCluster(home / "pg").stop_server()
            for mount in mounts_under(home):
                subprocess.run(["umount", "--lazy", mount], check=False, capture_output=True)
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


def _kill_processes_of(home: Path) -> None:
    """SIGKILL the processes of one simulated machine: those whose STATEKIT_HOME is ``home``.

    Its PostgreSQL is spared, to be stopped cleanly (a killed server would leave shared memory
    behind on this machine, which the real dead one would not).
    """
    marker = b"\0" + f"STATEKIT_HOME={home}".encode() + b"\0"
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker not in b"\0" + environ + b"\0" or b"postgres" in command.split(b"\0")[0]:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(entry), signal.SIGKILL)
