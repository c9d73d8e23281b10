"""What an environment builder writes: an Adapter (per application) and its Episodes.

The adapter is the only code that knows both the application and statekit. It builds a world for a
seed, picks a task, turns tool calls into calls on the application, and scores the final state.
statekit supplies the rest: reset strategies, the world cache, determinism controls, digests.

``Adapter`` is the small core every adapter implements. What only some adapters offer (their state as
rows, hints for the checker, tool schemas for the harness, hooks for the assay, live services, a
container image) are separate capabilities in ``statekit.capabilities``, each a protocol with defaults
that an adapter inherits when it has that capability. ``AdapterWrapper`` layers behaviour over an
adapter (container mode is one) and passes the rest through.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from statekit.collateral import Expectation
from statekit.contract import JSON, Task, Tool, canonical_url
from statekit.determinism.base import Control
from statekit.digest.compute import Digest
from statekit.errors import ConfigError
from statekit.registry import lookup
from statekit.strategies.base import ResetStrategy
from statekit.world import World


@dataclass(frozen=True)
class Outcome:
    """What one tool call did: the observation, and whether the task is over (terminated)."""

    observation: JSON
    done: bool = False
    advance: timedelta | None = None
    """How far the virtual clock moves for this step (default: the adapter's ``tick_seconds``)."""


class Episode(ABC):
    """The application wired to one restored world, with one task. Lives until the next reset."""

    task: Task
    tools: list[Tool]
    controls: Sequence[Control] = ()
    """The episode's own determinism controls (their classes declared in ``Adapter.controls``),
    applied after statekit's around every step and the verifier, e.g. ``ReplayControl`` then
    ``DrainJobs``; a disabled one is left out."""

    @abstractmethod
    def observe(self) -> JSON:
        """The first observation: the task prompt and whatever the agent sees at the start."""

    @abstractmethod
    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        """Apply one validated tool call; errors the agent caused come back as observations."""

    @abstractmethod
    def score(self) -> float:
        """The verifier: a reward computed from the world's current state, never from the transcript."""

    def expected_changes(self) -> Expectation | None:
        """The changes the task expects (``statekit.collateral``); any other change the episode made
        zeroes the reward, or costs the declared penalty. None: the task declares nothing (no check).

        Called right after ``score`` when it is above 0 (a 0 cannot fall further), under the same
        controls; it may read the world (to find ids)."""
        return None

    def quiesce(self) -> None:  # noqa: B027 - optional hook
        """Release connections to the world (before it is cloned for a snapshot or dropped)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release everything the episode holds. Safe to call twice."""


@dataclass(frozen=True)
class EnvSettings:
    """What the environment an adapter serves asks of it, passed into ``attach`` and ``start_episode``
    (never set on the adapter): the task kinds its episodes may pose, the determinism controls
    switched off (only ever to prove that each one matters), and where outside services are."""

    task_pool: tuple[str, ...] = ()
    """The task kinds an episode may pose: the adapter's kinds less those the spec excludes. A task
    chosen without a ``task`` option must be one of these."""
    disabled_controls: frozenset[str] = field(default_factory=frozenset)
    services: Mapping[str, str] = field(default_factory=dict)
    """Live outside services by name (``EnvSpec.services``): empty while traffic is replayed."""
    recording: bool = False
    """The live services' traffic is recorded into the adapter's cassettes (``statekit record``)."""

    def task_kind(self, seed: int, options: Mapping[str, Any], kinds: Sequence[str]) -> str:
        """The kind an episode poses: the ``task`` option, else one of the pool (``kinds`` when the pool
        is empty) chosen by the seed, so a seed always poses the same kind."""
        pool = self.task_pool or tuple(kinds)
        return str(options.get("task") or pool[seed % len(pool)])

    def control_on(self, name: str) -> bool:
        """Whether the determinism control ``name`` runs (an adapter's own controls may need to know:
        with replay off the application is pointed at live services)."""
        return name not in self.disabled_controls

    def service_url(self, service: str) -> str:
        """The base URL to give the application for outside service ``service``: the live one when the
        environment has it (recording, or replay switched off), else its canonical URL, whose traffic
        is answered from recordings (``statekit.determinism.replay``)."""
        live = self.services.get(service)
        return live.rstrip("/") if live else canonical_url(service)


class Adapter(ABC):
    """One application's glue: the core every adapter implements. Subclasses set ``name`` and
    implement the abstract methods; capabilities (``statekit.capabilities``) add the rest.

    Keeping the application warm: a world may serve many episodes (the ``rewind`` strategy puts it
    back in place between them), so an adapter can build its application once per world in
    ``attach(world, settings)`` (engines, web app, clients) and receive it as ``app`` in every
    ``start_episode`` on that world; ``detach(app)`` releases it when statekit lets the world go.
    Connections are the exception: statekit ends every connection to a world when it rewinds it, so
    nothing of an episode's sessions survives into the next (an app must reconnect, e.g. with
    SQLAlchemy's ``pool_pre_ping``, and ``Episode.quiesce`` should release its pool).
    """

    name: str = "adapter"
    strategies: tuple[str, ...] = ("template",)
    tick_seconds: int = 60
    controls: tuple[type[Control], ...] = ()
    """Classes of the determinism controls this adapter's episodes bring (``Episode.controls``),
    besides statekit's own: their names are what ``disable_controls`` and the checks accept."""
    deterministic_start: bool = False
    """True when ``start_episode`` only reads the world (no writes, no other side effect), so the task
    a (golden, options) pair gave once can be handed back as ``task`` next time and a reset skips the
    task search. The controls' state after the start is replayed too, so nothing else changes."""
    out_of_process: str | None = None
    """Why this adapter's application runs where statekit cannot reach into it (container mode: its
    controls cannot be switched off from outside, its live schema not read, its digest only updated),
    or None: it runs in this process. The checker reports what it therefore cannot check."""

    @abstractmethod
    def fingerprint(self) -> dict[str, str]:
        """What makes worlds differ besides the seed: app version, fixture hash, builder version."""

    @abstractmethod
    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        """The reset strategy called ``name`` for this application's resources."""

    @abstractmethod
    def build_world(self, world: World, seed: int) -> None:
        """Fill an empty world for ``seed``. Runs under seeded controls, once per world-cache key."""

    @abstractmethod
    def start_episode(
        self,
        world: World,
        *,
        seed: int,
        options: dict[str, JSON],
        task: Task | None,
        app: Any,
        settings: EnvSettings,
    ) -> Episode:
        """Wire the application to ``world`` and pick the task (or use ``task``: a fork being restored,
        or the task this world's seed and options gave before) from ``settings.task_pool``. ``app`` is
        what ``attach`` returned (None without ``attach``)."""

    @abstractmethod
    def digest(self, world: World, since: Digest | None = None) -> Digest:
        """The canonical digest of ``world``. ``since`` is an earlier digest of the same world that this
        adapter computed (carrying its ``resume`` state): update it in O(changes) when you can, or
        ignore it; the result must equal a full recompute either way."""

    def task_kinds(self) -> list[str]:
        """Names of the task kinds this adapter can pose."""
        return []

    def reset_options(self) -> dict[str, dict[str, JSON]]:
        """The options ``reset`` takes, each with a JSON Schema for its value. statekit refuses any
        other option, and any value its schema refuses, before ``check_options`` and the same way for
        every adapter. Default: ``task``, one of the task kinds, when the adapter has any (a kind left
        out of the pool is refused by statekit, saying so)."""
        kinds = self.task_kinds()
        if not kinds:
            return {}
        return {"task": {"type": "string", "enum": kinds, "description": "the kind of task to pose"}}

    def check_options(self, options: dict[str, JSON]) -> None:  # noqa: B027 - optional hook
        """Refuse bad reset options (a ConfigError or ValueError saying what to pass) before any world
        is touched. ``reset`` asks first: where the next episode rewinds the live episode's own world,
        this is what lets a refused reset leave that episode as it was."""

    def attach(self, world: World, settings: EnvSettings) -> Any:
        """Build what can outlive an episode on ``world`` (the application, its engines). Optional."""
        return None

    def detach(self, app: Any) -> None:  # noqa: B027 - optional hook
        """Release what ``attach`` built (the world is going away or leaving this environment)."""

    def on_rewind(self, app: Any) -> None:  # noqa: B027 - optional hook
        """``app`` (what ``attach`` built) is about to serve another episode on its world, which statekit
        has put back since the last one (rewound to its golden or a bookmark; every connection to it
        ended). Reset what the process kept of the old state: caches (Django's ``ContentType`` and
        ``Site`` caches, ``mail.outbox``), pools (``engine.dispose()``, ``connections.close_all()``)."""

    def allowed_endpoints(self) -> list[str]:
        """Where the application may connect besides its world's own database while statekit's egress
        guard is on (``host:port`` or URLs): e.g. live services an adapter was pointed at."""
        return []

    def metadata(self) -> dict[str, JSON]:
        """What a trainer should log with every episode (versions, image digests); goes in reset's info."""
        return dict(self.fingerprint())

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release adapter-wide resources (servers started for it). Safe to call twice."""


class AdapterWrapper(Adapter):
    """An adapter layered over ``inner`` (Gymnasium's wrappers are the model): it changes what it
    overrides and passes everything else through, the core explicitly and every capability (any other
    attribute) by lookup on ``inner``. A wrapper that must *not* offer one of ``inner``'s capabilities
    overrides it (``statekit.capabilities`` says what each holds)."""

    def __init__(self, inner: Adapter) -> None:
        self.inner = inner
        self.name = inner.name
        self.strategies = inner.strategies
        self.tick_seconds = inner.tick_seconds
        self.controls = inner.controls
        self.deterministic_start = inner.deterministic_start
        self.out_of_process = inner.out_of_process

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (unpickling): never recurse
            raise AttributeError(name)
        return getattr(self.inner, name)

    def fingerprint(self) -> dict[str, str]:
        return self.inner.fingerprint()

    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        return self.inner.make_strategy(name, **options)

    def build_world(self, world: World, seed: int) -> None:
        self.inner.build_world(world, seed)

    def start_episode(
        self,
        world: World,
        *,
        seed: int,
        options: dict[str, JSON],
        task: Task | None,
        app: Any,
        settings: EnvSettings,
    ) -> Episode:
        return self.inner.start_episode(
            world, seed=seed, options=options, task=task, app=app, settings=settings
        )

    def digest(self, world: World, since: Digest | None = None) -> Digest:
        return self.inner.digest(world, since)

    def task_kinds(self) -> list[str]:
        return self.inner.task_kinds()

    def reset_options(self) -> dict[str, dict[str, JSON]]:
        return self.inner.reset_options()

    def check_options(self, options: dict[str, JSON]) -> None:
        self.inner.check_options(options)

    def attach(self, world: World, settings: EnvSettings) -> Any:
        return self.inner.attach(world, settings)

    def detach(self, app: Any) -> None:
        self.inner.detach(app)

    def on_rewind(self, app: Any) -> None:
        self.inner.on_rewind(app)

    def allowed_endpoints(self) -> list[str]:
        return self.inner.allowed_endpoints()

    def metadata(self) -> dict[str, JSON]:
        return self.inner.metadata()

    def close(self) -> None:
        self.inner.close()


def resolve_adapter(adapter: Adapter | type[Adapter] | str, **options: Any) -> Adapter:
    """Turn ``adapter`` (an instance, a class, a factory, a registered name or a ``"pkg.mod:attr"``
    path, found by ``statekit.registry``) into an Adapter instance, or raise ConfigError saying why."""
    if isinstance(adapter, Adapter):
        if options:
            raise ConfigError("options cannot be applied to an adapter instance; pass its class or name")
        return adapter
    target: Any = lookup(adapter) if isinstance(adapter, str) else adapter
    if isinstance(target, type) and issubclass(target, Adapter):
        missing = sorted(getattr(target, "__abstractmethods__", ()))
        if missing:
            raise ConfigError(
                f"adapter {target.__name__} does not implement {', '.join(missing)}: every adapter "
                "implements the core (docs/WRAPPING.md, section 3; SqlAdapter gives make_strategy and "
                "digest from a spec)"
            )
        return target(**options)
    if isinstance(target, Adapter):
        return target
    if callable(target):
        made = target(**options)
        if isinstance(made, Adapter):
            return made
    raise ConfigError(f"{adapter!r} is not a statekit Adapter (class, instance or factory)")
