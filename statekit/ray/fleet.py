"""A fixed number of environment actors, spread over the cluster's nodes, with replacement on loss.

Both the vector API and the rollout runner hold one. ``replace(i)`` kills what is left of member
``i`` and starts a new actor wherever Ray finds room (another node if its own is gone). On
``close()`` every actor closes its environment (dropping its worlds), and each surviving node that
lost an actor gets a sweeper: a new actor there makes the adapter's strategy, which drops the
copies (databases, directories, mounts) that dead processes left on that node.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from statekit.errors import ConfigError
from statekit.ray.actor import LOST_ERRORS, EnvSpec, spawn

REPLACE_ATTEMPTS = 5
"""A replacement may land on the node just lost, until Ray's health check marks it dead."""

log = logging.getLogger(__name__)

PLACE_TIMEOUT = 300.0
"""Seconds to wait for actors to start (a node's first actor may start its PostgreSQL)."""


@dataclass(frozen=True)
class Member:
    """One actor: its handle, and the node and process it runs in."""

    handle: Any
    node_id: str
    pid: int


class Fleet:
    """``size`` environment actors (``num_cpus`` each, spread over nodes) sharing one golden exchange."""

    def __init__(self, spec: EnvSpec, size: int, *, num_cpus: float, exchange: Any | None) -> None:
        if size < 1:
            raise ConfigError(f"a fleet needs at least one actor, got {size}")
        self.spec = spec
        self.num_cpus = num_cpus
        self.exchange = exchange
        self.lost_nodes: set[str] = set()
        self.members: list[Member] = []
        handles = [self._spawn() for _ in range(size)]
        try:
            self.members = [self._placed(handle) for handle in handles]
        except BaseException:
            for handle in handles:
                ray.kill(handle)
            raise

    def replace(self, index: int) -> Member:
        """Member ``index`` was lost: start another actor in its place."""
        old = self.members[index]
        self.lost_nodes.add(old.node_id)
        ray.kill(old.handle)
        for attempt in range(1, REPLACE_ATTEMPTS + 1):
            handle = self._spawn()
            try:
                self.members[index] = self._placed(handle)
                return self.members[index]
            except LOST_ERRORS:  # placed on the dead node before Ray noticed its death: place again
                ray.kill(handle)
                log.warning(
                    "a replacement actor was lost before it ran (attempt %d); placing another", attempt
                )
                time.sleep(attempt)
        raise ConfigError(f"no replacement actor could be placed in {REPLACE_ATTEMPTS} attempts")

    def close(self) -> dict[str, list[str]]:
        """Close every environment, stop every actor, sweep the nodes that lost one; returns the swept."""
        closing = [(m, m.handle.close.remote()) for m in self.members]
        for member, ref in closing:
            try:
                ray.get(ref, timeout=120)
            except LOST_ERRORS:
                self.lost_nodes.add(member.node_id)
            except Exception:
                log.exception("closing the environment of actor %d failed", member.pid)
            ray.kill(member.handle)
        self.members = []
        return self.sweep()

    def sweep(self) -> dict[str, list[str]]:
        """On each live node that lost an actor, sweep what dead processes left behind."""
        alive = {node["NodeID"] for node in ray.nodes() if node.get("Alive")}
        swept: dict[str, list[str]] = {}
        for node_id in sorted(self.lost_nodes & alive):
            placement = NodeAffinitySchedulingStrategy(node_id, soft=False)
            sweeper = spawn(self.spec, None, num_cpus=0, scheduling_strategy=placement)
            try:
                swept[node_id] = ray.get(sweeper.sweep.remote(), timeout=PLACE_TIMEOUT)
                ray.get(sweeper.close.remote(), timeout=120)
            except LOST_ERRORS:
                log.warning("node %s went away while being swept", node_id)
            finally:
                ray.kill(sweeper)
        self.lost_nodes -= alive
        return swept

    def _spawn(self) -> Any:
        return spawn(self.spec, self.exchange, num_cpus=self.num_cpus, scheduling_strategy="SPREAD")

    def _placed(self, handle: Any) -> Member:
        try:
            node_id, pid = ray.get(handle.where.remote(), timeout=PLACE_TIMEOUT)
        except ray.exceptions.GetTimeoutError as exc:
            cpus = ray.cluster_resources().get("CPU", 0)
            raise ConfigError(
                f"an environment actor (num_cpus={self.num_cpus}) did not start within {PLACE_TIMEOUT:g} s; "
                f"the cluster has {cpus:g} CPUs: use fewer actors or a smaller num_cpus"
            ) from exc
        return Member(handle, node_id, pid)
