"""Container mode for any adapter: each episode runs in its own container, behind the harness.

An adapter offers container mode by listing ``"container"`` in its ``strategies`` and having the
``ContainerImage`` capability: ``container_image(client)``, the id of an image whose entrypoint serves
that adapter with ``serve_command(...)`` (``statekit serve ADAPTER --workers 0 --uds
/run/statekit/harness.sock``).
``statekit.make(adapter, strategy="container")`` then wraps the adapter in ``ContainerAdapter``
(Gymnasium's habit: behaviour layered by wrapping, not a mode inside the adapter's class):

- a seed's golden is a committed container: the builder asks the harness inside to reset to the seed
  (which builds the world with the adapter's own in-process strategy), then the container is stopped
  cleanly and committed (``ContainerPerEpisode``);
- an episode is a fresh container from that golden, driven through the harness API over the Unix
  socket in its host-mounted directory (``RemoteEpisode``); digests and dumps come from the harness
  inside, which applies every determinism control, so a seed's digests, observations and rewards are
  those of the in-process strategies;
- the image id is part of the fingerprint, so the world key changes whenever the image does.

What stays inside the container: the task's hidden facts (forks and reference scripts that need them
want an in-process strategy) and the determinism controls (they cannot be switched off from outside).
"""

from __future__ import annotations

import weakref
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from statekit.adapter import Adapter, AdapterWrapper, EnvSettings, Episode, Outcome
from statekit.capabilities import ContainerImage, LiveServices, StateDumps
from statekit.client import RemoteEnvironment
from statekit.contract import JSON, Task, Tool
from statekit.digest.compute import Digest
from statekit.digest.dump import StateDump
from statekit.errors import ConfigError, RemoteError
from statekit.strategies.base import ResetStrategy
from statekit.strategies.container import SOCKET_DIR, ContainerPerEpisode, docker_client
from statekit.world import World

CONTAINER = "container"
"""The strategy name that selects container mode."""
SOCKET_NAME = "harness.sock"
"""The harness's socket, inside the container's host-mounted directory (``SOCKET_DIR``)."""


def serve_command(adapter: str) -> list[str]:
    """The entrypoint an image runs: ``adapter`` (a registered name or ``pkg.mod:attr``) served on
    the socket statekit connects to, one episode per container (no worker pool)."""
    socket = f"{SOCKET_DIR}/{SOCKET_NAME}"
    return ["python", "-m", "statekit.cli", "serve", adapter, "--workers", "0", "--uds", socket]


def offers_container(adapter: Adapter) -> bool:
    """True when ``adapter`` has the ``ContainerImage`` capability (so container mode can run it)."""
    return isinstance(adapter, ContainerImage)


def adapter_for(adapter: Adapter, strategy: str) -> Adapter:
    """The adapter that serves ``strategy``: ``adapter`` wrapped for container mode when that is asked
    for and offered, else ``adapter`` itself (an adapter's own ``container`` strategy stays its own)."""
    if strategy == CONTAINER and offers_container(adapter):
        return ContainerAdapter(adapter)
    return adapter


def harness(world: World, timeout: float = 120.0) -> RemoteEnvironment:
    """A client for the harness inside ``world``'s container."""
    transport = httpx.HTTPTransport(uds=str(Path(world.location) / SOCKET_NAME))
    return RemoteEnvironment("http://harness", timeout=timeout, transport=transport)


def harness_ready(world: World) -> bool:
    """Readiness: the harness answers /health on its socket."""
    if not (Path(world.location) / SOCKET_NAME).exists():
        return False
    client = harness(world, timeout=2)
    try:
        client.health()
    except RemoteError:
        return False
    finally:
        client.disconnect()
    return True


class RemoteEpisode(Episode):
    """One harness session in one container; reward, state and rows come back over the socket.

    The task's prompt is the first observation's ``"task"`` field when it has one; its hidden facts
    stay inside.
    """

    def __init__(self, world: World, *, seed: int, options: dict[str, JSON]) -> None:
        self.remote = harness(world)
        self.first_observation, info = self.remote.reset(seed=seed, options=options)
        first = self.first_observation
        prompt = first.get("task", "") if isinstance(first, dict) else ""
        self.task = Task(
            id=str(info["task_id"]),
            kind=str(info["task_kind"]),
            prompt=str(prompt),
            max_steps=int(info["max_steps"]),
        )
        self.tools = [Tool(t["name"], t["description"], t["input_schema"]) for t in self.remote.tools]
        self.reward = 0.0
        self.clock = datetime.fromisoformat(str(info["clock"]))
        """The world's own clock, inside the container; each step moves the environment's by as much."""

    def observe(self) -> JSON:
        return self.first_observation

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        observation, reward, terminated, _, info = self.remote.step({"tool": tool, **arguments})
        self.reward = reward
        inside = datetime.fromisoformat(str(info["clock"]))
        advance, self.clock = inside - self.clock, inside  # a 48-hour wait inside is 48 hours outside
        return Outcome(observation, done=terminated, advance=advance)

    def score(self) -> float:
        return self.reward

    def digest(self) -> str:
        return self.remote.state().digest

    def dump(self) -> StateDump:
        return self.remote.dump()

    def close(self) -> None:
        self.remote.disconnect()  # the container (and its session) is discarded with the world


