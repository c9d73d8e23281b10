"""What one harness serves and within which limits; ``statekit serve``'s flags map onto it one to one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from statekit.adapter import Adapter
from statekit.errors import ConfigError
from statekit.seeds import WorldSet

MiB = 1 << 20


@dataclass(frozen=True)
class HarnessConfig:
    """The environment every session gets, and the server's limits.

    ``adapter`` is a registered name, a ``"pkg.mod:attr"`` path or an Adapter class, never an
    instance: each session makes its own environment, and an adapter instance cannot be shared.
    ``idle_timeout`` (seconds) closes sessions nobody used for that long; 0 keeps them forever.
    ``cache_bytes`` bounds the snapshot cache that every session (and process) on this server shares;
    ``num_worlds``/``start_seed`` bound the seeds a seedless reset draws from (``statekit.make``).
    ``workers`` > 0 runs the sessions' environments in that many worker processes (each session
    pinned to one); 0 runs them in the serving process, where they take turns on one core.
    """

    adapter: str | type[Adapter]
    strategy: str | None = None
    db_url: str | None = None
    token: str | None = None
    max_sessions: int = 8
    idle_timeout: float = 600.0
    max_body_bytes: int = MiB
    cache_bytes: int | None = None
    num_worlds: int | None = None
    start_seed: int = 0
    workers: int = 0
    adapter_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.adapter, Adapter):
            raise ConfigError(
                "the harness makes one environment per session, so it needs the adapter's name or class, "
                f"not an instance: pass {type(self.adapter).__name__} (or its registered name)"
            )
        if self.max_sessions < 1:
            raise ConfigError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if self.idle_timeout < 0:
            raise ConfigError(
                f"idle_timeout must be >= 0 seconds (0 disables the reaper), got {self.idle_timeout}"
            )
        if self.workers < 0:
            raise ConfigError(
                f"workers must be >= 0 (0 runs sessions in the serving process), got {self.workers}"
            )
        if self.max_body_bytes < 1024:
            raise ConfigError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")
        WorldSet(self.num_worlds, self.start_seed)  # refuses a bad world set at start, not per session
        if self.cache_bytes is not None and self.cache_bytes < 0:
            raise ConfigError(f"cache_bytes must be >= 0, got {self.cache_bytes}")
        if self.token is not None and not self.token.strip():
            raise ConfigError("the token is empty: pass a real secret, or none to serve without auth")

    @property
    def adapter_name(self) -> str:
        return self.adapter if isinstance(self.adapter, str) else self.adapter.__name__
