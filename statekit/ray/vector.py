"""A vector of B environments on B Ray actors: reset and step them together, results batched.

``step(actions)`` sends the B actions at once and returns Gymnasium's five values as five lists of
length B; the actors step in parallel, so a batch costs about one step plus one round trip. An
environment whose episode ended stays ended (stepping it raises ``ResetNeeded``, as in-process)
until ``reset`` names it again; ``reset(seeds, indices=...)`` resets a subset. When the episode
ends, ``info["digest"]`` is its final world's digest.

A lost actor (killed, or its node gone) is replaced during the call that noticed, and its episode
replayed there from the vector's log (seed, options, actions since its reset), then the call goes
on: the caller sees the same results as without the loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import ray

from statekit.contract import JSON, State
from statekit.errors import EnvironmentLost, ResetNeeded
from statekit.ray.actor import LOST_ERRORS, EnvSpec, StepReply
from statekit.ray.exchange import start_exchange
from statekit.ray.fleet import Fleet
from statekit.rollouts import ReplayDivergence


@dataclass
class _Log:
    seed: int
    options: dict[str, JSON] | None
    actions: list[JSON] = field(default_factory=list)
    last: JSON = None


class VectorEnv:
    """``num_envs`` environments, one Ray actor each (``num_cpus`` per actor), stepped as a batch."""

    def __init__(
        self, spec: EnvSpec | str, num_envs: int, *, num_cpus: float = 1.0, max_losses: int = 3
    ) -> None:
        self.spec = spec if isinstance(spec, EnvSpec) else EnvSpec(spec)
        self.num_envs = num_envs
        self.max_losses = max_losses
        self.losses = 0
        self._logs: list[_Log | None] = [None] * num_envs
        self.exchange = start_exchange()
        try:
            self.fleet = Fleet(self.spec, num_envs, num_cpus=num_cpus, exchange=self.exchange)
        except BaseException:
            ray.kill(self.exchange)
            raise

    @property
    def placement(self) -> list[tuple[str, int]]:
        """(node id, process id) of each environment's actor."""
        return [(m.node_id, m.pid) for m in self.fleet.members]

    def reset(
        self,
        seeds: Sequence[int],
        options: Sequence[dict[str, JSON] | None] | None = None,
        *,
        indices: Sequence[int] | None = None,
    ) -> tuple[list[JSON], list[dict[str, JSON]]]:
        """Reset the environments at ``indices`` (default: all) to ``seeds``; one value per index."""
        chosen = list(range(self.num_envs)) if indices is None else list(indices)
        options = list(options) if options is not None else [None] * len(chosen)
        if not len(seeds) == len(options) == len(chosen):
            raise ValueError(f"{len(chosen)} environments need {len(chosen)} seeds and options")
        for index, seed, opts in zip(chosen, seeds, options, strict=True):
            self._logs[index] = _Log(seed, dict(opts) if opts else None)
        replies = self._call(
            chosen, lambda i: self._actor(i).reset.remote(self._log(i).seed, self._log(i).options)
        )
        for index, (observation, _) in zip(chosen, replies, strict=True):
            self._log(index).last = observation
        return [r[0] for r in replies], [r[1] for r in replies]

    def step(
        self, actions: Sequence[JSON]
    ) -> tuple[list[JSON], list[float], list[bool], list[bool], list[dict[str, JSON]]]:
        """One action per environment, all applied at once; five lists of ``num_envs`` values."""
        if len(actions) != self.num_envs:
            raise ValueError(f"step needs {self.num_envs} actions (one per environment), got {len(actions)}")
        for index in range(self.num_envs):
            self._log(index).actions.append(actions[index])
        replies: list[StepReply] = self._call(
            list(range(self.num_envs)),
            lambda i: self._actor(i).step.remote(self._log(i).actions[-1]),
            stepping=True,
        )
        for index, reply in enumerate(replies):
            self._log(index).last = reply[0]
        observations, rewards, terminated, truncated, infos = (
            list(column) for column in zip(*replies, strict=True)
        )
        return observations, [float(r) for r in rewards], terminated, truncated, infos

    def states(self) -> list[State]:
        return self._call(list(range(self.num_envs)), lambda i: self._actor(i).state.remote())

    def close(self) -> None:
        try:
            self.fleet.close()
        finally:
            ray.kill(self.exchange)

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------
    def _actor(self, index: int) -> Any:
        return self.fleet.members[index].handle

    def _log(self, index: int) -> _Log:
        log = self._logs[index]
        if log is None:
            raise ResetNeeded(f"environment {index} has no episode: reset it first")
        return log

    def _call(self, indices: list[int], submit: Any, *, stepping: bool = False) -> list[Any]:
        """Submit one call per index, gather in order; a lost actor is replaced, replayed, and asked again."""
        refs = {index: submit(index) for index in indices}
        results: dict[int, Any] = {}
        for index in indices:
            losses = 0
            while index not in results:
                try:
                    results[index] = ray.get(refs[index])
                except LOST_ERRORS as exc:
                    losses += 1
                    self.losses += 1
                    if losses > self.max_losses:
                        raise EnvironmentLost(
                            f"environment {index} lost its actor {losses} times: {exc}"
                        ) from exc
                    self._revive(index, stepping)
                    refs[index] = submit(index)
        return [results[index] for index in indices]

    def _revive(self, index: int, stepping: bool) -> None:
        """Replace the actor and bring it to where the lost one was before the call in flight."""
        self.fleet.replace(index)
        log = self._logs[index]
        if log is None:
            return
        done = log.actions[:-1] if stepping else list(log.actions)  # a step in flight is asked again
        observation, _, steps = ray.get(self._actor(index).replay.remote(log.seed, log.options, done))
        replayed = steps[-1][0] if steps else observation
        if done and replayed != log.last:
            raise ReplayDivergence(
                f"environment {index} (seed {log.seed}): replaying {len(done)} actions gave a different "
                "observation than before the loss; the environment is not deterministic"
            )
