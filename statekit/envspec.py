"""What an environment is, as one frozen value: ``EnvSpec``.

Every entry point takes the same spec and makes the same environment from it: ``statekit.make``,
``statekit serve`` (``HarnessConfig.env``), the Ray actors (``statekit.ray``), Gymnasium
(``statekit.gym``), the command line (``statekit.cli.spec``) and the pytest plugin. Gymnasium's own
``EnvSpec`` is the model: one dataclass, printed where it is used, so a run's log says exactly what
was trained against.

An adapter given as a name, a ``"pkg.mod:attr"`` path or a class is *portable*: any process can make
its own environment from the spec (a harness makes one per session, Ray one per actor). An adapter
instance can be played in-process only, once: the environment made from it owns it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from statekit.errors import ConfigError
from statekit.seeds import WorldSet

if TYPE_CHECKING:
    from statekit.adapter import Adapter
    from statekit.env import Environment


@dataclass(frozen=True)
class EnvSpec:
    """The arguments of ``statekit.make``, as data (see the module docstring).

    ``adapter``: a registered name (``"claims_app"``), a ``"pkg.mod:attr"`` path, a class, or (for
    in-process use only) an instance. ``strategy``: one of the adapter's reset strategies (its first by
    default; ``"container"`` runs each episode in a container of the adapter's image). ``db_url``: the
    PostgreSQL server worlds live on (default: statekit's embedded one). ``prewarm`` > 0 keeps that many
    restored copies of recently used worlds ready. ``max_steps`` overrides each task's step cap.
    ``exclude_tasks`` leaves task kinds out of the pool (``statekit check`` lists the ones to leave out).
    ``disable_controls`` switches determinism controls off by name, only to prove they matter.
    ``cache_bytes`` bounds the world cache of goldens (default ``$STATEKIT_CACHE_BYTES`` or 2 GiB).
    ``num_worlds``/``start_seed``: seedless resets draw from seeds ``start_seed .. start_seed +
    num_worlds - 1`` only (``statekit.seeds``). ``services`` points the application at live outside
    services (``{name: URL}``) instead of replaying their recorded traffic, and ``record`` records that
    traffic into the adapter's cassettes (``statekit record``). ``adapter_options`` go to the
    adapter's constructor.
    """

    adapter: str | type[Adapter] | Adapter
    strategy: str | None = None
    db_url: str | None = field(default=None, repr=False)
    prewarm: int = 0
    max_steps: int | None = None
    exclude_tasks: tuple[str, ...] = ()
    disable_controls: tuple[str, ...] = ()
    cache_bytes: int | None = None
    num_worlds: int | None = None
    start_seed: int = 0
    services: Mapping[str, str] = field(default_factory=dict, hash=False)
    record: bool = False
    adapter_options: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        for name in ("exclude_tasks", "disable_controls"):
            value = getattr(self, name)
            if isinstance(value, str):  # "a,b" or one name: a common slip, not a sequence of letters
                value = tuple(part for part in value.split(",") if part)
            object.__setattr__(self, name, tuple(value))
        object.__setattr__(self, "adapter_options", dict(self.adapter_options))
        object.__setattr__(self, "services", dict(self.services))
        if self.record and not self.services:
            raise ConfigError("record=True needs services: the live services whose traffic to record")
        if self.prewarm < 0:
            raise ConfigError(f"prewarm must be >= 0, got {self.prewarm}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"max_steps must be at least 1, got {self.max_steps}")
        if self.cache_bytes is not None and self.cache_bytes < 0:
            raise ConfigError(f"cache_bytes must be >= 0, got {self.cache_bytes}")
        WorldSet(self.num_worlds, self.start_seed)  # a bad world set is refused now, not at the first reset

    @classmethod
    def of(cls, adapter: str | type[Adapter] | Adapter | EnvSpec, **fields: Any) -> EnvSpec:
        """A spec from ``statekit.make``'s arguments: keyword arguments that are not fields of the spec
        are the adapter's options. A spec given as ``adapter`` is returned with ``fields`` replaced."""
        names = {f.name for f in dataclasses.fields(cls)}
        own = {key: value for key, value in fields.items() if key in names}
        options = {key: value for key, value in fields.items() if key not in names}
        if isinstance(adapter, EnvSpec):
            if options:
                own["adapter_options"] = {**adapter.adapter_options, **options}
            return adapter.replace(**own)
        if options:
            own["adapter_options"] = {**own.get("adapter_options", {}), **options}
        return cls(adapter, **own)

    def replace(self, **changes: Any) -> EnvSpec:
        """This spec with ``changes`` (e.g. ``disable_controls=("clock",)`` for a removal check)."""
        return dataclasses.replace(self, **changes)

    @property
    def worlds(self) -> WorldSet:
        """The seeds a seedless reset draws from."""
        return WorldSet(self.num_worlds, self.start_seed)

    @property
    def portable(self) -> bool:
        """Whether another process (a harness session, a Ray actor) can make an environment from it."""
        return isinstance(self.adapter, str | type)

    def require_portable(self, user: str) -> None:
        """Refuse an adapter instance where ``user`` makes environments of its own from this spec."""
        if not self.portable:
            raise ConfigError(
                f"{user} makes its own environments, so the spec needs the adapter's name or class, not an "
                f"instance: pass {type(self.adapter).__name__} (or its registered name)"
            )

    @property
    def adapter_name(self) -> str:
        """How the spec names its adapter: the name or path given, or the class's ``module:Name``."""
        adapter = self.adapter
        if isinstance(adapter, str):
            return adapter
        cls = adapter if isinstance(adapter, type) else type(adapter)
        return f"{cls.__module__}:{cls.__qualname__}"

    def resolve_adapter(self) -> Adapter:
        """A new adapter instance for this spec (or the instance it holds)."""
        from statekit.adapter import resolve_adapter

        return resolve_adapter(self.adapter, **self.adapter_options)

    def make(self) -> Environment:
        """A ready environment (``statekit.make``): it owns its adapter and strategy."""
        from statekit.make import make_environment

        return make_environment(self)

    def as_dict(self) -> dict[str, Any]:
        """The spec as JSON, for logs, ``/health`` and reports (the database URL left out: it may hold a
        password; ``db_url`` says whether one was given)."""
        out: dict[str, Any] = {"adapter": self.adapter_name}
        for f in dataclasses.fields(self):
            if f.name in ("adapter", "db_url", "services"):
                continue
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        out["adapter_options"] = {key: _jsonable(v) for key, v in sorted(self.adapter_options.items())}
        out["db_url"] = "given" if self.db_url else "embedded"
        out["services"] = sorted(self.services)
        return out

    def describe(self) -> str:
        """One line: the adapter and every setting that is not its default."""
        defaults = EnvSpec(self.adapter)
        parts = []
        for f in dataclasses.fields(self):
            if f.name == "adapter":
                continue
            value = getattr(self, f.name)
            if value == getattr(defaults, f.name):
                continue
            shown = "given" if f.name == "db_url" else sorted(value) if f.name == "services" else value
            parts.append(f"{f.name}={shown!r}" if not isinstance(value, tuple) else f"{f.name}={list(value)}")
        return f"EnvSpec({self.adapter_name}{', ' if parts else ''}{', '.join(parts)})"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)
