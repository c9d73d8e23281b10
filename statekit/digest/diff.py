"""Diff two state dumps: per table, rows added, removed and changed (by key), with the columns.

Rows of an ordered table are matched by their key when the key is unique and hashed; otherwise (a set
table, ``ordered = false``, or a surrogate key the digest leaves out) by their whole content, as a
multiset, so such a diff has only additions and removals. The JSON form (``as_dict``) is
stable::

    {"equal": false,
     "tables": {"claims": {"added": [{"key": [...], "row": {...}}],
                           "removed": [{"key": [...], "row": {...}}],
                           "changed": [{"key": [...], "columns": {"status": ["triaged", "denied"]}}],
                           "only_in": null}}}

Only tables with a difference appear under ``tables``. Equal digests ⇔ ``equal`` is true.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from statekit.digest.canonical import canonical_json
from statekit.digest.dump import StateDump, TableDump


@dataclass
class TableDiff:
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    only_in: str | None = None
    """"a" or "b" when the table exists in one dump only (then all its rows are added or removed)."""

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.only_in)


@dataclass
class StateDiff:
    tables: dict[str, TableDiff]

    @property
    def equal(self) -> bool:
        return all(t.empty for t in self.tables.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "equal": self.equal,
            "tables": {
                name: {"added": t.added, "removed": t.removed, "changed": t.changed, "only_in": t.only_in}
                for name, t in sorted(self.tables.items())
                if not t.empty
            },
        }


def _by_key(table: TableDump) -> dict[str, dict[str, Any]]:
    return {canonical_json(r["key"]): r for r in table.rows}


def changed_columns(x: dict[str, Any], y: dict[str, Any]) -> dict[str, list[Any]]:
    """The columns in which two rows differ, each with its two values."""

    def differs(c: str) -> bool:  # compared as hashed: True and 1 are equal in Python, not in a digest
        return canonical_json(x.get(c)) != canonical_json(y.get(c)) or ((c in x) != (c in y))

    return {c: [x.get(c), y.get(c)] for c in sorted(x.keys() | y.keys()) if differs(c)}


def _diff_by_key(a: TableDump, b: TableDump) -> TableDiff:
    """Rows matched by a unique key that is part of their content."""
    left, right = _by_key(a), _by_key(b)
    out = TableDiff()
    out.removed = [left[k] for k in sorted(left.keys() - right.keys())]
    out.added = [right[k] for k in sorted(right.keys() - left.keys())]
    for key in sorted(left.keys() & right.keys()):
        columns = changed_columns(left[key]["row"], right[key]["row"])
        if columns:
            out.changed.append({"key": left[key]["key"], "columns": columns})
    return out


def _diff_multiset(a: TableDump, b: TableDump) -> TableDiff:
    """Rows whose identity is their content (a set table, or a key the digest does not hash): the
    multiset difference. A digest (format 2) hashes a table as the multiset of its rows, so this is
    exactly what it can see: equal multisets, equal digests, empty diff."""
    left = Counter(canonical_json(r["row"]) for r in a.rows)
    right = Counter(canonical_json(r["row"]) for r in b.rows)
    out = TableDiff()
    gone, new = left - right, right - left
    for row in a.rows:
        text = canonical_json(row["row"])
        if gone[text] > 0:
            gone[text] -= 1
            out.removed.append(row)
    for row in b.rows:
        text = canonical_json(row["row"])
        if new[text] > 0:
            new[text] -= 1
            out.added.append(row)
    return out


def _keyed(table: TableDump) -> bool:
    """Whether rows can be matched by key: an ordered table whose unique key is in the hashed row."""
    if not table.ordered:
        return False
    if table.rows and any(k not in table.rows[0]["row"] for k in table.key):
        return False
    return len(_by_key(table)) == len(table.rows)


def diff_dumps(a: StateDump, b: StateDump) -> StateDiff:
    """What changed from ``a`` to ``b``. A table present on one side only counts all its rows as
    added or removed."""
    tables: dict[str, TableDiff] = {}
    for name in sorted(a.tables.keys() | b.tables.keys()):
        left = a.tables.get(name) or TableDump(
            key=b.tables[name].key, ordered=b.tables[name].ordered, rows=[]
        )
        right = b.tables.get(name) or TableDump(key=left.key, ordered=left.ordered, rows=[])
        keyed = left.key == right.key and _keyed(left) and _keyed(right)
        tables[name] = _diff_by_key(left, right) if keyed else _diff_multiset(left, right)
        if name not in a.tables or name not in b.tables:
            tables[name].only_in = "b" if name not in a.tables else "a"
    return StateDiff(tables)
