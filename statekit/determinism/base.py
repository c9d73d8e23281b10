"""The interface every determinism control implements: ``active``, ``save``, ``load``.

A control holds one source of nondeterminism still while statekit runs the application (a world
build, an episode's start, a step, the verifier). statekit's own controls (``controls.CORE``) and an
adapter's (``Adapter.controls`` names their classes, ``Episode.controls`` holds their instances) are
driven alike by ``Controls``: entered in order, left in reverse, saved and loaded by name with a
fork. ``statekit.make(..., disable_controls=(NAME,))`` leaves one out, only to prove it matters.

A control that watches for what it cannot prevent (a request no cassette recorded, a connection
the egress guard refused, a row the database's own clock stamped) reports it through the optional
``violations()``: statekit turns those into the step's error observation or ``info``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from statekit.contract import JSON


@dataclass(frozen=True)
class Violation:
    """Something a control saw go wrong during a controlled call (or between two).

    ``visible``: the application's own answer was affected (a call it made failed), so the agent's
    observation says why, the way a replay miss does; otherwise the violation goes to ``info`` only.
    ``detail`` is merged into the error observation (e.g. ``{"destinations": [...]}``).
    """

    control: str
    code: str
    message: str
    detail: dict[str, JSON] = field(default_factory=dict)
    visible: bool = True

    def as_dict(self) -> dict[str, JSON]:
        return {"control": self.control, "code": self.code, "message": self.message, **self.detail}


class Control(ABC):
    """One source of nondeterminism, held still while ``active()``.

    ``name`` is what ``disable_controls`` and ``statekit check``'s ``controls.NAME`` call it.
    ``needs_live_services``: with this control off the application talks to the real thing, so the
    removal check starts the adapter's ``LiveServices`` first (e.g. outbound replay).
    """

    name: ClassVar[str]
    needs_live_services: ClassVar[bool] = False

    @abstractmethod
    def active(self) -> AbstractContextManager[None]:
        """Apply the control for one controlled call; undo it afterwards, even on error."""

    def save(self) -> Any:
        """What a fork must carry to continue exactly (default: nothing)."""
        return None

    def load(self, state: Any) -> None:  # noqa: B027 - optional hook
        """Continue from what ``save`` returned."""

    def violations(self) -> list[Violation]:
        """What this control saw go wrong since the last call (default: it watches nothing)."""
        return []
