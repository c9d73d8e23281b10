"""statekit's settings from the environment, in one place: ``settings()``.

Precedence, for each: an explicit argument (an ``EnvSpec`` field, a command-line flag, a keyword of
the function that takes it) wins; else the environment variable; else the default.

| setting | variable | default | explicit |
| --- | --- | --- | --- |
| ``home`` | ``STATEKIT_HOME`` | ``~/.cache/statekit`` | ``EmbeddedPostgres(base_dir=...)`` |
| ``cache_bytes`` | ``STATEKIT_CACHE_BYTES`` | 2 GiB | ``EnvSpec(cache_bytes=...)``, ``--cache-bytes`` |
| ``pg_linger`` | ``STATEKIT_PG_LINGER`` | 300 s | (``statekit stop`` ends it now) |
| ``pg_bindir`` | ``STATEKIT_PG_BINDIR`` | system binaries, then the wheels' | |
| ``token`` | ``STATEKIT_TOKEN`` | none | ``statekit serve --token``, ``diff --token`` |

Read at each call (cheap), so a test or a process that sets a variable sees it at once. A module of
the bottom layer, so adapters find ``statekit_home()`` without importing the PostgreSQL machinery.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from statekit.errors import ConfigError

DEFAULT_CACHE_BYTES = 2 << 30
DEFAULT_LINGER = 300.0
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class Settings:
    """statekit's settings as the environment gives them (see the module docstring)."""

    home: Path
    """Where what outlives a process lives: golden worlds, the embedded cluster, the cache index."""
    cache_bytes: int
    """The world cache's byte budget, shared by every process of the user."""
    pg_linger: float
    """Seconds the embedded PostgreSQL outlives its last user."""
    pg_bindir: Path | None
    """PostgreSQL server binaries to use instead of searching for them."""
    token: str | None
    """The harness's bearer token (``statekit serve``, ``statekit diff --url``)."""


def parse_size(text: str) -> int:
    """``"4G"``, ``"512MiB"``, ``"1000000"``: bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not match:
        raise ConfigError(f"cannot read {text!r} as a size: write bytes, or a number with K, M, G or T")
    return int(float(match[1]) * _UNITS[match[2]])


def settings() -> Settings:
    """The settings now (the environment variables read at this call)."""
    env = os.environ
    size = env.get("STATEKIT_CACHE_BYTES", "").strip()
    bindir = env.get("STATEKIT_PG_BINDIR")
    return Settings(
        home=Path(env.get("STATEKIT_HOME", Path.home() / ".cache" / "statekit")),
        cache_bytes=parse_size(size) if size else DEFAULT_CACHE_BYTES,
        pg_linger=float(env.get("STATEKIT_PG_LINGER", DEFAULT_LINGER)),
        pg_bindir=Path(bindir) if bindir else None,
        token=env.get("STATEKIT_TOKEN"),
    )


def statekit_home() -> Path:
    """``$STATEKIT_HOME`` or ``~/.cache/statekit`` (not created here)."""
    return settings().home
