"""A world: one isolated copy of an application's state, as the reset strategies hand it out.

It sits at the bottom of the package (beside the contract, the errors and statekit's own entropy), so
every layer can name it without importing the strategies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class World:
    """One isolated copy of a resource, handed out by ``restore`` and given back to ``discard``.

    ``location`` is what the application is pointed at (a database URL, a directory); ``handle`` is
    an in-process object for strategies that have one (the in-memory store).
    """

    id: str
    location: str
    handle: Any = field(default=None, compare=False, repr=False)


__all__ = ["World"]
