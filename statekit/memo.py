"""A dict that keeps its most recently written entries (``Memo``): what statekit remembers per
golden, per world or per statement must not grow with every seed or world a long run draws."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Memo(OrderedDict[K, V]):
    """A dict that keeps its ``size`` most recently written entries: per-golden facts an environment
    remembers (the golden's digest) must not grow with every seed a long run of seedless resets draws,
    nor per-world facts (a table's oid, its timestamp columns) with every world a server makes."""

    def __init__(self, size: int = 4096) -> None:
        super().__init__()
        self.size = size

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)
