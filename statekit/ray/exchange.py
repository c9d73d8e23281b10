"""The cluster's golden exchange: each seed's golden is built once and shipped through Ray's object store.

Why the object store and not shared storage: every Ray cluster has one, it moves objects between
nodes directly (node to node, not through the driver), and an object is freed when nobody refers to
it; shared storage (NFS, a bucket) would be one more service to provision, secure and clean on
every cluster. The exchange is one actor (no CPU) on the driver's node that owns the exported
goldens (``ray.put`` inside it, so an export outlives the actor that built it) and hands out
*build leases*: the first node to miss a key builds it, the others wait for its export and load it.
The holder renews its lease every few seconds while it builds and exports (``renew``), so a lease
whose holder died (its actor killed, its node gone) lapses after ``lease_timeout`` seconds and the
next node to ask builds instead. A key whose strategy cannot export is built by each node
(``abandon``). If the exchange itself is lost (its node died),
actors build locally: slower, same worlds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import ray

from statekit.goldens import GoldenExport

LEASE_TIMEOUT = 10.0
"""Seconds a build lease lasts without renewal; its holder renews it every ``LEASE_TIMEOUT / 4``."""


class GoldenExchange:
    """Keys to exported goldens, plus who is building which key right now."""

    def __init__(
        self, lease_timeout: float = LEASE_TIMEOUT, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.lease_timeout = lease_timeout
        self._clock = clock
        self._exports: dict[str, Any] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        self._unshippable: set[str] = set()
        self.counts = {"built": 0, "shipped": 0, "bytes": 0}

    def claim(self, key: str, node: str) -> tuple[str, list[Any] | None]:
        """``("ship", [ref])``: load that export; ``("build", None)``: build and publish it;
        ``("wait", None)``: another node is building it, ask again shortly."""
        if key in self._exports:
            self.counts["shipped"] += 1
            return "ship", [self._exports[key]]
        if key in self._unshippable:
            return "build", None
        lease = self._leases.get(key)
        if lease is not None and self._clock() - lease[1] < self.lease_timeout:
            return "wait", None
        self._leases[key] = (node, self._clock())
        return "build", None

    def renew(self, key: str, node: str) -> bool:
        """The holder is still building ``key``; False if its lease lapsed (someone else builds it)."""
        lease = self._leases.get(key)
        if lease is None or lease[0] != node:
            return False
        self._leases[key] = (node, self._clock())
        return True

    def publish(self, key: str, export: GoldenExport) -> None:
        self._leases.pop(key, None)
        if key not in self._exports:
            self._exports[key] = ray.put(export)
            self.counts["built"] += 1
            self.counts["bytes"] += export.size

    def abandon(self, key: str) -> None:
        """The lease holder cannot export this key: every node builds its own."""
        self._leases.pop(key, None)
        self._unshippable.add(key)

    def stats(self) -> dict[str, int]:
        """Goldens published (built once), loads handed out (shipped), and the bytes published."""
        return {**self.counts, "keys": len(self._exports)}


def start_exchange(**options: Any) -> Any:
    """The exchange actor, on the driver's node (it owns the exports; the driver's node outlives workers)."""
    here = ray.get_runtime_context().get_node_id()
    placement = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(here, soft=True)
    remote = ray.remote(GoldenExchange).options(num_cpus=0, scheduling_strategy=placement, max_restarts=0)
    return remote.remote(**options)