class ContainerAdapter(AdapterWrapper, StateDumps, LiveServices):
    """Any adapter with an image, one container per episode. Made by ``statekit.make`` (through
    ``adapter_for``); ``inner`` is the adapter the harness inside the image serves.

    What the wrapper cannot do from outside it overrides: its rows come from the harness inside (no
    journal to read changes from, no live schema), and live services cannot reach a container with no
    network. Everything else (tasks, reference scripts, tool schemas, assay hooks) is the inner
    adapter's, passed through."""

    strategies = (CONTAINER,)
    deterministic_start = False  # the harness inside chooses the task

    def __init__(self, inner: Adapter) -> None:
        if not offers_container(inner):
            raise ConfigError(
                f"adapter {inner.name!r} has no container image: implement ContainerImage.container_image"
            )
        super().__init__(inner)
        self.strategies = (CONTAINER,)
        self.deterministic_start = False
        self.out_of_process = (
            f"container mode: {inner.name!r} runs inside its container, where its determinism controls "
            "cannot be switched off, its live schema not read and its digest only updated; check those "
            f"with an in-process strategy of {self.in_process()} (statekit check ADAPTER --strategy NAME)"
        )
        self.image_id: str | None = None
        self._episodes: weakref.WeakValueDictionary[str, RemoteEpisode] = weakref.WeakValueDictionary()

    def in_process(self) -> list[str]:
        """The inner adapter's other strategies (what forks, dumps with facts and checks need)."""
        return [name for name in self.inner.strategies if name != CONTAINER]

    def fingerprint(self) -> dict[str, str]:
        if self.image_id is None:
            raise ConfigError(f"{self.name!r}: the image is known once make_strategy('container') ran")
        return {**self.inner.fingerprint(), "image": self.image_id}

    def metadata(self) -> dict[str, JSON]:
        return {**self.inner.metadata(), "image": self.image_id}  # what every episode container ran

    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        if name != CONTAINER:
            raise ConfigError(f"container mode offers the strategy {CONTAINER!r}, not {name!r}")
        client = docker_client()
        assert isinstance(self.inner, ContainerImage)
        self.image_id = self.inner.container_image(client)
        return ContainerPerEpisode(self.image_id, ready=harness_ready, client=client)

    def build_world(self, world: World, seed: int) -> None:
        """The harness inside builds the seed's world on its first reset; the container is committed
        after this returns (stopped cleanly first), so every episode container starts with it."""
        with harness(world) as remote:
            remote.reset(seed=seed)

    def attach(self, world: World, settings: EnvSettings) -> Any:
        return None  # the application is inside the container

    def detach(self, app: Any) -> None:
        pass

    def start_episode(
        self,
        world: World,
        *,
        seed: int,
        options: dict[str, JSON],
        task: Task | None,
        app: Any,
        settings: EnvSettings,
    ) -> Episode:
        if task is not None:
            raise ConfigError(
                f"forks (snapshot/restore) need an in-process strategy of {self.name!r} "
                f"{self.in_process()}: in container mode the episode lives inside its container"
            )
        episode = RemoteEpisode(world, seed=seed, options=options)
        self._episodes[world.id] = episode
        return episode

    def _episode(self, world: World) -> RemoteEpisode:
        episode = self._episodes.get(world.id)
        if episode is None:
            raise ConfigError(
                f"container {world.id[:12]} has no episode: its state is read through the harness "
                "session of the episode running in it (reset first)"
            )
        return episode

    def digest(self, world: World, since: Digest | None = None) -> Digest:
        return Digest(digest=self._episode(world).digest(), tables={})

    def dump(self, world: World) -> StateDump:
        return self._episode(world).dump()

    def live_services(self) -> AbstractContextManager[dict[str, Any]]:
        raise ConfigError(
            f"containers run with no network: record {self.name!r}'s traffic with an in-process strategy"
        )


__all__ = [
    "CONTAINER",
    "SOCKET_NAME",
    "ContainerAdapter",
    "RemoteEpisode",
    "adapter_for",
    "harness",
    "harness_ready",
    "offers_container",
    "serve_command",
]
