"""One environment per Ray actor: one process, so the determinism controls never make it wait.

An ``EnvSpec`` (``statekit.envspec``, the same every entry point takes) says what to make: it travels
to the actor's node and the environment is made there.
``EnvironmentActor`` is the plain class each actor runs; ``spawn`` starts one. On its node the
actor's environment uses that node's embedded PostgreSQL (``EmbeddedPostgres`` under the node's
``$STATEKIT_HOME``), shared by every actor on the node. Before a reset, a golden the node lacks is
fetched from the cluster's ``GoldenExchange`` when another node built it, or built here and
published for the others (``statekit.goldens`` does the export and the import).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import ray

from statekit.contract import JSON, State
from statekit.env import world_key
from statekit.envspec import EnvSpec
from statekit.goldens import export_golden, import_golden
from statekit.ray.exchange import LEASE_TIMEOUT

log = logging.getLogger(__name__)

LOST_ERRORS: tuple[type[BaseException], ...] = (
    ray.exceptions.RayActorError,
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.LocalRayletDiedError,
    ray.exceptions.ObjectLostError,
)
"""What a call on a dead actor (or a node gone with it) raises: the environment is lost."""

GOLDEN_WAIT = 600.0
"""Seconds an actor waits for another node's build of a golden before building it itself."""


StepReply = tuple[JSON, float, bool, bool, dict[str, JSON]]


class EnvironmentActor:
    """An environment in its own process; its methods are what the driver calls remotely."""

    def __init__(self, spec: EnvSpec, exchange: Any | None = None) -> None:
        spec.require_portable("a Ray actor (it makes its environment on its own node)")
        self.spec = spec
        self.exchange = exchange
        self.env = spec.make()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.goldens = {"local": 0, "built": 0, "shipped": 0}

    def spec_made(self) -> dict[str, Any]:
        """The spec this actor's environment was made from, as JSON (``EnvSpec.as_dict``)."""
        return self.env.spec.as_dict()

    def where(self) -> tuple[str, int]:
        """(node id, process id): the driver keeps them to know what a loss took."""
        return self.node_id, os.getpid()

    def reset(self, seed: int, options: dict[str, JSON] | None = None) -> tuple[JSON, dict[str, JSON]]:
        lease = self._ensure_golden(seed)
        if lease is None:
            return self.env.reset(seed=seed, options=options)
        with self._renewing(lease):  # this actor builds the golden for the cluster
            started = self.env.reset(seed=seed, options=options)
            self._publish(lease)
        return started

    def step(self, action: JSON) -> StepReply:
        """Gymnasium's 5-tuple; once the episode ends, ``info["digest"]`` is the final world's digest."""
        observation, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info = {**info, "digest": self.env.state().digest}
        return observation, reward, terminated, truncated, info

    def replay(
        self, seed: int, options: dict[str, JSON] | None, actions: list[JSON]
    ) -> tuple[JSON, dict[str, JSON], list[StepReply]]:
        """Reset and take ``actions``: a lost episode continues here from its log in one call."""
        observation, info = self.reset(seed, options)
        steps = []
        for action in actions:
            steps.append(self.step(action))
            if steps[-1][2] or steps[-1][3]:
                break
        return observation, info, steps

    def state(self) -> State:
        return self.env.state()

    def stats(self) -> dict[str, int]:
        """How this actor's goldens came: found on its node, built here, or shipped from another."""
        return dict(self.goldens)

    def sweep(self) -> list[str]:
        """Make the adapter's strategy once more: that sweeps the copies of dead processes on this node."""
        fresh = self.spec.make()
        swept = [name for leaf in fresh.strategy.leaves() for name in getattr(leaf, "swept", [])]
        fresh.close()
        return swept

    def close(self) -> None:
        self.env.close()

    # -- goldens ------------------------------------------------------------------------------
    def _ensure_golden(self, seed: int) -> str | None:
        """Make sure this node holds the seed's golden; returns its key if this actor must publish it."""
        key = world_key(self.env.adapter.fingerprint(), seed)
        if self.env.strategy.has(key):
            self.goldens["local"] += 1
            return None
        if self.exchange is None:
            return None
        deadline = time.monotonic() + GOLDEN_WAIT
        while time.monotonic() < deadline:
            try:
                verdict, ref = ray.get(self.exchange.claim.remote(key, self.node_id))
            except LOST_ERRORS:
                log.warning("the golden exchange is gone; building %s on this node", key)
                return None
            if verdict == "build":
                return key
            if verdict == "ship":
                if self.env.strategy.has(key):  # another actor on this node loaded it meanwhile
                    return None
                try:
                    import_golden(self.env.strategy, ray.get(ref[0]))
                except LOST_ERRORS:
                    log.warning("golden %s was lost in transit; building it on this node", key)
                    return None
                self.goldens["shipped"] += 1
                return None
            time.sleep(0.05)  # another node is building it
        return None

    @contextmanager
    def _renewing(self, key: str) -> Iterator[None]:
        """Keep the build lease on ``key`` alive while this actor builds and exports the golden."""
        exchange, done = self.exchange, threading.Event()
        assert exchange is not None

        def renew() -> None:
            while not done.wait(LEASE_TIMEOUT / 4):
                try:
                    ray.get(exchange.renew.remote(key, self.node_id))
                except LOST_ERRORS:
                    return

        renewer = threading.Thread(target=renew, name="statekit-lease", daemon=True)
        renewer.start()
        try:
            yield
        finally:
            done.set()
            renewer.join()

    def _publish(self, key: str) -> None:
        """This actor holds the cluster's lease on ``key``: export the golden for the other nodes."""
        if self.env.last_reset_cache == "miss":
            self.goldens["built"] += 1
        assert self.exchange is not None
        try:
            try:
                export = export_golden(self.env.strategy, key)
            except Exception:
                log.exception("exporting golden %s failed; other nodes will build their own", key)
                export = None
            if export is None:
                ray.get(self.exchange.abandon.remote(key))
            else:
                ray.get(self.exchange.publish.remote(key, export))
        except LOST_ERRORS:
            log.warning("the golden exchange is gone; golden %s stays on this node", key)


def spawn(spec: EnvSpec, exchange: Any | None, *, num_cpus: float = 1.0, **options: Any) -> Any:
    """Start one ``EnvironmentActor`` (``options`` are Ray's actor options, e.g. a scheduling strategy)."""
    remote = ray.remote(EnvironmentActor).options(num_cpus=num_cpus, max_restarts=0, **options)
    return remote.remote(spec, exchange)
