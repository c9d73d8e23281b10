"""``statekit.make``: an ``EnvSpec`` turned into a ready environment, in one place.

Every entry point (the Python API, ``statekit serve``'s sessions, Ray actors, Gymnasium, the command
line, the pytest plugin) ends here, so an environment is the same whichever door it came through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statekit.cache import WorldCache
from statekit.container_mode import adapter_for
from statekit.env import Environment
from statekit.envspec import EnvSpec
from statekit.errors import ConfigError
from statekit.strategies.base import ResetStrategy

if TYPE_CHECKING:
    from statekit.adapter import Adapter


def make(adapter: str | type[Adapter] | Adapter | EnvSpec, **fields: Any) -> Environment:
    """A ready environment, like ``gymnasium.make``: ``make(EnvSpec(...))``, or ``make(adapter, **fields)``
    with ``EnvSpec``'s fields as keyword arguments (``strategy=``, ``db_url=``, ``prewarm=``,
    ``max_steps=``, ``exclude_tasks=``, ``disable_controls=``, ``cache_bytes=``, ``num_worlds=``,
    ``start_seed=``); any other keyword argument is an option of the adapter's constructor."""
    return make_environment(EnvSpec.of(adapter, **fields))


def make_environment(spec: EnvSpec) -> Environment:
    """Resolve the spec's adapter, check the spec against it, and build the strategy, the world cache
    and the environment. Anything made before a refusal is closed again."""
    resolved = spec.resolve_adapter()
    try:
        kinds = resolved.task_kinds() if spec.exclude_tasks else []
        unknown = sorted(set(spec.exclude_tasks) - set(kinds))
        if unknown:
            raise ConfigError(
                f"exclude_tasks names unknown task kinds {unknown}; {resolved.name!r} has {kinds}"
            )
        name = spec.strategy or resolved.strategies[0]
        if name not in resolved.strategies:
            raise ConfigError(
                f"adapter {resolved.name!r} offers strategies {list(resolved.strategies)}, not {name!r}"
            )
        resolved = adapter_for(resolved, name)  # container mode wraps any adapter that offers an image
        chosen: ResetStrategy = resolved.make_strategy(name, db_url=spec.db_url)
    except BaseException:
        resolved.close()
        raise
    try:
        if spec.prewarm:
            chosen = chosen.pooled(spec.prewarm)
        return Environment(
            resolved, chosen, spec=spec, cache=WorldCache(resolved, chosen, budget=spec.cache_bytes)
        )
    except BaseException:
        chosen.close()
        resolved.close()
        raise
