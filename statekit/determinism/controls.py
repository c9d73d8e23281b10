"""The determinism controls of one episode (or one world build), applied together.

``Controls`` is a registry of ``Control``s by name (``base.py``: ``active``/``save``/``load``):
statekit's own (``CORE_CONTROLS``: the virtual clock, seeded ids and randomness, host identity, the
egress guard, the database-clock watch) then those the adapter's episode brings (``Episode.controls``,
their classes declared in ``Adapter.controls``). Every one is driven the same way: entered in that
order around each controlled call and left in reverse, saved and loaded by name with a fork, left
out by name when disabled. No control is special-cased here.

Controls patch process-wide names (the clock, the entropy sources, the host name), so only one set
can be active at a time in a process: ``active()`` holds a process-wide lock. Several environments
in one process therefore take turns; run them in separate processes to run them in parallel.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from statekit.contract import JSON
from statekit.determinism.base import Control, Violation
from statekit.determinism.clock import EPISODE_START, VirtualClock, epoch_for
from statekit.determinism.dbclock import DatabaseClock
from statekit.determinism.egress import EgressControl, EgressScope
from statekit.determinism.host import HostIdentity
from statekit.determinism.ids import HeldGenerators, SeededIds
from statekit.errors import ConfigError, StatekitError

if TYPE_CHECKING:
    from statekit.world import World

log = logging.getLogger(__name__)
_ACTIVE = threading.RLock()
_CURRENT: list[Controls] = []
"""The controls active now (innermost last), for ``statekit.kit.clock()``."""

CORE: tuple[type[Control], ...] = (VirtualClock, SeededIds, HostIdentity, EgressControl, DatabaseClock)
"""statekit's own controls, in the order they are entered."""
CORE_CONTROLS = tuple(control.name for control in CORE)


@dataclass(frozen=True)
class ControlsState:
    """What a snapshot must carry besides the world itself: each control's ``save()``, by name."""

    states: tuple[tuple[str, Any], ...]


def clock() -> VirtualClock:
    """The virtual clock of the build or step running now: a world builder advances it between the
    rows it writes (``statekit.kit.clock().advance(timedelta(minutes=5))``) so they are not all stamped
    with one instant. Only defined while statekit runs the application."""
    if not _CURRENT:
        raise StatekitError(
            "statekit.kit.clock() is only defined while statekit runs the application (a world build, an "
            "episode's start, a step, the verifier); outside those, time is the caller's own"
        )
    return _CURRENT[-1].clock


class Controls:
    """Every control for ``seed``; ``purpose`` keeps build and episode streams apart.

    ``disabled`` switches individual controls off. That exists to *prove* each control: a rollout
    without it must differ (``statekit.checks.check_controls``); never disable one in training.
    ``egress`` is the environment's part of the egress guard (None: not guarded); ``held``, the
    random generators its applications keep (re-seeded at each episode's start).
    """

    def __init__(
        self,
        seed: int,
        *,
        purpose: str = "episode",
        start_offset: timedelta = timedelta(0),
        disabled: frozenset[str] = frozenset(),
        egress: EgressScope | None = None,
        held: HeldGenerators | None = None,
    ) -> None:
        self.seed = seed
        self.purpose = purpose
        self.disabled = frozenset(disabled)
        self.clock = VirtualClock(epoch_for(seed) + start_offset, backwards=purpose in ("build", "schema"))
        self.ids = SeededIds(seed, purpose, held=held if "ids" not in self.disabled else None)
        self.egress = EgressControl(egress)
        self.db_clock = DatabaseClock(self.clock)
        self._members: dict[str, Control] = {}
        self._pending: dict[str, Any] = {}
        for control in (self.clock, self.ids, HostIdentity(), self.egress, self.db_clock):
            self._members[control.name] = control

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._members)

    def bind(self, world: World) -> None:
        """The world these controls run the application on: its database is an allowed destination,
        and its journal is watched for the database's own clock (unless the virtual clock is off)."""
        self.egress.bind(world)
        if "clock" not in self.disabled:  # Python's clock is real then: the database's is no different
            self.db_clock.bind(world)

    def adopt(self, controls: Sequence[Control], declared: Iterable[str]) -> None:
        """Add an episode's own controls (after statekit's); each must be one its adapter declared."""
        known = set(declared)
        for control in controls:
            if control.name not in known:
                raise ConfigError(
                    f"the episode brings a control named {control.name!r} that its adapter does not declare "
                    f"(Adapter.controls declares {sorted(known)}): add its class there"
                )
            if control.name in self._members:
                raise ConfigError(f"two determinism controls are named {control.name!r}")
            self._members[control.name] = control
            if control.name in self._pending:
                control.load(self._pending.pop(control.name))

    def _on(self, all_on: bool) -> list[Control]:
        return [c for name, c in self._members.items() if all_on or name not in self.disabled]

    @contextmanager
    def active(self, *, all_on: bool = False) -> Iterator[None]:
        """Apply the controls; ``all_on`` ignores ``disabled`` (episode set-up is never the subject).
        A build or an attach that a control saw go wrong (it tried to reach the network) fails here."""
        with _ACTIVE, ExitStack() as stack:
            _CURRENT.append(self)
            stack.callback(_CURRENT.pop)
            for control in self._on(all_on):
                stack.enter_context(control.active())
            yield
        if self.purpose == "build" and self.clock.now > epoch_for(self.seed) + EPISODE_START:
            raise ConfigError(
                f"building the world for seed {self.seed} left the virtual clock at "
                f"{self.clock.isoformat()}, after the episodes' start ({EPISODE_START} after the build's): "
                "what it stamped lies in their future. Write history backwards from the start: move the "
                "clock back first (statekit.kit.clock().advance(-timedelta(days=30))), then forward"
            )
        if self.purpose != "episode":
            found = self.violations()
            if found:
                doing = {"build": "building the world", "schema": "building the schema stage"}.get(
                    self.purpose
                ) or f"{self.purpose}ing the application"
                raise ConfigError(
                    f"{doing} for seed {self.seed}: "
                    + " | ".join(v.message for v in found)
                    + " (a world, and the application on it, must not depend on anything outside it)"
                )

    def violations(self) -> list[Violation]:
        """What the controls that are on saw go wrong since the last call."""
        return [v for control in self._on(False) for v in control.violations()]

    def report(self, observation: JSON) -> tuple[JSON, dict[str, JSON]]:
        """After a step: the observation (wrapped in an error naming the first violation the agent's
        call suffered, as a replay miss is) and what goes into ``info`` (every violation)."""
        found = self.violations()
        if not found:
            return observation, {}
        for violation in found:
            log.warning("determinism control %s: %s", violation.control, violation.message)
        visible = [v for v in found if v.visible]
        if visible:
            error: dict[str, JSON] = {"code": visible[0].code, "message": visible[0].message}
            error.update(visible[0].detail)
            if len(visible) > 1:
                error["also"] = [f"{v.code}: {v.message}" for v in visible[1:]]
            observation = {"error": error, "response": observation}
        return observation, {"determinism": [v.as_dict() for v in found]}

    def save(self) -> ControlsState:
        return ControlsState(tuple((name, c.save()) for name, c in self._members.items()))

    def load(self, state: ControlsState) -> None:
        """Continue from ``state``; states of controls an episode has yet to bring wait for ``adopt``."""
        for name, saved in state.states:
            if name in self._members:
                self._members[name].load(saved)
            else:
                self._pending[name] = saved
