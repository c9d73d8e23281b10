"""statekit on Ray (``pip install 'statekit[ray]'``): environments as actors, a vector API, rollouts.

- ``EnvSpec``: what each actor makes (``statekit.EnvSpec``, the one spec every entry point takes).
- ``VectorEnv(spec, B)``: B environments on B actors, reset and stepped as a batch.
- ``RayRollouts(spec, actors=N).run(episodes, policy)`` / ``rollouts(...)``: a policy plays a list
  of ``(seed, options)`` over N actors; trajectories with digests, identical to an in-process run,
  and still identical when an actor or a node dies mid-episode (the episode is replayed elsewhere).
- ``LocalCluster``: a real multi-node Ray cluster on this machine, on loopback (tests, benchmarks).

Per node, one embedded PostgreSQL under the node's ``$STATEKIT_HOME`` is shared by the node's
actors; a seed's golden is built once per cluster and shipped to the other nodes through Ray's
object store (``GoldenExchange``).
"""

from __future__ import annotations

try:
    import ray  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installation
    from statekit.errors import ConfigError

    raise ConfigError("statekit.ray needs Ray: pip install 'statekit[ray]'") from exc

from statekit.ray.actor import EnvironmentActor, EnvSpec
from statekit.ray.cluster import LocalCluster
from statekit.ray.exchange import GoldenExchange
from statekit.ray.rollouts import Loss, RayRollouts, rollouts
from statekit.ray.vector import VectorEnv

__all__ = [
    "EnvSpec",
    "EnvironmentActor",
    "GoldenExchange",
    "LocalCluster",
    "Loss",
    "RayRollouts",
    "VectorEnv",
    "rollouts",
]
