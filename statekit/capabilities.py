"""What only some adapters offer, each a protocol with defaults beside the core ``Adapter``.

An adapter has a capability by inheriting its protocol (and so its defaults) or by defining every
member itself; statekit asks ``has(adapter, Capability)`` (or ``capability(...)``) instead of the
adapter's class. A wrapper (``AdapterWrapper``) has the capabilities of what it wraps unless it
overrides them.

- ``StateDumps`` (``dump``, ``dump_changes``, ``live_schema``, ``check_schema``): ``statekit dump``,
  ``diff`` and ``drift``, collateral checks, the coverage check;
- ``DatabaseWorld`` (``conninfo``): ``statekit spec init``;
- ``SchemaStage`` (``build_schema``): what every seed's world shares, built once and cloned;
- ``CheckHints`` (``reference_actions``, ``probe_tasks``, ``exploit_floors``): the checker;
- ``ToolSchemas`` (``declared_tools``, ``observation_schema``): the harness's ``/schema``;
- ``AssayHooks`` (``fixture_sources``, ``cassettes``, ``cassette``): ``statekit assay`` and ``record``;
- ``LiveServices`` (``live_services``): ``statekit record``, the replay control's removal check;
- ``ContainerImage`` (``container_image``): container mode (``strategy="container"``).
"""

from __future__ import annotations

from abc import abstractmethod
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from statekit.contract import JSON, FixtureSource, Task, Tool
from statekit.errors import ConfigError

if TYPE_CHECKING:
    from statekit.adapter import Adapter
    from statekit.digest.compute import Digest
    from statekit.digest.dump import StateDump
    from statekit.world import World

C = TypeVar("C")


@runtime_checkable
class StateDumps(Protocol):
    """A world as canonical rows: what its digest is computed from."""

    @abstractmethod
    def dump(self, world: World) -> StateDump:
        """The rows ``digest`` is computed from (``statekit dump``/``diff`` use it)."""

    def dump_changes(self, world: World, golden: Digest, now: Digest) -> tuple[StateDump, StateDump] | None:
        """The rows ``world`` changed since its golden (whose digest is ``golden``; ``now`` is the
        world's current one), as two partial dumps (the golden's side, the world's side) holding only
        rows that differ: what ``Environment.changes`` diffs in O(changes). None (the default): it
        diffs full dumps instead (see ``statekit.collateral.journal_changes`` for a database world)."""
        return None

    def live_schema(self, world: World) -> dict[str, dict[str, str]]:
        """``{table: {column: type}}`` of ``world`` (``statekit drift`` compares two builds with it)."""
        return {}

    def check_schema(self, world: World) -> list[str]:
        """Problems with the digest spec's coverage of ``world`` (``table.column`` names). Not
        overriding it means nothing compares the digest with the live state: the coverage check then
        reports "not checked", never passed."""
        return []


@runtime_checkable
class DatabaseWorld(Protocol):
    """A world whose state is (mostly) one PostgreSQL database: ``statekit spec init`` reads its schema."""

    @abstractmethod
    def conninfo(self, world: World) -> str:
        """The world database's libpq connection string (for psycopg)."""


@runtime_checkable
class SchemaStage(Protocol):
    """What every seed's world shares, built once: migrations, ``create_all``, reference data."""

    @abstractmethod
    def build_schema(self, world: World) -> None:
        """Fill an empty world with what is the same for every seed. statekit builds it once per
        fingerprint into a golden of its own, and each seed's world starts as a copy of it:
        ``build_world(world, seed)`` then only adds the seed's data (as the application's role when
        the adapter has one, ``SqlAdapter.app_role``: rows, not schema). Worth it when this part costs
        more than a clone (migrations, not a few ``create_all`` tables)."""


@runtime_checkable
class CheckHints(Protocol):
    """What the checker needs to judge an adapter's tasks."""

    probe_tasks: dict[str, str] = {}
    """Per control, a task kind whose reference script exercises it (the control checks replay it)."""
    unprobed: dict[str, str] = {}
    """Per control no task kind exercises, why not (what the application does instead): the control
    check reports it as the reason the control is not checked."""
    exploit_floors: dict[str, float] = {}
    """Per task kind, the most a degenerate policy may earn (``statekit.checks.probes``); default 0.
    A kind with partial credit for, say, reading the right record may declare that much."""

    @abstractmethod
    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        """A known-good action script for ``task``: the checker proves it scores 1."""


