"""The environment contract's value types: what reset/step/state hand back.

Everything here is plain data and JSON-serialisable, so the same values travel in-process, over
HTTP and through the Gymnasium adapter unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

JSON = Any  # a JSON-serialisable value: dict, list, str, int, bool or None (never a float in state)

SERVICE_DOMAIN = "statekit.invalid"
"""Where replayed outside services 'live': the .invalid TLD never resolves, so nothing could reach it."""


def canonical_url(service: str) -> str:
    """The base URL an application is given for outside service ``service`` while its traffic is
    replayed, and under which recordings keep it (``http://vendors.statekit.invalid``): cassettes do
    not depend on the port the live service happened to listen on."""
    return f"http://{service}.{SERVICE_DOMAIN}"


@dataclass(frozen=True)
class Tool:
    """One action an agent can take: a name, what it does, and a JSON Schema for its arguments."""

    name: str
    description: str
    input_schema: dict[str, JSON]
    read_only: bool = False
    """MCP's ``readOnlyHint``: the tool changes nothing. statekit's exploit probes look around with
    read-only tools and spend no every-entity episode on them; the default assumes a tool writes."""

    def as_dict(self) -> dict[str, JSON]:
        out = {"name": self.name, "description": self.description, "input_schema": self.input_schema}
        if self.read_only:
            out["annotations"] = {"readOnlyHint": True}
        return out


@dataclass(frozen=True)
class Task:
    """What the agent is asked to do. Only ``prompt`` is shown; the verifier's facts stay hidden."""

    id: str
    kind: str
    prompt: str
    max_steps: int


@dataclass(frozen=True)
class StepResult:
    """Gymnasium's 5-tuple with names: terminated (the task ended) vs truncated (an outside limit)."""

    observation: JSON
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, JSON] = field(default_factory=dict)

    def as_tuple(self) -> tuple[JSON, float, bool, bool, dict[str, JSON]]:
        return self.observation, self.reward, self.terminated, self.truncated, self.info


@dataclass(frozen=True)
class State:
    """What ``state()`` reports: enough to identify an episode and prove its world."""

    episode_id: str
    step_count: int
    seed: int
    clock: str
    digest: str

    def as_dict(self) -> dict[str, JSON]:
        return asdict(self)


@dataclass(frozen=True)
class FixtureSource:
    """Where an adapter's seeded data comes from: ``statekit assay`` reports and judges it.

    Document 000 (the engine brief) asks "whose data is in the fixtures?" before anything is built:
    synthetic data avoids the question; a named dataset comes with the terms it is used under;
    production data carries every obligation the production data carries.
    """

    name: str
    origin: str
    """The generator (module, tool) or the dataset the records come from."""
    synthetic: bool
    terms: str = ""
    """The licence (an SPDX expression where there is one) or agreement a named source is used under."""
    production_data: bool = False
