"""Collateral damage: every change an episode made to its world, and which of them the task expected.

A verifier that checks only the row it cares about rewards an agent that changes every row in sight
(deny every claim, pay every claim: the target is among them). So a task declares the changes it
expects (an ``Expectation`` of ``Allow`` rules: a table, optionally a row key, the columns that may
differ, a predicate over the row) and statekit holds every other change against the reward: any
stray change scores 0, or, where the task declares a ``penalty``, costs that much each.

The changes come from statekit's own machinery: the canonical rows of the world's dump (the digest's
allowlist, so a change the digest cannot see is never held against anyone) diffed against the dump of
the seed's golden world. ``Environment.changes()`` is the one door to them; how it computes them (two
dumps here, a change journal later) is its business. ::

    Expectation((
        Allow.changed("claims", key=["CLM-000115"]),
        Allow.added("audit_log", where=lambda row: row["entity_id"] == claim_id),
    ))

Rows are canonical (decimals and UUIDs as strings, timestamps as ISO-8601 UTC), as in a dump, so a
predicate compares against canonical values.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from statekit.digest.canonical import canonical_json
from statekit.digest.compute import Digest
from statekit.digest.diff import diff_dumps
from statekit.digest.dump import StateDump, TableDump
from statekit.digest.postgres import postgres_changes, sequences_table
from statekit.digest.spec import DigestSpec
from statekit.postgres.journal import Journal

Row = Mapping[str, Any]
KINDS = frozenset({"added", "removed", "changed"})


@dataclass(frozen=True)
class Change:
    """One row that differs from the golden world: added, removed, or changed in some columns."""

    table: str
    kind: str
    key: tuple[Any, ...]
    before: Row | None
    after: Row | None

    @property
    def row(self) -> Row:
        """The row as it is now (as it was, for a removal)."""
        row = self.after if self.after is not None else self.before
        assert row is not None
        return row

    @property
    def columns(self) -> frozenset[str]:
        """The columns that differ (every column of an added or removed row)."""
        if self.before is None or self.after is None:
            return frozenset(self.row)
        keys = self.before.keys() | self.after.keys()
        return frozenset(c for c in keys if c not in self.before or c not in self.after or self._differs(c))

    def _differs(self, column: str) -> bool:
        assert self.before is not None and self.after is not None
        return canonical_json(self.before[column]) != canonical_json(self.after[column])

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"table": self.table, "kind": self.kind, "key": list(self.key)}
        if self.kind == "changed":
            assert self.before is not None and self.after is not None
            out["columns"] = {c: [self.before.get(c), self.after.get(c)] for c in sorted(self.columns)}
        else:
            out["row"] = dict(self.row)
        return out

    def __str__(self) -> str:
        what = f"columns {sorted(self.columns)}" if self.kind == "changed" else canonical_json(self.row)
        return f"{self.table} {canonical_json(list(self.key))} {self.kind}: {what[:160]}"


@dataclass(frozen=True)
class ChangeSet:
    """Every row of the digested state that differs between a golden world and the world now."""

    changes: tuple[Change, ...] = ()

    @classmethod
    def between(cls, golden: StateDump, now: StateDump) -> ChangeSet:
        """The changes from ``golden`` to ``now``, from statekit's dump diff (rows matched by key where
        the key is unique, by sequence otherwise)."""
        changes: list[Change] = []
        differ = [
            name
            for name in golden.tables.keys() | now.tables.keys()
            if _table(golden, name) != _table(now, name)
        ]
        narrow = StateDump({n: t for n, t in golden.tables.items() if n in differ})
        for name, table in diff_dumps(
            narrow, StateDump({n: now.tables[n] for n in differ if n in now.tables})
        ).tables.items():
            after = _rows_by_key(now.tables.get(name))
            changes += [Change(name, "removed", tuple(r["key"]), r["row"], None) for r in table.removed]
            changes += [Change(name, "added", tuple(r["key"]), None, r["row"]) for r in table.added]
            for entry in table.changed:
                row = after[canonical_json(entry["key"])]
                before = {**row, **{c: pair[0] for c, pair in entry["columns"].items()}}
                changes.append(Change(name, "changed", tuple(entry["key"]), before, row))
        return cls(tuple(changes))

    def __iter__(self) -> Iterator[Change]:
        return iter(self.changes)

    def __len__(self) -> int:
        return len(self.changes)

    def in_table(self, table: str) -> list[Change]:
        return [c for c in self.changes if c.table == table]


def _table(dump: StateDump, name: str) -> tuple[list[str], bool, list[dict[str, Any]]] | None:
    """A table's identity and rows, for a quick equality test before the (costlier) diff: most tables
    of an episode's world are untouched. Rows are canonical values of one schema, so Python equality
    agrees with canonical equality."""
    table = dump.tables.get(name)
    return None if table is None else (table.key, table.ordered, table.rows)


def _rows_by_key(table: TableDump | None) -> dict[str, Row]:
    return {canonical_json(r["key"]): r["row"] for r in (table.rows if table else [])}


@dataclass(frozen=True)
class Allow:
    """One kind of change a task expects: in ``table``, of the given ``kinds``, optionally only the row
    with ``key``, only these ``columns`` (for changed rows), only rows ``where`` holds (over the row as
    it is now; as it was, for a removal). Build with ``Allow.added``/``changed``/``removed``/``any``."""

    table: str
    kinds: frozenset[str] = KINDS
    key: tuple[Any, ...] | None = None
    columns: frozenset[str] | None = None
    where: Callable[[Row], bool] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - KINDS
        if unknown:
            raise ValueError(
                f"Allow({self.table!r}): unknown change kinds {sorted(unknown)}; use {sorted(KINDS)}"
            )

    @classmethod
    def added(cls, table: str, *, where: Callable[[Row], bool] | None = None) -> Allow:
        return cls(table, frozenset({"added"}), where=where)

    @classmethod
    def removed(
        cls, table: str, *, key: Sequence[Any] | None = None, where: Callable[[Row], bool] | None = None
    ) -> Allow:
        return cls(table, frozenset({"removed"}), _key(key), where=where)

    @classmethod
    def changed(
        cls,
        table: str,
        *,
        key: Sequence[Any] | None = None,
        columns: Sequence[str] | None = None,
        where: Callable[[Row], bool] | None = None,
    ) -> Allow:
        return cls(table, frozenset({"changed"}), _key(key), frozenset(columns) if columns else None, where)

    @classmethod
    def any(cls, table: str, *, where: Callable[[Row], bool] | None = None) -> Allow:
        """Any change to the table (rows the ``where`` predicate accepts)."""
        return cls(table, KINDS, where=where)

    def matches(self, change: Change) -> bool:
        if change.table != self.table or change.kind not in self.kinds:
            return False
        if self.key is not None and canonical_json(list(change.key)) != canonical_json(list(self.key)):
            return False
        if self.columns is not None and change.kind == "changed" and not change.columns <= self.columns:
            return False
        return self.where is None or bool(self.where(change.row))


def _key(key: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return tuple(key) if key is not None else None


@dataclass(frozen=True)
class Verdict:
    """The verifier's score, the reward after the collateral rule, and the changes held against it."""

    score: float
    reward: float
    stray: tuple[Change, ...]
    penalty: float | None

    def as_dict(self, limit: int = 10) -> dict[str, Any]:
        """JSON for ``info["verdict"]``: the first ``limit`` stray changes and how many there were."""
        return {
            "score": self.score,
            "reward": self.reward,
            "penalty": self.penalty,
            "stray_count": len(self.stray),
            "stray": [c.as_dict() for c in self.stray[:limit]],
        }


