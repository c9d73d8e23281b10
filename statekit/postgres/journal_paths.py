"""Paths on a world's change journal: closed ranges of entry numbers, cuts, and what lies between two cuts.

Pure values and arithmetic on them, without a connection (``journal.py`` moves worlds along them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Ranges = tuple[tuple[int, int], ...]
"""Closed, sorted, disjoint ranges of journal ``seq`` numbers."""
OPEN_END = 2**62
"""The last possible ``seq``: the current path ends at it until a cut closes it."""


@dataclass(frozen=True)
class Cut:
    """A point on a world's journal: the entries from the golden to it, and the snapshot it was read in
    (a transaction still open at a cut may commit entries numbered inside it later)."""

    generation: int
    path: Ranges
    snapshot: str = ""


def minus(a: Ranges, b: Ranges) -> Ranges:
    """``a`` without ``b``."""
    out: list[tuple[int, int]] = []
    for lo, hi in a:
        pieces = [(lo, hi)]
        for blo, bhi in b:
            next_pieces = []
            for plo, phi in pieces:
                if bhi < plo or blo > phi:
                    next_pieces.append((plo, phi))
                    continue
                if plo < blo:
                    next_pieces.append((plo, blo - 1))
                if bhi < phi:
                    next_pieces.append((bhi + 1, phi))
            pieces = next_pieces
        out.extend(pieces)
    return tuple(sorted(out))


def intersect(a: Ranges, b: Ranges) -> Ranges:
    out = [
        (max(alo, blo), min(ahi, bhi)) for alo, ahi in a for blo, bhi in b if max(alo, blo) <= min(ahi, bhi)
    ]
    return tuple(sorted(out))


def multirange(ranges: Sequence[tuple[int, int]]) -> str:
    """An ``int8multirange`` literal."""
    return "{" + ",".join(f"[{lo},{hi}]" for lo, hi in ranges) + "}"


@dataclass(frozen=True)
class Delta:
    """Entries between two cuts: ``fwd`` to apply as recorded, ``back`` to apply in reverse, and
    ``late``: entries inside the old cut's path that were invisible in its snapshot (count them now)."""

    fwd: Ranges
    back: Ranges
    late: Ranges
    old_snapshot: str


def delta(old: Cut, new: Cut) -> Delta | None:
    """How to get from ``old`` to ``new``; None when the journal was emptied in between."""
    if old.generation != new.generation and old.path:
        return None
    if old.generation != new.generation:
        return Delta(new.path, (), (), "")
    return Delta(
        fwd=minus(new.path, old.path),
        back=minus(old.path, new.path),
        late=intersect(old.path, new.path) if old.snapshot else (),
        old_snapshot=old.snapshot,
    )
