"""A canonical state dump: the very rows a digest is computed from, plus a per-step digest trace.

JSON format (``format`` 2: the digest is the multiset hash of digest format 2)::

    {"format": 2, "digest": "<64 hex>", "meta": {...},
     "tables": {"claims": {"key": ["reference"], "ordered": true,
                           "rows": [{"key": ["CLM-000001"], "row": {"status": "paid", ...}}, ...]}},
     "trace": [{"step": 0, "digest": "<64 hex>"}, {"step": 1, "action": {...}, "reward": 0.0,
                "digest": "<64 hex>"}, ...]}

``digest`` is recomputed from ``tables`` on load, so a dump cannot claim a digest its rows disagree
with.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statekit.digest.compute import Digest, combine, hash_rows
from statekit.errors import SpecError

DUMP_FORMAT = 2


@dataclass
class TableDump:
    key: list[str]
    ordered: bool
    rows: list[dict[str, Any]]


@dataclass
class StateDump:
    tables: dict[str, TableDump]
    trace: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> Digest:
        return combine({name: hash_rows(r["row"] for r in t.rows) for name, t in self.tables.items()})

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": DUMP_FORMAT,
            "digest": self.digest().digest,
            "meta": self.meta,
            "tables": {
                name: {"key": t.key, "ordered": t.ordered, "rows": t.rows}
                for name, t in sorted(self.tables.items())
            },
            "trace": self.trace,
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.as_dict(), sort_keys=True, ensure_ascii=False) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> StateDump:
        """Read a dump file; a wrong format or a digest its rows disagree with is a SpecError."""
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError as exc:
            raise SpecError(f"dump not found: {path}") from exc
        except json.JSONDecodeError as exc:
            raise SpecError(f"{path} is not a statekit dump (invalid JSON: {exc})") from exc
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<dump>") -> StateDump:
        """Validate a dump's JSON form (a file, or a harness's ``GET /dump``)."""
        path = source
        if not isinstance(data, dict) or data.get("format") != DUMP_FORMAT:
            raise SpecError(f"{path}: not a statekit dump of format {DUMP_FORMAT}")
        tables = {
            name: TableDump(key=list(t["key"]), ordered=bool(t["ordered"]), rows=list(t["rows"]))
            for name, t in data["tables"].items()
        }
        dump = cls(tables=tables, trace=list(data.get("trace", [])), meta=dict(data.get("meta", {})))
        if dump.digest().digest != data.get("digest"):
            raise SpecError(f"{path}: its rows do not hash to the digest it records (edited by hand?)")
        return dump
