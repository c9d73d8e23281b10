"""Action parsing: an action is ``{"tool": NAME, ...arguments}`` checked against the tool's schema.

JSON Schema is applied as its specification says, not as Python's ``re`` and ``json`` happen to
behave, because an argument that passes the schema is handed to the application as it is:

- ``pattern`` is an ECMA-262 regular expression (matched with ``regress``): ``$`` is the end of the
  text, where Python's ``re.search`` also accepts a final newline (``"CLM-000149\\n"``), and ``\\d`` is
  ASCII only;
- an ``integer`` may be written ``3.0``; the tool receives ``3``;
- strings must be Unicode text: JSON can spell a lone surrogate (``"\\ud800"``), which no encoder can
  write, so it is refused before it reaches a URL or a database;
- an action nested deeper than ``MAX_ACTION_DEPTH`` is refused before validation walks it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import jsonschema
import regress
from jsonschema.exceptions import ValidationError

from statekit.contract import JSON, Tool
from statekit.errors import ActionError, ConfigError

MAX_ACTION_DEPTH = 64
"""Tool arguments are flat or nearly so; deeper nesting is a bug or an attack."""
MAX_MESSAGE_CHARS = 500
"""Error observations quote the offending value; a long one is cut."""


def parse_action(action: object, tools: Sequence[Tool]) -> tuple[Tool, dict[str, JSON]]:
    """Split an action into its tool and arguments, or raise ActionError naming what is wrong."""
    if not isinstance(action, Mapping):
        raise ActionError("malformed_action", f"an action is a JSON object, got {type(action).__name__}")
    if _depth_exceeds(action, MAX_ACTION_DEPTH):
        raise ActionError(
            "malformed_action",
            f"the action is nested deeper than {MAX_ACTION_DEPTH} levels; tools take flat arguments",
        )
    name = action.get("tool")
    if not isinstance(name, str):
        raise ActionError("malformed_action", 'an action needs a "tool" field naming one of the tools')
    by_name = {tool.name: tool for tool in tools}
    tool = by_name.get(name)
    if tool is None:
        known = ", ".join(sorted(by_name))
        raise ActionError("unknown_tool", _short(f"unknown tool {name!r}; the tools are: {known}"))
    arguments = {key: value for key, value in action.items() if key != "tool"}
    where = _lone_surrogate(arguments)
    if where is not None:
        raise ActionError(
            "invalid_arguments",
            f"tool {name!r}: {where}: contains a lone surrogate (e.g. \\ud800); "
            "arguments must be Unicode text",
        )
    errors = sorted(_Validator(tool.input_schema).iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        place = ".".join(str(p) for p in first.absolute_path) or "(arguments)"
        raise ActionError("invalid_arguments", _short(f"tool {name!r}: {place}: {first.message}"))
    integral = _integers(arguments, tool.input_schema)
    assert isinstance(integral, dict)
    return tool, integral


@functools.lru_cache(maxsize=512)
def _ecma(pattern: str) -> regress.Regex:
    try:
        return regress.Regex(pattern)
    except regress.RegressError as exc:
        raise ConfigError(f"a tool's schema has pattern {pattern!r}, not an ECMA-262 regex: {exc}") from exc


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and _ecma(pattern).find(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _ecma(pattern).find(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"pattern": _pattern, "patternProperties": _pattern_properties}
)


def check_reset_options(options: Mapping[str, Any], schemas: Mapping[str, Any], adapter: str) -> None:
    """Refuse a reset option the adapter does not take, or a value that fails its JSON Schema, with a
    ConfigError naming what it takes: the same rule for every adapter (``Adapter.reset_options``)."""
    unknown = sorted(set(options) - set(schemas))
    if unknown:
        takes = f"it takes {sorted(schemas)}" if schemas else "it takes none"
        raise ConfigError(_short(f"adapter {adapter!r} takes no reset option(s) {unknown}; {takes}"))
    for name, value in options.items():
        error = next(iter(_Validator(schemas[name]).iter_errors(value)), None)
        if error is None:
            continue
        allowed = schemas[name].get("enum")
        if name == "task" and allowed is not None and error.validator == "enum":
            raise ConfigError(_short(f"unknown task kind {value!r}; kinds are {sorted(allowed)}"))
        raise ConfigError(_short(f"reset option {name!r}: {error.message}"))


def transportable(action: object) -> object:
    """``action``, or, when it is nested deeper than ``MAX_ACTION_DEPTH``, a stand-in just past the
    limit that ``parse_action`` refuses with the same error. A hostile nesting cannot be pickled (the
    harness sends actions to its worker processes), so the refusal must not depend on sending it."""
    if not _depth_exceeds(action, MAX_ACTION_DEPTH):
        return action
    inner: list[object] = []
    for _ in range(MAX_ACTION_DEPTH):
        inner = [inner]
    return {"tool": inner} if isinstance(action, Mapping) else inner


def _depth_exceeds(value: object, limit: int) -> bool:
    """Iterative, so a hostile nesting depth cannot exhaust the interpreter's stack."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _lone_surrogate(value: object, where: str = "(arguments)") -> str | None:
    """Where the first string (or key) holding a lone surrogate is, or None."""
    stack: list[tuple[object, str]] = [(value, where)]
    while stack:
        item, place = stack.pop()
        if isinstance(item, str):
            if not _is_text(item):
                return place
        elif isinstance(item, Mapping):
            for key, child in item.items():
                path = str(key) if place == "(arguments)" else f"{place}.{key}"
                if isinstance(key, str) and not _is_text(key):
                    return f"{place} (a key)"
                stack.append((child, path))
        elif isinstance(item, list):
            stack.extend((child, f"{place}.{i}") for i, child in enumerate(item))
    return None


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _says_integer(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "integer" or (isinstance(kind, list) and "integer" in kind and "number" not in kind)


def _integers(value: Any, schema: Any) -> Any:
    """``3.0`` where the schema says integer becomes ``3`` (through properties and items; not $ref/anyOf)."""
    if not isinstance(schema, Mapping):
        return value
    if isinstance(value, float) and value.is_integer() and _says_integer(schema):
        return int(value)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties", {})
        return {key: _integers(child, properties.get(key, extra)) for key, child in value.items()}
    if isinstance(value, list):
        return [_integers(child, schema.get("items", {})) for child in value]
    return value


def _short(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return f"{message[:MAX_MESSAGE_CHARS]}… ({len(message)} characters)"