@runtime_checkable
class ToolSchemas(Protocol):
    """The environment described without building a world (the harness's ``/schema``)."""

    def declared_tools(self) -> list[Tool]:
        """The tools every episode offers. Empty means "only an episode knows"; the harness then
        describes actions generically."""
        return []

    def observation_schema(self) -> dict[str, JSON]:
        """A JSON Schema for what ``reset`` and ``step`` observe. The default promises only JSON;
        statekit's own error observations are added by the harness."""
        return {"description": "an observation: any JSON value"}


@runtime_checkable
class AssayHooks(Protocol):
    """What ``statekit assay`` judges: where seeded data and recorded traffic come from."""

    def fixture_sources(self) -> list[FixtureSource]:
        """Where seeded data comes from. Empty means undeclared."""
        return []

    def cassettes(self) -> list[Path]:
        """The recorded-traffic files episodes replay (their provenance is checked)."""
        return []

    def cassette(self, seed: int) -> Path | None:
        """The cassette the episodes of ``seed`` replay (``statekit record`` replaces it). None: none."""
        return None

    def shipped_images(self, strategy: str) -> list[str]:
        """Container images (ids) the application runs in under ``strategy`` beyond the strategy's own
        (a sandbox image, say): what ships is their content. Asked after ``make_strategy(strategy)``."""
        return []


@runtime_checkable
class LiveServices(Protocol):
    """Real services the application's outbound calls can be pointed at (recording, and proving the
    replay control by switching it off)."""

    @abstractmethod
    def live_services(self) -> AbstractContextManager[dict[str, Any]]:
        """Start the real services and yield the adapter options that point the application at them."""


@runtime_checkable
class ContainerImage(Protocol):
    """An image that serves this adapter, so container mode can run any of its episodes."""

    @abstractmethod
    def container_image(self, client: Any) -> str:
        """The id of an image that serves this adapter (``statekit.container_mode.serve_command``).
        ``client`` is a Docker SDK client; build the image if it is missing and return its id, never a
        tag."""


def has(adapter: object, kind: type) -> bool:
    """Whether ``adapter`` has the capability ``kind`` (one of this module's protocols)."""
    return isinstance(adapter, kind)


def capability(adapter: object, kind: type[C], *, why: str = "") -> C:
    """``adapter`` as capability ``kind``, or a ConfigError naming the capability it lacks (and ``why``
    it was asked for)."""
    if isinstance(adapter, kind):
        return adapter
    name = getattr(adapter, "name", type(adapter).__name__)
    members = ", ".join(sorted(m for m in vars(kind) if not m.startswith("_")))
    raise ConfigError(
        f"adapter {name!r} has no {kind.__name__} capability{f' ({why})' if why else ''}: inherit "
        f"statekit.kit.{kind.__name__} and implement {members}"
    )


def replay_control(adapter: Adapter) -> str | None:
    """The adapter's control that replays outbound traffic, if any: switched off, it needs
    ``LiveServices``, and ``statekit assay`` then expects cassettes."""
    return next((control.name for control in adapter.controls if control.needs_live_services), None)


def reference_actions(adapter: object, task: Task) -> list[dict[str, JSON]]:
    """The adapter's reference script for ``task``; empty when it gives the checker no hints."""
    return adapter.reference_actions(task) if isinstance(adapter, CheckHints) else []


def probe_tasks(adapter: object) -> dict[str, str]:
    return dict(adapter.probe_tasks) if isinstance(adapter, CheckHints) else {}


def unprobed_reasons(adapter: object) -> dict[str, str]:
    return dict(adapter.unprobed) if isinstance(adapter, CheckHints) else {}


def exploit_floors(adapter: object) -> dict[str, float]:
    return dict(adapter.exploit_floors) if isinstance(adapter, CheckHints) else {}


__all__ = [
    "AssayHooks",
    "CheckHints",
    "ContainerImage",
    "DatabaseWorld",
    "LiveServices",
    "StateDumps",
    "ToolSchemas",
    "capability",
    "exploit_floors",
    "has",
    "probe_tasks",
    "reference_actions",
    "replay_control",
    "unprobed_reasons",
]
