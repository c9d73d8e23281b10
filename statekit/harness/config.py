"""What one harness serves and within which limits: an ``EnvSpec`` (the environment every session
gets) plus the server's own limits. ``statekit serve``'s flags map onto it one to one."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from statekit.adapter import Adapter
from statekit.envspec import EnvSpec
from statekit.errors import ConfigError

MiB = 1 << 20


@dataclass(frozen=True)
class HarnessConfig:
    """The environment every session gets (``env``), and the server's limits.

    ``env`` is an ``EnvSpec`` whose adapter is a registered name, a ``"pkg.mod:attr"`` path or a class,
    never an instance: each session makes its own environment (a name or class given here is turned
    into ``EnvSpec(adapter)``). ``idle_timeout`` (seconds) closes sessions nobody used for that long; 0
    keeps them forever. ``workers`` > 0 runs the sessions' environments in that many worker processes
    (each session pinned to one); 0 runs them in the serving process, where they take turns on one core.
    """

    env: EnvSpec
    token: str | None = None
    max_sessions: int = 8
    idle_timeout: float = 600.0
    max_body_bytes: int = MiB
    workers: int = 0

    @classmethod
    def of(cls, env: EnvSpec | str | type[Adapter], **fields: Any) -> HarnessConfig:
        """A config from one flat set of keyword arguments: the harness's own fields, and the rest for
        the spec (``HarnessConfig.of("claims_app", db_url=..., max_sessions=2)``)."""
        own = {f.name for f in dataclasses.fields(cls)}
        spec = EnvSpec.of(env, **{k: v for k, v in fields.items() if k not in own})
        return cls(spec, **{k: v for k, v in fields.items() if k in own})

    def __post_init__(self) -> None:
        if not isinstance(self.env, EnvSpec):
            object.__setattr__(self, "env", EnvSpec(self.env))
        self.env.require_portable("the harness (one environment per session)")
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
        if self.token is not None and not self.token.strip():
            raise ConfigError("the token is empty: pass a real secret, or none to serve without auth")

    @property
    def adapter_name(self) -> str:
        return self.env.adapter_name
