"""statekit: turn a real, stateful application into a deterministic RL environment."""

from __future__ import annotations

from typing import Any

from statekit.adapter import Adapter, Episode, Outcome
from statekit.container_mode import adapter_for
from statekit.contract import FixtureSource, State, StepResult, Task, Tool
from statekit.digest.compute import Digest
from statekit.digest.dump import StateDump, TableDump
from statekit.digest.files import file_dump
from statekit.env import Environment
from statekit.errors import (
    ActionError,
    ConfigError,
    CoverageError,
    EnvironmentLost,
    ReplayMissError,
    ResetError,
    ResetNeeded,
    RewindError,
    SpecError,
    StatekitError,
)
from statekit.home import statekit_home
from statekit.registry import resolve_adapter
from statekit.strategies.base import ResetStrategy, World
from statekit.strategies.composite import Composite
from statekit.strategies.container import docker_client
from statekit.strategies.cow_fs import CowFilesystem
from statekit.strategies.prewarmed import Prewarmed
from statekit.strategies.rewinding import Rewinding


def make(
    adapter: Adapter | type[Adapter] | str,
    *,
    strategy: str | None = None,
    db_url: str | None = None,
    prewarm: int = 0,
    max_steps: int | None = None,
    disable_controls: tuple[str, ...] = (),
    **adapter_options: Any,
) -> Environment:
    """A ready environment, like ``gymnasium.make``.

    ``adapter`` is a registered name (``"claims_app"``), a ``"pkg.mod:attr"`` path, a class or an
    instance. ``strategy`` picks one of the adapter's reset strategies (its first by default);
    ``"container"`` runs each episode in a container of the adapter's image (``statekit.container_mode``).
    ``db_url`` points database strategies at a server; without it statekit starts its embedded one.
    ``prewarm`` > 0 keeps that many restored copies of recently used worlds ready.
    ``disable_controls`` switches determinism controls off, only to prove they matter.
    """
    resolved = resolve_adapter(adapter, **adapter_options)
    name = strategy or resolved.strategies[0]
    if name not in resolved.strategies:
        resolved.close()
        raise ConfigError(
            f"adapter {resolved.name!r} offers strategies {list(resolved.strategies)}, not {name!r}"
        )
    resolved = adapter_for(resolved, name)  # container mode wraps any adapter that offers an image
    try:
        chosen: ResetStrategy = resolved.make_strategy(name, db_url=db_url)
    except BaseException:
        resolved.close()
        raise
    if prewarm:  # a Rewinding strategy stays outermost: the pool fills it with fresh copies
        if isinstance(chosen, Rewinding):
            chosen = Rewinding(Prewarmed(chosen.inner, depth=prewarm), max_parked=chosen.max_parked)
        else:
            chosen = Prewarmed(chosen, depth=prewarm)
    try:
        return Environment(resolved, chosen, max_steps=max_steps, disable_controls=tuple(disable_controls))
    except BaseException:
        chosen.close()
        resolved.close()
        raise


__all__ = [
    "ActionError",
    "Adapter",
    "Composite",
    "ConfigError",
    "CoverageError",
    "CowFilesystem",
    "Digest",
    "Environment",
    "EnvironmentLost",
    "Episode",
    "FixtureSource",
    "Outcome",
    "Prewarmed",
    "ReplayMissError",
    "ResetError",
    "ResetNeeded",
    "ResetStrategy",
    "RewindError",
    "Rewinding",
    "SpecError",
    "State",
    "StateDump",
    "StatekitError",
    "StepResult",
    "TableDump",
    "Task",
    "Tool",
    "World",
    "docker_client",
    "file_dump",
    "make",
    "resolve_adapter",
    "statekit_home",
]
