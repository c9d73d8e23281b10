"""Rollouts: play a policy on a list of (seed, options) and keep what happened as trajectories.

One recorder serves every engine (in-process, a harness over HTTP, Ray actors), so their
trajectories are the same values and serialise to the same bytes. A trajectory is a pure function
of the seed, the options and the policy: that is what makes losing a process harmless. When the
process holding an episode dies (``EnvironmentLost``), the episode is replayed in a new environment
from its *log* (the seed, the options and the actions taken so far, never asking the policy again
for those), and each replayed observation must equal the one seen before, or the replay stops with
``ReplayDivergence`` naming the step. The policy is then asked only for the steps never taken.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from statekit.contract import JSON, State
from statekit.errors import EnvironmentLost, StatekitError

log = logging.getLogger(__name__)

TRAJECTORY_FORMAT = 1


class ReplayDivergence(StatekitError):
    """Replaying an episode's log gave a different observation: the environment is not deterministic."""


@dataclass(frozen=True)
class Turn:
    """What a policy sees before choosing an action: the episode so far.

    ``observations[-1]`` is the current observation; ``info`` is reset's info without the random
    ``episode_id`` (seed, task id and kind, tools, initial digest, clock).
    """

    seed: int
    options: dict[str, JSON]
    info: dict[str, JSON]
    observations: tuple[JSON, ...]
    actions: tuple[JSON, ...]


Policy = Callable[[Turn], JSON]
"""Chooses the next action. It must be a function of the turn for rollouts to be reproducible."""


