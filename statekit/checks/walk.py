"""A seeded random walk over an environment's tools, derived from their JSON Schemas alone.

Arguments are drawn from each property's schema: ``enum``/``const`` choices, booleans, integers in
their bounds, and strings. A string with a ``pattern`` is taken from what earlier observations showed
(any string value that matches it: the entities the read tools expose), so a walk reaches real
records instead of being rejected at the schema. No knowledge of any application is involved.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Iterable, Sequence
from typing import Any

from statekit.contract import JSON

Action = dict[str, JSON]


def harvest(observation: JSON, into: set[str]) -> None:
    """Every string leaf of an observation (values and keys), to fill pattern-constrained arguments."""
    if isinstance(observation, str):
        into.add(observation)
    elif isinstance(observation, dict):
        for key, value in observation.items():
            into.add(str(key))
            harvest(value, into)
    elif isinstance(observation, list):
        for value in observation:
            harvest(value, into)


def _string(schema: dict[str, Any], rng: random.Random, seen: Sequence[str]) -> str:
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        regex = re.compile(pattern)
        fits = [s for s in seen if regex.fullmatch(s)]
        if fits:
            return rng.choice(fits)
    low = int(schema.get("minLength", 1))
    high = max(low, min(int(schema.get("maxLength", 12)), 12))
    return (
        "".join(rng.choice(string.ascii_lowercase + " ") for _ in range(rng.randint(low, high))).strip()
        or "x"
    )


def value_for(schema: dict[str, Any], rng: random.Random, seen: Sequence[str]) -> JSON:
    """A value that satisfies ``schema`` where the walk can manage it (and a plausible one otherwise)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return rng.choice(list(schema["enum"]))
    kind = schema.get("type")
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "integer":
        low = int(schema.get("minimum", 0))
        high = int(schema.get("maximum", low + 50))
        return rng.randint(low, high)
    if kind == "number":
        return rng.randint(int(schema.get("minimum", 0)), int(schema.get("maximum", 50)))
    if kind == "array":
        items = schema.get("items", {})
        return [value_for(items, rng, seen) for _ in range(rng.randint(0, 2))]
    if kind == "object":
        return _arguments(schema, rng, seen)
    return _string(schema, rng, seen)


def _arguments(schema: dict[str, Any], rng: random.Random, seen: Sequence[str]) -> dict[str, JSON]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    return {
        name: value_for(prop, rng, seen)
        for name, prop in sorted(properties.items())
        if name in required or rng.random() < 0.5
    }


def random_action(
    tools: Iterable[dict[str, JSON]], rng: random.Random, seen: set[str], *, avoid: Sequence[str] = ()
) -> Action:
    """One action: a tool (not in ``avoid``) with arguments drawn from its schema and ``seen``."""
    usable = [t for t in tools if t["name"] not in avoid]
    tool = rng.choice(usable)
    schema = tool.get("input_schema") or {}
    assert isinstance(schema, dict)
    return {"tool": tool["name"], **_arguments(schema, rng, sorted(seen))}
