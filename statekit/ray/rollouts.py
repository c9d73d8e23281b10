"""Rollouts on Ray: a policy plays many episodes over a fleet of environment actors, surviving losses.

The policy runs in the driver (where a trainer's model, or its client, lives); each actor plays one
episode at a time and the driver answers whichever actor replies first (``ray.wait``), so a slow
episode never holds up the others. Trajectories are ``statekit.rollouts.Trajectory``: the same
values, and the same bytes, as an in-process or harness run of the same episodes and policy.

When an actor or its whole node dies mid-episode, the actor is replaced (on any node with room)
and the episode is replayed there from its log in one call (``EnvironmentActor.replay``): the seed,
the options and the actions already taken, each replayed observation checked against the one seen
before. Determinism is the fault tolerance: nothing is checkpointed, nothing is lost.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ray

from statekit.contract import JSON
from statekit.errors import EnvironmentLost
from statekit.ray.actor import LOST_ERRORS, EnvSpec
from statekit.ray.exchange import start_exchange
from statekit.ray.fleet import Fleet
from statekit.rollouts import EpisodeSpec, Policy, Recorder, Trajectory

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Loss:
    """An episode whose actor died under it: where, and what Ray said."""

    seed: int
    node_id: str
    pid: int
    error: str


class RayRollouts:
    """``actors`` environment actors (``num_cpus`` each) and a golden exchange; ``run`` plays episodes.

    Keep one for many ``run`` calls (actors and their nodes' goldens stay warm); ``close()`` stops
    the actors and sweeps the nodes that lost one.
    """

    def __init__(
        self,
        spec: EnvSpec | str,
        *,
        actors: int = 2,
        num_cpus: float = 1.0,
        max_losses: int = 3,
    ) -> None:
        self.spec = spec if isinstance(spec, EnvSpec) else EnvSpec(spec)
        self.max_losses = max_losses
        self.losses: list[Loss] = []
        self.swept: dict[str, list[str]] = {}
        self.exchange = start_exchange()
        try:
            self.fleet = Fleet(self.spec, actors, num_cpus=num_cpus, exchange=self.exchange)
        except BaseException:
            ray.kill(self.exchange)
            raise

    def run(
        self,
        episodes: Sequence[EpisodeSpec | int | tuple[int, Mapping[str, JSON] | None]],
        policy: Policy,
    ) -> list[Trajectory]:
        """Play every episode; trajectories come back in the order of ``episodes``."""
        recorders = [Recorder(EpisodeSpec.of(item), policy) for item in episodes]
        results: list[Trajectory | None] = [None] * len(recorders)
        todo = deque(range(len(recorders)))
        inflight: dict[Any, tuple[int, int, str]] = {}

        def start(member: int, episode: int) -> None:
            recorder, actor = recorders[episode], self.fleet.members[member].handle
            options = dict(recorder.spec.options) or None
            if recorder.actions:
                ref = actor.replay.remote(recorder.spec.seed, options, list(recorder.actions))
                inflight[ref] = (member, episode, "replay")
            else:
                ref = actor.reset.remote(recorder.spec.seed, options)
                inflight[ref] = (member, episode, "reset")

        for member in range(len(self.fleet.members)):
            if todo:
                start(member, todo.popleft())
        while inflight:
            (ready,), _ = ray.wait(list(inflight), num_returns=1)
            member, episode, kind = inflight.pop(ready)
            recorder = recorders[episode]
            try:
                reply = ray.get(ready)
            except LOST_ERRORS as exc:
                self._lost(member, recorder, exc)
                start(member, episode)
                continue
            digest = self._feed(recorder, kind, reply)
            if recorder.done:
                results[episode] = recorder.finish(digest)
                if todo:
                    start(member, todo.popleft())
                continue
            step = self.fleet.members[member].handle.step.remote(recorder.next_action())
            inflight[step] = (member, episode, "step")
        return [trajectory for trajectory in results if trajectory is not None]

    def golden_stats(self) -> dict[str, int]:
        """The exchange's counts: goldens built (once per cluster), shipped to other nodes, bytes."""
        stats: dict[str, int] = ray.get(self.exchange.stats.remote())
        return stats

    def close(self) -> None:
        """Stop the actors (each closes its environment) and sweep every live node that lost one."""
        try:
            self.swept = self.fleet.close()
        finally:
            ray.kill(self.exchange)

    def __enter__(self) -> RayRollouts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------
    @staticmethod
    def _feed(recorder: Recorder, kind: str, reply: Any) -> str:
        """Hand one reply to the recorder; returns the final digest once the episode ended."""
        if kind == "reset":
            recorder.begin(*reply)
            return ""
        steps = [reply]
        if kind == "replay":
            observation, info, steps = reply
            recorder.begin(observation, info)
        digest = ""
        for observation, reward, terminated, truncated, info in steps:
            if kind == "replay":
                recorder.next_action()  # the logged action this step replayed
            recorder.record(observation, reward, terminated, truncated)
            digest = str(info.get("digest", ""))
        return digest

    def _lost(self, member: int, recorder: Recorder, exc: BaseException) -> None:
        dead = self.fleet.members[member]
        self.losses.append(Loss(recorder.spec.seed, dead.node_id, dead.pid, f"{type(exc).__name__}: {exc}"))
        if recorder.replays >= self.max_losses:
            raise EnvironmentLost(
                f"seed {recorder.spec.seed} lost its actor {recorder.replays + 1} times; last: {exc}"
            ) from exc
        log.warning(
            "seed %d lost actor %d on node %s; replaying its log", recorder.spec.seed, dead.pid, dead.node_id
        )
        recorder.restart()
        self.fleet.replace(member)


def rollouts(
    spec: EnvSpec | str,
    episodes: Sequence[EpisodeSpec | int | tuple[int, Mapping[str, JSON] | None]],
    policy: Policy,
    *,
    actors: int = 2,
    num_cpus: float = 1.0,
    max_losses: int = 3,
) -> list[Trajectory]:
    """Play ``episodes`` with ``policy`` on ``actors`` Ray actors; one trajectory per episode, in order."""
    with RayRollouts(spec, actors=actors, num_cpus=num_cpus, max_losses=max_losses) as runner:
        return runner.run(episodes, policy)
