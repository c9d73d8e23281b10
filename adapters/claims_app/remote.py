"""The claims environment inside its own container, driven through the harness on a Unix socket.

With the ``container`` strategy each episode is a container from the claims image: the app, its
embedded PostgreSQL (holding the seed's golden database, committed into the image) and ``statekit
serve`` as its entrypoint. The host never touches the app; it speaks the harness API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from statekit.adapter import Episode, Outcome
from statekit.contract import JSON, Task, Tool
from statekit.errors import ResetError
from statekit.strategies.base import World

SOCKET_NAME = "harness.sock"


def harness_client(world: World, timeout: float = 120.0) -> httpx.Client:
    transport = httpx.HTTPTransport(uds=str(Path(world.location) / SOCKET_NAME))
    return httpx.Client(transport=transport, base_url="http://harness", timeout=timeout)


def harness_ready(world: World) -> bool:
    """Readiness: the harness answers /health on its socket."""
    if not (Path(world.location) / SOCKET_NAME).exists():
        return False
    try:
        with harness_client(world, timeout=2) as client:
            return client.get("/health").status_code == 200
    except httpx.HTTPError:
        return False


def _checked(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 400:
        raise ResetError(f"harness in the container answered {response.status_code}: {response.text[:500]}")
    data = response.json()
    assert isinstance(data, dict)
    return data


class RemoteEpisode(Episode):
    """One harness session in one container; reward and state come back over the socket."""

    def __init__(self, world: World, *, seed: int, options: dict[str, JSON]) -> None:
        self.client = harness_client(world)
        started = _checked(self.client.post("/reset", json={"seed": seed, "options": options}))
        self.session_id = str(started["session_id"])
        info = started["info"]
        self.first_observation: JSON = started["observation"]
        self.task = Task(
            id=str(info["task_id"]),
            kind=str(info["task_kind"]),
            prompt=str(started["observation"].get("task", "")),
            max_steps=int(info["max_steps"]),
        )
        self.tools = [Tool(t["name"], t["description"], t["input_schema"]) for t in info["tools"]]
        self.reward = 0.0

    def observe(self) -> JSON:
        return self.first_observation

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        action = {"tool": tool, **arguments}
        result = _checked(self.client.post("/step", json={"session_id": self.session_id, "action": action}))
        self.reward = float(result["reward"])
        return Outcome(result["observation"], done=bool(result["terminated"]))

    def score(self) -> float:
        return self.reward

    def digest(self) -> str:
        state = _checked(self.client.get("/state", params={"session_id": self.session_id}))
        return str(state["digest"])

    def close(self) -> None:
        self.client.close()
