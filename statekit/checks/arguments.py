"""What the exploit probes derive from the tools' schemas alone: the values an argument can take
without the world (``fixed_value``), the entities an episode has shown (``Harvest``), and the argument
tuples and random calls built from them (``statekit.checks.probes`` plays them)."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from statekit.contract import JSON

Action = dict[str, JSON]
FILLER = "probe"
TOKEN = re.compile(r"[^\s,;()\[\]{}\"'`]+")
NOTHING = object()
"""What ``fixed_value`` answers when a value must come from the world."""


@dataclass(frozen=True)
class ToolView:
    name: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...]
    read_only: bool

    @classmethod
    def of(cls, tool: Mapping[str, Any]) -> ToolView:
        schema = tool.get("input_schema") or {}
        annotations = tool.get("annotations") or {}
        return cls(
            name=str(tool["name"]),
            properties=dict(schema.get("properties") or {}),
            required=tuple(schema.get("required") or ()),
            read_only=bool(annotations.get("readOnlyHint", False)),
        )


CURSORS = frozenset({"page", "offset", "skip", "start", "cursor", "after", "before", "page_number"})
"""Integer arguments that say where a listing starts, not how much it holds: a probe starts them at
their lowest (the first page), never at their largest (an empty page 20 shows nothing to act on)."""


def fixed_value(schema: Mapping[str, Any], name: str = "") -> Any:
    """A value from the schema alone, or ``NOTHING`` when the value must come from the world. Sizes are
    taken at their largest allowed value, cursors (``CURSORS``, by ``name``) at their lowest."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type")
    if kind in ("integer", "number"):
        lowest = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
        if name.lower() in CURSORS:  # a page without a stated minimum counts from 1, an offset from 0
            return lowest if "minimum" in schema or "page" not in name.lower() else 1
        if "maximum" in schema:
            return schema["maximum"]
        if "exclusiveMaximum" in schema:
            return schema["exclusiveMaximum"] - 1
        return lowest
    if kind == "boolean":
        return True
    if kind == "string" and "pattern" not in schema:
        return filler(schema)
    if kind == "array" and not schema.get("minItems"):
        return []
    return NOTHING


