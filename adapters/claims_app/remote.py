"""The claims environment inside its own container, driven through the harness on a Unix socket.

With the ``container`` strategy each episode is a container from the claims image: the app, its
embedded PostgreSQL (holding the seed's golden database, committed into the image) and ``statekit
serve`` as its entrypoint. The host never touches the app; it speaks the harness API through
statekit's own client, over the socket in the container's host-mounted directory.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import httpx

from statekit.adapter import Episode, Outcome
from statekit.client import RemoteEnvironment
from statekit.contract import JSON, Task, Tool
from statekit.errors import RemoteError
from statekit.strategies.base import World

SOCKET_NAME = "harness.sock"


def harness(world: World, timeout: float = 120.0) -> RemoteEnvironment:
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
    """One harness session in one container; reward and state come back over the socket."""

    def __init__(self, world: World, *, seed: int, options: dict[str, JSON]) -> None:
        self.remote = harness(world)
        self.first_observation, info = self.remote.reset(seed=seed, options=options)
        prompt = self.first_observation.get("task", "") if isinstance(self.first_observation, dict) else ""
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

    def close(self) -> None:
        self.remote.disconnect()  # the container (and its session) is discarded with the world
