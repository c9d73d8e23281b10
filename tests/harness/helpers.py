"""Play one scripted episode in-process or over HTTP and record what determinism is judged on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from statekit.client import RemoteEnvironment
from statekit.contract import JSON
from statekit.env import Environment

LEDGER = "statekit.testing.ledger:LedgerAdapter"


@dataclass
class Trace:
    """Initial digest, every observation, reward and post-step digest, and how the episode ended."""

    seed: int
    initial_digest: str
    observations: list[JSON] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    ended: tuple[bool, bool] = (False, False)


def play(env: Environment | RemoteEnvironment, seed: int, script: list[dict[str, Any]]) -> Trace:
    """Same code for both: that is the point of RemoteEnvironment mirroring Environment."""
    obs, info = env.reset(seed=seed)
    trace = Trace(seed, str(info["digest"]), observations=[obs])
    for action in script:
        obs, reward, terminated, truncated, _ = env.step(action)
        trace.observations.append(obs)
        trace.rewards.append(reward)
        trace.digests.append(env.state().digest)
        trace.ended = (terminated, truncated)
        if terminated or truncated:
            break
    return trace
