"""statekit: turn a real, stateful application into a deterministic RL environment.

This is the face for users: ``make`` an environment from an ``EnvSpec`` (or an adapter's name and
options), play it, serve it, check it (``statekit.checks``), and catch statekit's errors. Adapter authors
import from ``statekit.kit``; the two faces share no name.
"""

from __future__ import annotations

from statekit.adapter import resolve_adapter
from statekit.cache import CacheEntry, CacheIndex, WorldCache
from statekit.client import RemoteEnvironment
from statekit.collateral import Change, ChangeSet, Verdict
from statekit.contract import State, StepResult
from statekit.env import Environment
from statekit.envspec import EnvSpec
from statekit.errors import (
    ActionError,
    ConfigError,
    CoverageError,
    EgressError,
    EnvironmentClosed,
    EnvironmentLost,
    RemoteError,
    ReplayMissError,
    ResetError,
    ResetNeeded,
    RewindError,
    ServerDown,
    SpecError,
    StatekitError,
    WorldLost,
)
from statekit.make import make
from statekit.seeds import WorldSet

__all__ = [
    "ActionError",
    "CacheEntry",
    "CacheIndex",
    "Change",
    "ChangeSet",
    "ConfigError",
    "CoverageError",
    "EgressError",
    "EnvSpec",
    "Environment",
    "EnvironmentClosed",
    "EnvironmentLost",
    "RemoteEnvironment",
    "RemoteError",
    "ReplayMissError",
    "ResetError",
    "ResetNeeded",
    "RewindError",
    "ServerDown",
    "SpecError",
    "State",
    "StatekitError",
    "StepResult",
    "Verdict",
    "WorldCache",
    "WorldLost",
    "WorldSet",
    "make",
    "resolve_adapter",
]