class EpisodeEnv(Protocol):
    """What a rollout needs: ``Environment`` and ``RemoteEnvironment`` both are one."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, JSON] | None = None
    ) -> tuple[JSON, dict]: ...

    def step(self, action: Any) -> tuple[JSON, float, bool, bool, dict]: ...

    def state(self) -> State: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Trajectory:
    """One episode, start to end: every observation, action and reward, and the world's digests.

    ``to_json()`` is canonical (sorted keys, no whitespace), so two runs that behaved identically
    give identical bytes whichever engine played them; ``digest`` is its SHA-256.
    """

    seed: int
    options: dict[str, JSON]
    task_id: str
    initial_digest: str
    actions: list[JSON]
    observations: list[JSON]
    rewards: list[float]
    terminated: bool
    truncated: bool
    final_digest: str
    format: int = TRAJECTORY_FORMAT

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.to_json()).hexdigest()


@dataclass(frozen=True)
class EpisodeSpec:
    """Which episode to play: a seed and reset options."""

    seed: int
    options: dict[str, JSON] = field(default_factory=dict)

    @classmethod
    def of(cls, item: EpisodeSpec | int | tuple[int, Mapping[str, JSON] | None]) -> EpisodeSpec:
        """Accept ``EpisodeSpec``, a bare seed, or ``(seed, options)``."""
        if isinstance(item, EpisodeSpec):
            return item
        if isinstance(item, int) and not isinstance(item, bool):
            return cls(item)
        if isinstance(item, tuple) and len(item) == 2:
            seed, options = item
            if isinstance(seed, int) and not isinstance(seed, bool):
                return cls(seed, dict(options or {}))
        raise ValueError(f"an episode is a seed or (seed, options), got {item!r}")


class Recorder:
    """One episode being played: its log, and the trajectory it becomes.

    Drive it with ``begin`` (after reset), then ``next_action``/``record`` until ``done``, then
    ``finish`` with the final digest. After a lost environment, ``restart()`` and drive it again in a
    new one: the logged actions are replayed (and their observations checked) before the policy is
    asked for anything new.
    """

    def __init__(self, spec: EpisodeSpec, policy: Policy) -> None:
        self.spec = spec
        self.policy = policy
        self.actions: list[JSON] = []
        self.observations: list[JSON] = []
        self.rewards: list[float] = []
        self.info: dict[str, JSON] = {}
        self.ended = (False, False)
        self.position = 0
        """Steps taken in the current environment (replayed or new)."""
        self.replays = 0

    @property
    def replaying(self) -> bool:
        return self.position < len(self.actions)

    @property
    def done(self) -> bool:
        return not self.replaying and any(self.ended)

    def restart(self) -> None:
        """The environment was lost: replay the log from the seed in the next one."""
        self.position = 0
        self.replays += 1

    def begin(self, observation: JSON, info: Mapping[str, JSON]) -> None:
        public = {k: v for k, v in info.items() if k != "episode_id"}
        if self.observations:
            self._check(0, observation)
            if public.get("digest") != self.info.get("digest"):
                raise ReplayDivergence(
                    f"seed {self.spec.seed}: the replayed world's initial digest {public.get('digest')} "
                    f"differs from the first run's {self.info.get('digest')}"
                )
        else:
            self.observations.append(observation)
            self.info = public
        self.position = 0

    def next_action(self) -> JSON:
        if self.replaying:
            return self.actions[self.position]
        action = self.policy(
            Turn(
                self.spec.seed,
                dict(self.spec.options),
                dict(self.info),
                tuple(self.observations),
                tuple(self.actions),
            )
        )
        self.actions.append(action)
        return action

    def record(self, observation: JSON, reward: float, terminated: bool, truncated: bool) -> None:
        self.position += 1
        if self.position < len(self.observations):
            self._check(self.position, observation)
            return
        self.observations.append(observation)
        self.rewards.append(float(reward))
        self.ended = (terminated, truncated)

    def finish(self, final_digest: str) -> Trajectory:
        return Trajectory(
            seed=self.spec.seed,
            options=dict(self.spec.options),
            task_id=str(self.info.get("task_id", "")),
            initial_digest=str(self.info.get("digest", "")),
            actions=list(self.actions),
            observations=list(self.observations),
            rewards=list(self.rewards),
            terminated=self.ended[0],
            truncated=self.ended[1],
            final_digest=final_digest,
        )

    def _check(self, step: int, observation: JSON) -> None:
        if observation != self.observations[step]:
            raise ReplayDivergence(
                f"seed {self.spec.seed}: replaying the log gave a different observation at step {step}: "
                f"{_short(observation)} instead of {_short(self.observations[step])}; the environment "
                "is not deterministic (statekit check names the control that is missing)"
            )


def play(env: EpisodeEnv, recorder: Recorder) -> Trajectory:
    """Play (or resume, after ``restart()``) one episode to its end in ``env``."""
    observation, info = env.reset(seed=recorder.spec.seed, options=dict(recorder.spec.options) or None)
    recorder.begin(observation, info)
    while not recorder.done:
        observation, reward, terminated, truncated, _ = env.step(recorder.next_action())
        recorder.record(observation, reward, terminated, truncated)
    return recorder.finish(env.state().digest)


def run(
    make_env: Callable[[], EpisodeEnv],
    episodes: Sequence[EpisodeSpec | int | tuple[int, Mapping[str, JSON] | None]],
    policy: Policy,
    *,
    concurrency: int = 1,
    max_losses: int = 3,
) -> list[Trajectory]:
    """Play every episode (``concurrency`` at a time, one environment per thread); trajectories in order.

    ``make_env`` makes one environment: ``statekit.make(...)`` in-process, or
    ``RemoteEnvironment(url)`` for a harness. An environment that is lost mid-episode is replaced
    and the episode replayed from its log, at most ``max_losses`` times per episode.
    """
    specs = [EpisodeSpec.of(item) for item in episodes]
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    results: list[Trajectory | None] = [None] * len(specs)
    todo: queue.Queue[int] = queue.Queue()
    for index in range(len(specs)):
        todo.put(index)
    failures: list[BaseException] = []

    def worker() -> None:
        env: EpisodeEnv | None = None
        try:
            while not failures:
                try:
                    index = todo.get_nowait()
                except queue.Empty:
                    return
                recorder = Recorder(specs[index], policy)
                while True:
                    env = env or make_env()
                    try:
                        results[index] = play(env, recorder)
                        break
                    except EnvironmentLost as exc:
                        _close_quietly(env)
                        env = None
                        if recorder.replays >= max_losses:
                            raise
                        log.warning("seed %d: %s; replaying its log elsewhere", recorder.spec.seed, exc)
                        recorder.restart()
        except BaseException as exc:
            failures.append(exc)
        finally:
            if env is not None:
                _close_quietly(env)

    threads = [
        threading.Thread(target=worker, name=f"statekit-rollout-{n}", daemon=True)
        for n in range(min(concurrency, max(len(specs), 1)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return [trajectory for trajectory in results if trajectory is not None]


def scripted(scripts: Mapping[int, Sequence[JSON]], *, then: JSON | None = None) -> Policy:
    """A policy that plays a fixed action script per seed (``then`` once a script runs out)."""

    def policy(turn: Turn) -> JSON:
        script = scripts[turn.seed]
        step = len(turn.actions)
        if step < len(script):
            return script[step]
        if then is None:
            raise StatekitError(f"seed {turn.seed}: the script has only {len(script)} actions")
        return then

    return policy


def _close_quietly(env: EpisodeEnv) -> None:
    try:
        env.close()
    except Exception:
        log.debug("closing a lost environment failed", exc_info=True)


def _short(value: JSON, limit: int = 200) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit] + "..."
