"""Digests from canonical rows: SHA-256 per table and overall, with row counts and a format version."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from statekit.digest.canonical import canonical_json

DIGEST_FORMAT = 1


@dataclass(frozen=True)
class TableDigest:
    rows: int
    sha256: str


@dataclass(frozen=True)
class Digest:
    """A world's fingerprint. Equal digests mean equal digested state, table by table."""

    digest: str
    tables: dict[str, TableDigest]
    format: int = DIGEST_FORMAT

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "digest": self.digest,
            "tables": {name: {"rows": t.rows, "sha256": t.sha256} for name, t in sorted(self.tables.items())},
        }


def hash_rows(rows: Iterable[Mapping[str, Any]]) -> TableDigest:
    """Hash canonical rows in the order given (the caller orders them by key). Streams: O(1) memory."""
    h = hashlib.sha256()
    count = 0
    for row in rows:
        h.update(canonical_json(row).encode())
        h.update(b"\n")
        count += 1
    return TableDigest(rows=count, sha256=h.hexdigest())


def combine(tables: Mapping[str, TableDigest]) -> Digest:
    """The overall digest covers the format, every table's name, row count and hash."""
    body = {name: {"rows": t.rows, "sha256": t.sha256} for name, t in tables.items()}
    overall = hashlib.sha256(canonical_json({"format": DIGEST_FORMAT, "tables": body}).encode()).hexdigest()
    return Digest(digest=overall, tables=dict(sorted(tables.items())))
