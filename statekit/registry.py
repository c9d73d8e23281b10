"""Where adapters are found: the names installed distributions register (``statekit_adapters`` entry
points), and ``"pkg.mod:attr"`` paths. ``statekit.adapter.resolve_adapter`` turns either (or a class,
or an instance) into an adapter."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from statekit.errors import ConfigError

ENTRY_POINT_GROUP = "statekit_adapters"
"""Installed distributions name their adapters here (statekit's own: ``claims_app``, ``code_env``)."""


def lookup(name: str) -> Any:
    """The object a registered name or a ``"pkg.mod:attr"`` path names, or a ConfigError naming what
    was tried."""
    known = registered()
    if name in known:
        return load(known[name])
    if ":" in name:
        return load(name)
    raise ConfigError(
        f"unknown adapter {name!r}: registered adapters are {sorted(known)}; or give a "
        "'package.module:attribute' path"
    )


def registered() -> dict[str, str]:
    """Adapter names known to this installation, mapped to their ``pkg.mod:attr`` paths."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def load(path: str) -> Any:
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
