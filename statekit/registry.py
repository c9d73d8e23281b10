"""Resolve adapters in one place: an instance, a class, a registered name, or ``"pkg.mod:attr"``."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from statekit.adapter import Adapter
from statekit.errors import ConfigError

ENTRY_POINT_GROUP = "statekit_adapters"
"""Installed distributions name their adapters here (statekit's own: ``claims_app``, ``code_env``)."""


def registered() -> dict[str, str]:
    """Adapter names known to this installation, mapped to their ``pkg.mod:attr`` paths."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _load(path: str) -> Any:
    module_name, _, attr = path.partition(":")
    if not attr:
        raise ConfigError(f"adapter path {path!r} must look like 'package.module:attribute'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"cannot import adapter module {module_name!r}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise ConfigError(f"module {module_name!r} has no attribute {attr!r}") from exc


def resolve_adapter(spec: Adapter | type[Adapter] | str, **options: Any) -> Adapter:
    """Turn ``spec`` into an Adapter instance, or raise ConfigError naming what was tried."""
    if isinstance(spec, Adapter):
        if options:
            raise ConfigError("options cannot be applied to an adapter instance; pass its class or name")
        return spec
    target: Any = spec
    if isinstance(spec, str):
        known = registered()
        if spec in known:
            target = _load(known[spec])
        elif ":" in spec:
            target = _load(spec)
        else:
            raise ConfigError(
                f"unknown adapter {spec!r}: registered adapters are {sorted(known)}; "
                "or give a 'package.module:attribute' path"
            )
    if isinstance(target, type) and issubclass(target, Adapter):
        return target(**options)
    if isinstance(target, Adapter):
        return target
    if callable(target):
        made = target(**options)
        if isinstance(made, Adapter):
            return made
    raise ConfigError(f"{spec!r} is not a statekit Adapter (class, instance or factory)")
