"""statekit: turn a real, stateful application into a deterministic RL environment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from statekit.adapter import Adapter, Episode, Outcome
from statekit.cache import CacheEntry, CacheIndex, WorldCache
from statekit.collateral import Allow, Change, ChangeSet, Expectation, Verdict
from statekit.container_mode import adapter_for
from statekit.contract import FixtureSource, State, StepResult, Task, Tool
from statekit.determinism.base import Control, Violation
from statekit.determinism.controls import clock
from statekit.determinism.egress import allow_egress
from statekit.digest.compute import Digest
from statekit.digest.dump import StateDump, TableDump
from statekit.digest.files import file_dump
from statekit.env import Environment
from statekit.errors import (
    ActionError,
    ConfigError,
    CoverageError,
    EgressError,
    EnvironmentClosed,
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
from statekit.seeds import WorldSet
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
    exclude_tasks: Sequence[str] = (),
    cache_bytes: int | None = None,
    num_worlds: int | None = None,
    start_seed: int = 0,
    **adapter_options: Any,
) -> Environment:
    """A ready environment, like ``gymnasium.make``.

    ``adapter`` is a registered name (``"claims_app"``), a ``"pkg.mod:attr"`` path, a class or an
    instance. ``strategy`` picks one of the adapter's reset strategies (its first by default);
    ``"container"`` runs each episode in a container of the adapter's image (``statekit.container_mode``).
    ``db_url`` points database strategies at a server; without it statekit starts its embedded one.
    ``prewarm`` > 0 keeps that many restored copies of recently used worlds ready.
    ``disable_controls`` switches determinism controls off by name, only to prove they matter.
    ``exclude_tasks`` leaves task kinds out of the pool (``statekit check``'s ``excluded_tasks``).
    ``cache_bytes`` bounds the snapshot cache (default ``$STATEKIT_CACHE_BYTES`` or 2 GiB; see
    ``statekit.cache``). ``num_worlds``/``start_seed`` make seedless resets draw from seeds
    ``start_seed .. start_seed + num_worlds - 1`` only (see ``statekit.seeds`` for the trade-off).
    """
    worlds = WorldSet(num_worlds, start_seed)
    resolved = resolve_adapter(adapter, **adapter_options)
    unknown = sorted(set(exclude_tasks) - set(resolved.task_kinds())) if exclude_tasks else []
    if unknown:
        resolved.close()
        raise ConfigError(
            f"exclude_tasks names unknown task kinds {unknown}; {resolved.name!r} has {resolved.task_kinds()}"
        )
    resolved.excluded_tasks = frozenset(exclude_tasks)
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
        cache = WorldCache(resolved, chosen, budget=cache_bytes)
        return Environment(
            resolved,
            chosen,
            max_steps=max_steps,
            disable_controls=tuple(disable_controls),
            cache=cache,
            worlds=worlds,
        )
    except BaseException:
        chosen.close()
        resolved.close()
        raise


__all__ = [
    "ActionError",
    "Adapter",
    "Allow",
    "CacheEntry",
    "CacheIndex",
    "Change",
    "ChangeSet",
    "Composite",
    "ConfigError",
    "Control",
    "CoverageError",
    "CowFilesystem",
    "Digest",
    "EgressError",
    "Environment",
    "EnvironmentClosed",
    "EnvironmentLost",
    "Episode",
    "Expectation",
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
    "Verdict",
    "Violation",
    "World",
    "WorldCache",
    "WorldSet",
    "allow_egress",
    "clock",
    "docker_client",
    "file_dump",
    "make",
    "resolve_adapter",
    "statekit_home",
]
