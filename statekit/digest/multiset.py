"""An order-independent multiset hash: what makes a digest incremental (digest format 2).

A table's state is the multiset of its canonical rows. Each row maps to a 2,048-bit element (SHAKE-256
of its canonical bytes, domain-separated); a table hashes to the sum of its rows' elements modulo
2^2048, plus its row count. Adding a row adds its element, deleting it subtracts it, so a change
journal updates a table's hash in O(rows changed), and the result never depends on the order rows
are read in (no ORDER BY, no collation). A full recompute always gives the same value.

Why this construction: additive multiset hashing (Bellare and Micciancio's MSet-Add-Hash, the idea behind
LtHash) is as cheap per row as hashing itself (about 2.6 µs here, pure Python ints, no dependency).
Its known weakness is the generalised birthday attack, which costs about 2^(2·sqrt(n)) for an n-bit
modulus: 2^32 for 256 bits, but about 2^90 for the 2,048 bits used here, far beyond anything a
policy acting through an application's tools can do. Collisions by accident are 2^-2048.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

BITS = 2048
_MASK = (1 << BITS) - 1
_ROW_DOMAIN = b"statekit/row/v2\x00"
_TABLE_DOMAIN = b"statekit/table/v2\x00"


def element(encoded: bytes) -> int:
    """The group element of one canonical row (its UTF-8 canonical JSON)."""
    return int.from_bytes(hashlib.shake_256(_ROW_DOMAIN + encoded).digest(BITS // 8), "little")


class MultisetHash:
    """A mutable accumulator over rows: ``add``, ``remove``, then ``hexdigest``. Cheap to copy."""

    __slots__ = ("rows", "total")

    def __init__(self, rows: int = 0, total: int = 0) -> None:
        self.rows = rows
        self.total = total & _MASK

    def add(self, encoded: bytes) -> None:
        self.total = (self.total + element(encoded)) & _MASK
        self.rows += 1

    def remove(self, encoded: bytes) -> None:
        self.total = (self.total - element(encoded)) & _MASK
        self.rows -= 1

    def add_all(self, rows: Iterable[bytes]) -> None:
        """Add many rows (a full scan): one modular reduction for the whole batch."""
        count, total = 0, 0
        for encoded in rows:
            total += element(encoded)
            count += 1
        self.total = (self.total + total) & _MASK
        self.rows += count

    def copy(self) -> MultisetHash:
        return MultisetHash(self.rows, self.total)

    def hexdigest(self) -> str:
        """SHA-256 over the row count and the sum: a short name for the table's state."""
        body = _TABLE_DOMAIN + self.rows.to_bytes(8, "little", signed=True)
        return hashlib.sha256(body + self.total.to_bytes(BITS // 8, "little")).hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MultisetHash) and (self.rows, self.total) == (other.rows, other.total)

    def __repr__(self) -> str:
        return f"MultisetHash(rows={self.rows}, {self.hexdigest()[:12]})"