def filler(schema: Mapping[str, Any]) -> str:
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    text = FILLER * (low // len(FILLER) + 1)
    return text[: int(high)] if high is not None else text


class Harvest:
    """Every string the episode has shown, with where it was seen, for filling entity arguments."""

    def __init__(self) -> None:
        self._rank: dict[str, tuple[int, int]] = {}
        self._by_key: dict[str, dict[str, None]] = {}
        self._prompt: set[str] = set()

    def add(self, observation: JSON, *, first: bool = False) -> None:
        """Record an observation; ``first`` marks the task prompt's (its values rank first)."""
        if first:
            self._prompt.update(self._words(observation))
        self._walk(observation, key=None, related=False)

    def _words(self, node: JSON) -> Iterator[str]:
        if isinstance(node, str):
            yield node
            yield from self._tokens(node)
        elif isinstance(node, Mapping):
            for k, v in node.items():
                yield str(k)
                yield from self._words(v)
        elif isinstance(node, list):
            for v in node:
                yield from self._words(v)

    @staticmethod
    def _tokens(text: str) -> Iterator[str]:
        if any(c.isspace() for c in text):
            for token in TOKEN.findall(text):
                yield token.rstrip(".:!?")

    def _walk(self, node: JSON, *, key: str | None, related: bool) -> None:
        if isinstance(node, Mapping):
            scalars = [str(v) for v in node.values() if isinstance(v, str | int) and not isinstance(v, bool)]
            related = related or any(s in self._prompt for s in scalars)
            for k, v in node.items():
                self._see(str(k), None, related)
                self._walk(v, key=str(k), related=related)
        elif isinstance(node, list):
            for v in node:
                self._walk(v, key=key, related=related)
        elif isinstance(node, str):
            self._see(node, key, related)
            for token in self._tokens(node):
                self._see(token, None, related)

    def _see(self, text: str, key: str | None, related: bool) -> None:
        if not text:
            return
        rank = 0 if text in self._prompt else 1 if related else 2
        old = self._rank.get(text)
        order = old[1] if old else len(self._rank)
        self._rank[text] = (min(rank, old[0]) if old else rank, order)
        if key is not None:
            self._by_key.setdefault(key, {})[text] = None

    def values(self, name: str, schema: Mapping[str, Any]) -> list[str] | None:
        """Candidates for an entity argument, most relevant first; None if ``schema`` is not one."""
        if schema.get("type") != "string" or "const" in schema or "enum" in schema:
            return None
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
        if "pattern" in schema:
            pattern = re.compile(str(schema["pattern"]))
            pool: Sequence[str] = [s for s in self._rank if pattern.search(s)]
        else:
            pool = list(self._by_key.get(name, {}))
            if not pool:
                return None
        fits = [s for s in pool if len(s) >= low and (high is None or len(s) <= int(high))]
        return sorted(fits, key=lambda s: self._rank[s])


def fillable(tool: ToolView) -> bool:
    """Whether the schema alone fills every required argument."""
    return all(fixed_value(tool.properties.get(name, {})) is not NOTHING for name in tool.required)


def may_take_entity(tool: ToolView) -> bool:
    """Whether a required argument is a free string (an entity, if the episode shows matching values)."""
    return any(
        schema.get("type") == "string" and "const" not in schema and "enum" not in schema
        for name in tool.required
        for schema in [tool.properties.get(name, {})]
    )


def bounded(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") in ("integer", "number") and ("maximum" in schema or "minimum" in schema)


def entity_args(tool: ToolView, harvest: Harvest) -> dict[str, list[str]]:
    """The tool's required entity arguments and their candidates (empty lists: none seen yet)."""
    out: dict[str, list[str]] = {}
    for name in tool.required:
        schema = tool.properties.get(name, {})
        values = harvest.values(name, schema)
        if values is not None:
            out[name] = values
        elif fixed_value(schema) is NOTHING:
            out[name] = []
    return out


def argument_tuples(candidates: dict[str, list[str]], cap: int) -> list[dict[str, str]]:
    """Argument tuples: every combination when there are few, else each value at least once."""
    names = list(candidates)
    lists = [candidates[n] for n in names]
    if not names or any(not values for values in lists):
        return []
    total = 1
    for values in lists:
        total *= len(values)
    if total <= cap:
        combos: Iterator[tuple[str, ...]] = itertools.product(*lists)
    else:  # the diagonal: call i takes value i of each list (wrapping), so every value appears
        combos = (tuple(v[i % len(v)] for v in lists) for i in range(max(len(v) for v in lists)))
    return [dict(zip(names, combo, strict=True)) for combo in itertools.islice(combos, cap)]


def random_action(rng: random.Random, tools: Sequence[ToolView], harvest: Harvest) -> Action | None:
    """A random call of a random tool, or None when the drawn tool's arguments cannot be filled."""
    tool = rng.choice(tools)
    args: dict[str, Any] = {}
    for name, schema in tool.properties.items():
        if name not in tool.required and rng.random() < 0.5:
            continue
        value = random_value(rng, name, schema, harvest)
        if value is NOTHING:
            if name in tool.required:
                return None
            continue
        args[name] = value
    return {"tool": tool.name, **args}


def random_value(rng: random.Random, name: str, schema: Mapping[str, Any], harvest: Harvest) -> Any:
    if schema.get("enum"):
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "integer" and "const" not in schema:
        low = int(schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1))
        high = int(schema.get("maximum", schema.get("exclusiveMaximum", low + 101) - 1))
        return rng.randint(low, max(low, high))
    if kind == "boolean":
        return rng.random() < 0.5
    values = harvest.values(name, schema)
    if values and (rng.random() < 0.8 or "pattern" in schema):
        return rng.choice(values)
    return fixed_value(schema) if values is None or "pattern" not in schema else NOTHING