@dataclass(frozen=True)
class Expectation:
    """The changes a task expects. Every other change is stray: with ``penalty`` None any stray change
    makes the reward 0; with a ``penalty`` each one costs that much (the reward never goes below 0).
    A task that declares a penalty is giving partial credit, so its prompt should say so."""

    allowed: tuple[Allow, ...]
    penalty: float | None = None

    def __post_init__(self) -> None:
        if self.penalty is not None and not self.penalty > 0:
            raise ValueError(
                f"Expectation.penalty must be positive (or None for all-or-nothing), got {self.penalty}"
            )

    def stray(self, changes: ChangeSet) -> list[Change]:
        """The changes no ``Allow`` rule accepts."""
        return [c for c in changes if not any(rule.matches(c) for rule in self.allowed)]

    def judge(self, score: float, changes: ChangeSet) -> Verdict:
        stray = self.stray(changes)
        if not stray:
            reward = score
        elif self.penalty is None:
            reward = 0.0
        else:
            reward = max(0.0, score - self.penalty * len(stray))
        return Verdict(score=score, reward=reward, stray=tuple(stray), penalty=self.penalty)


class GoldenDumps:
    """The dumps of recently used golden worlds, by world key (least recently used dropped first).

    A golden never changes under its key, so its dump is computed once; ``capacity`` bounds memory
    for trainers that cycle through many seeds (a claims world's dump is a few MB of Python objects).
    """

    def __init__(self, capacity: int = 8) -> None:
        if capacity < 1:
            raise ValueError("GoldenDumps needs a capacity of at least 1")
        self.capacity = capacity
        self._dumps: OrderedDict[str, StateDump] = OrderedDict()

    def get(self, key: str, load: Callable[[], StateDump]) -> StateDump:
        if key in self._dumps:
            self._dumps.move_to_end(key)
            return self._dumps[key]
        dump = load()
        self._dumps[key] = dump
        while len(self._dumps) > self.capacity:
            self._dumps.popitem(last=False)
        return dump


__all__ = ["Allow", "Change", "ChangeSet", "Expectation", "GoldenDumps", "Verdict"]


def journal_changes(
    database: Journal | str, spec: DigestSpec, golden: Digest, now: Digest
) -> tuple[StateDump, StateDump] | None:
    """``Adapter.dump_changes`` for a world of one PostgreSQL database (read from its journal) plus
    tables that are not the database's (directories): those must be unchanged, by their digests,
    or None sends the caller to full dumps."""
    if not isinstance(database, Journal):
        return None
    own = {*spec.tables, sequences_table(spec)}
    for name in golden.tables.keys() | now.tables.keys():
        if name not in own and golden.tables.get(name) != now.tables.get(name):
            return None
    return postgres_changes(database, spec, golden)
