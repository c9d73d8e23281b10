"""What an environment builder writes: an Adapter (per application) and its Episodes.

The adapter is the only code that knows both the application and statekit. It builds a world for a
seed, picks a task, turns tool calls into calls on the application, and scores the final state.
statekit supplies the rest: reset strategies, the snapshot cache, determinism controls, digests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from statekit.collateral import Expectation
from statekit.contract import JSON, FixtureSource, Task, Tool
from statekit.determinism.base import Control
from statekit.digest.compute import Digest
from statekit.digest.dump import StateDump
from statekit.errors import ConfigError
from statekit.strategies.base import ResetStrategy, World


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


class Adapter(ABC):
    """One application's glue. Subclasses set ``name`` and implement the abstract methods.

    Keeping the application warm: a world may serve many episodes (the ``rewind`` strategy puts it
    back in place between them), so an adapter can build its application once per world in
    ``attach(world)`` (engines, web app, clients) and receive it as ``app`` in every
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

    @property
    def replay_control(self) -> str | None:
        """The control that replays outbound traffic, if any: switched off, it needs
        ``live_services``, and ``statekit assay`` then expects ``cassettes``."""
        return next((control.name for control in self.controls if control.needs_live_services), None)

    disabled_controls: frozenset[str] = frozenset()
    """Set by the Environment; only the control-removal checks ever disable one."""
    deterministic_start: bool = False
    """True when ``start_episode`` only reads the world (no writes, no other side effect), so the task
    a (golden, options) pair gave once can be handed back as ``task`` next time and a reset skips the
    task search. The controls' state after the start is replayed too, so nothing else changes."""

    @abstractmethod
    def fingerprint(self) -> dict[str, str]:
        """What makes worlds differ besides the seed: app version, fixture hash, builder version."""

    @abstractmethod
    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        """The reset strategy called ``name`` for this application's resources."""

    @abstractmethod
    def build_world(self, world: World, seed: int) -> None:
        """Fill an empty world for ``seed``. Runs under seeded controls, once per snapshot-cache key."""

    @abstractmethod
    def start_episode(
        self, world: World, *, seed: int, options: dict[str, JSON], task: Task | None, app: Any = None
    ) -> Episode:
        """Wire the application to ``world`` and pick the task (or use ``task``: a fork being restored,
        or the task this world's seed and options gave before). ``app`` is what ``attach`` returned; it is
        passed only when ``attach`` returned something, so adapters without ``attach`` may omit it."""

    def reset_options(self) -> dict[str, dict[str, JSON]]:
        """The options ``reset`` takes, each with a JSON Schema for its value. statekit refuses any
        other option, and any value its schema refuses, before ``check_options`` and the same way for
        every adapter. Default: ``task``, one of the task kinds, when the adapter has any (a kind left
        out of the pool is the adapter's to refuse, saying so)."""
        kinds = self.task_kinds()
        if not kinds:
            return {}
        return {"task": {"type": "string", "enum": kinds, "description": "the kind of task to pose"}}

    def check_options(self, options: dict[str, JSON]) -> None:  # noqa: B027 - optional hook
        """Refuse bad reset options (a ConfigError or ValueError saying what to pass) before any world
        is touched. ``reset`` asks first: where the next episode rewinds the live episode's own world,
        this is what lets a refused reset leave that episode as it was."""

    def attach(self, world: World) -> Any:
        """Build what can outlive an episode on ``world`` (the application, its engines). Optional."""
        return None

    def detach(self, app: Any) -> None:  # noqa: B027 - optional hook
        """Release what ``attach`` built (the world is going away or leaving this environment)."""

    @abstractmethod
    def digest(self, world: World, since: Digest | None = None) -> Digest:
        """The canonical digest of ``world``. ``since`` is an earlier digest of the same world that this
        adapter computed (carrying its ``resume`` state): update it in O(changes) when you can, or
        ignore it; the result must equal a full recompute either way."""

    def dump(self, world: World) -> StateDump:
        """The rows ``digest`` is computed from (``statekit dump``/``diff`` use it)."""
        raise ConfigError(f"adapter {self.name!r} cannot dump its state")

    def dump_changes(self, world: World, golden: Digest, now: Digest) -> tuple[StateDump, StateDump] | None:
        """The rows ``world`` changed since its golden (whose digest is ``golden``; ``now`` is the
        world's current one), as two partial dumps (the golden's side, the world's side) holding only
        rows that differ: what ``Environment.changes`` diffs in O(changes). None (the default): it
        diffs full dumps instead (see ``statekit.collateral.journal_changes`` for a database world)."""
        return None

    def live_schema(self, world: World) -> dict[str, dict[str, str]]:
        """``{table: {column: type}}`` of ``world`` (``statekit drift`` compares two builds with it)."""
        return {}

    def metadata(self) -> dict[str, JSON]:
        """What a trainer should log with every episode (versions, image digests); goes in reset's info."""
        return dict(self.fingerprint())

    def task_kinds(self) -> list[str]:
        """Names of the task kinds this adapter can pose."""
        return []

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        """A known-good action script for ``task``: the checker proves it scores 1."""
        return []

    def check_schema(self, world: World) -> list[str]:
        """Problems with the digest spec's coverage of ``world`` (``table.column`` names)."""
        return []

    def declared_tools(self) -> list[Tool]:
        """The tools every episode offers, known without building a world (the harness's ``/schema``).

        Empty means "only an episode knows"; the harness then describes actions generically.
        """
        return []

    def observation_schema(self) -> dict[str, JSON]:
        """A JSON Schema for what ``reset`` and ``step`` observe (the harness's ``/schema``).

        The default promises only JSON; statekit's own error observations are added by the harness.
        """
        return {"description": f"an observation of {self.name}: any JSON value"}

    probe_tasks: dict[str, str] = {}
    """Per control, a task kind whose reference script exercises it (the control checks replay it)."""

    excluded_tasks: frozenset[str] = frozenset()
    """Set by ``statekit.make(exclude_tasks=...)``: task kinds the pool leaves out (``statekit check``
    lists the ones whose reference fails or that a probe wins in ``excluded_tasks``). The adapter's
    own task choice honours it (``task_pool``) and refuses a request for an excluded kind."""

    def task_pool(self) -> list[str]:
        """The task kinds an episode may pose: ``task_kinds()`` less the excluded ones."""
        return [kind for kind in self.task_kinds() if kind not in self.excluded_tasks]

    exploit_floors: dict[str, float] = {}
    """Per task kind, the most a degenerate policy may earn (``statekit.testing.probes``); default 0.
    A kind with partial credit for, say, reading the right record may declare that much."""

    def live_services(self) -> AbstractContextManager[dict[str, Any]]:
        """For adapters that replay outbound traffic: start the real services and yield the adapter
        options that point the application at them (recording and the outbound-control check)."""
        raise ConfigError(f"adapter {self.name!r} talks to no outside services")

    def allowed_endpoints(self) -> list[str]:
        """Where the application may connect besides its world's own database while statekit's egress
        guard is on (``host:port`` or URLs): e.g. live services an adapter was pointed at."""
        return []

    def fixture_sources(self) -> list[FixtureSource]:
        """Where seeded data comes from (``statekit assay`` judges it). Empty means undeclared."""
        return []

    def cassettes(self) -> list[Path]:
        """The recorded-traffic files episodes replay (``statekit assay`` checks their provenance)."""
        return []

    def cassette(self, seed: int) -> Path | None:
        """The cassette the episodes of ``seed`` replay (``statekit record`` replaces it). None: none."""
        return None

    def container_image(self, client: Any) -> str:
        """The id of an image that serves this adapter (``statekit.container_mode.serve_command``), for
        container mode (``strategy="container"``, which must be in ``strategies``). ``client`` is a
        Docker SDK client; build the image if it is missing and return its id, never a tag."""
        raise ConfigError(
            f"adapter {self.name!r} has no container image: implement Adapter.container_image(client)"
        )

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release adapter-wide resources (servers started for it). Safe to call twice."""
