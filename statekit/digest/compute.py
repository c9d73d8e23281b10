"""Digests from canonical rows: a multiset hash per table and SHA-256 overall, with row counts.

Format 2 (this one): a table is the *multiset* of its canonical rows (``statekit.digest.multiset``),
so its hash does not depend on row order and can be updated row by row from a change journal.
Format 1 hashed rows as a stream in key order; the two never compare equal (the format is hashed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from statekit.digest.canonical import canonical_json
from statekit.digest.multiset import MultisetHash

DIGEST_FORMAT = 2


def encode_row(row: Mapping[str, Any]) -> bytes:
    """The bytes a canonical row is hashed as."""
    return canonical_json(row).encode()


@dataclass(frozen=True)
class TableDigest:
    rows: int
    sha256: str
    acc: MultisetHash | None = field(default=None, compare=False, repr=False)
    """The accumulator behind ``sha256``, kept so the table can be updated incrementally."""

    @classmethod
    def of(cls, acc: MultisetHash) -> TableDigest:
        return cls(rows=acc.rows, sha256=acc.hexdigest(), acc=acc.copy())


@dataclass(frozen=True)
class Digest:
    """A world's fingerprint. Equal digests mean equal digested state, table by table."""

    digest: str
    tables: dict[str, TableDigest]
    format: int = DIGEST_FORMAT
    resume: Any = field(default=None, compare=False, repr=False)
    """Private to whoever computed it: what it needs to update this digest incrementally later
    (e.g. a journal position). ``Adapter.digest(world, since=digest)`` hands it back."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "digest": self.digest,
            "tables": {name: {"rows": t.rows, "sha256": t.sha256} for name, t in sorted(self.tables.items())},
        }


def hash_rows(rows: Iterable[Mapping[str, Any]]) -> TableDigest:
    """The multiset hash of canonical rows, in any order. Streams: O(1) memory."""
    acc = MultisetHash()
    acc.add_all(encode_row(row) for row in rows)
    return TableDigest.of(acc)


def merge(*digests: Digest) -> Digest:
    """One digest over several parts' tables (a database and its directories); their resume states
    are kept side by side, so each part can update its own tables later."""
    tables: dict[str, TableDigest] = {}
    resume: dict[str, Any] = {}
    for part in digests:
        tables.update(part.tables)
        if isinstance(part.resume, dict):
            resume.update(part.resume)
    return combine(tables, resume=resume)


def combine(tables: Mapping[str, TableDigest], *, resume: Any = None) -> Digest:
    """The overall digest covers the format, every table's name, row count and hash."""
    body = {name: {"rows": t.rows, "sha256": t.sha256} for name, t in tables.items()}
    overall = hashlib.sha256(canonical_json({"format": DIGEST_FORMAT, "tables": body}).encode()).hexdigest()
    return Digest(digest=overall, tables=dict(sorted(tables.items())), resume=resume)
