"""Background jobs drained inside ``step``: the world changes only while statekit runs the app.

An application's worker thread polls a queue on the wall clock; in an episode that would change the
world between steps, at moments no seed decides. ``DrainJobs`` runs what is due instead, in the
application's own order, at the end of every controlled call (so inside the step, under the other
controls, outbound replay included when it is entered before this one). With the control disabled
the adapter runs the application's own worker, which is how the removal check shows it matters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ClassVar

from statekit.determinism.base import Control


class DrainJobs(Control):
    """After each controlled call that returned normally, ``drain()`` runs the jobs that are due."""

    name: ClassVar[str] = "jobs"

    def __init__(self, drain: Callable[[], object]) -> None:
        self.drain = drain

    @contextmanager
    def active(self) -> Iterator[None]:
        yield
        self.drain()
