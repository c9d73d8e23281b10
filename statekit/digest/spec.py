"""The digest spec: an explicit allowlist of tables and columns, loaded from a versioned TOML file.

    format = 1
    schema = "public"

    [tables.claims]
    key = ["reference"]                       # row order and identity (may be an excluded surrogate id)
    ordered = true                            # false: rows are a set, ordered and matched by content
    include = ["reference", "status", "amount"]
    exclude = { created_at = "audit timestamp from the database clock" }
    canonical = { amount = "number" }          # optional: "number" makes 25 and 25.0 equal

    [ignored_tables]
    sessions = "login tokens: session rows change with every login"

    [ignored_sequences]
    ticket_numbers = "drawn only for display, never stored"

Every excluded column, ignored table and ignored sequence carries a reason, so a reader can audit
what the digest is blind to. Every sequence of the schema is digested (its position decides the next
id) unless an ignored table owns it or ``[ignored_sequences]`` names it. ``canonical`` names come from
the registry in ``statekit.digest.canonical``. ``statekit.digest.coverage`` checks the spec against a
live schema: columns, sequences, and that each table's ``key`` is unique there.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statekit.digest.canonical import CANONICALISERS
from statekit.errors import SpecError

SPEC_FORMAT = 1
DEFAULT_SCHEMA = "public"
"""The PostgreSQL schema a spec covers when it names none."""


@dataclass(frozen=True)
class TableSpec:
    name: str
    key: tuple[str, ...]
    include: tuple[str, ...]
    exclude: dict[str, str]
    canonical: dict[str, str]
    ordered: bool = True
    """False: rows are a set. They are ordered by their content, and diffs match rows by content."""

    @property
    def columns(self) -> tuple[str, ...]:
        """Included columns in a fixed (sorted) order."""
        return tuple(sorted(self.include))


@dataclass(frozen=True)
class DigestSpec:
    schema: str
    tables: dict[str, TableSpec]
    ignored_tables: dict[str, str]
    source: str = "<memory>"
    directories: dict[str, str] | None = None
    """Directory trees the digest also covers (``[directories] NAME = "what it holds"``): each becomes
    a table ``files:NAME`` of paths, types, sizes and content hashes."""
    ignored_sequences: dict[str, str] | None = None
    """Sequences left out of the digest, each with a reason (all others are digested)."""

    @classmethod
    def load(cls, path: str | Path) -> DigestSpec:
        """Read and validate a spec file; every problem is a SpecError naming the file and field."""
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError as exc:
            raise SpecError(f"digest spec not found: {path}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise SpecError(f"digest spec {path} is not valid TOML: {exc}") from exc
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "<memory>") -> DigestSpec:
        def fail(message: str) -> SpecError:
            return SpecError(f"{source}: {message}")

        if data.get("format") != SPEC_FORMAT:
            raise fail(f"`format` must be {SPEC_FORMAT}, got {data.get('format')!r}")
        schema = data.get("schema", DEFAULT_SCHEMA)
        raw_tables = data.get("tables")
        if not isinstance(raw_tables, dict) or not raw_tables:
            raise fail(
                "`[tables.NAME]` sections are required: draft them from the live schema with `statekit spec "
                "init ADAPTER --out FILE` (an adapter may leave `spec` unset until then) or `--url DATABASE`"
            )
        ignored = data.get("ignored_tables", {})
        if not isinstance(ignored, dict) or not all(
            isinstance(v, str) and v.strip() for v in ignored.values()
        ):
            raise fail("`[ignored_tables]` maps each table to a non-empty reason")
        tables = {}
        for name, raw in raw_tables.items():
            if not isinstance(raw, dict):
                raise fail(f"tables.{name} must be a table")
            unknown = set(raw) - {"key", "include", "exclude", "canonical", "ordered"}
            if unknown:
                raise fail(f"tables.{name}: unknown field(s) {sorted(unknown)}")
            include = raw.get("include")
            key = raw.get("key")
            exclude = raw.get("exclude", {})
            canonical = raw.get("canonical", {})
            if not isinstance(include, list) or not include or not all(isinstance(c, str) for c in include):
                raise fail(f"tables.{name}.include must be a non-empty list of column names")
            if not isinstance(key, list) or not key or not all(isinstance(c, str) for c in key):
                raise fail(f"tables.{name}.key must be a non-empty list of column names")
            if not isinstance(exclude, dict) or not all(
                isinstance(v, str) and v.strip() for v in exclude.values()
            ):
                raise fail(f"tables.{name}.exclude maps each column to a non-empty reason")
            both = set(include) & set(exclude)
            if both:
                raise fail(f"tables.{name}: column(s) {sorted(both)} are both included and excluded")
            if len(set(include)) != len(include):
                raise fail(f"tables.{name}.include lists a column twice")
            if not isinstance(canonical, dict):
                raise fail(f"tables.{name}.canonical must map columns to canonicalisers")
            for column, how in canonical.items():
                if how not in CANONICALISERS:
                    raise fail(
                        f"tables.{name}.canonical.{column}: unknown canonicaliser {how!r}; "
                        f"known: {sorted(CANONICALISERS)}"
                    )
                if column not in include:
                    raise fail(f"tables.{name}.canonical.{column}: column is not included")
            if name in ignored:
                raise fail(f"table {name!r} is both digested and ignored")
            ordered = raw.get("ordered", True)
            if not isinstance(ordered, bool):
                raise fail(f"tables.{name}.ordered must be true or false")
            tables[name] = TableSpec(
                name, tuple(key), tuple(include), dict(exclude), dict(canonical), ordered
            )
        directories = data.get("directories", {})
        if not isinstance(directories, dict) or not all(
            isinstance(v, str) and v.strip() for v in directories.values()
        ):
            raise fail("`[directories]` maps each directory name to a non-empty description")
        sequences = data.get("ignored_sequences", {})
        if not isinstance(sequences, dict) or not all(
            isinstance(v, str) and v.strip() for v in sequences.values()
        ):
            raise fail("`[ignored_sequences]` maps each sequence to a non-empty reason")
        unknown = set(data) - {
            "format",
            "schema",
            "tables",
            "ignored_tables",
            "directories",
            "ignored_sequences",
        }
        if unknown:
            raise fail(f"unknown section(s) {sorted(unknown)}")
        return cls(
            schema=schema,
            tables=tables,
            ignored_tables=dict(ignored),
            source=source,
            directories=dict(directories),
            ignored_sequences=dict(sequences),
        )
