"""Action parsing: an action is ``{"tool": NAME, ...arguments}`` checked against the tool's schema."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jsonschema

from statekit.contract import JSON, Tool
from statekit.errors import ActionError


def parse_action(action: object, tools: Sequence[Tool]) -> tuple[Tool, dict[str, JSON]]:
    """Split an action into its tool and arguments, or raise ActionError naming what is wrong."""
    if not isinstance(action, Mapping):
        raise ActionError("malformed_action", f"an action is a JSON object, got {type(action).__name__}")
    name = action.get("tool")
    if not isinstance(name, str):
        raise ActionError("malformed_action", 'an action needs a "tool" field naming one of the tools')
    by_name = {tool.name: tool for tool in tools}
    tool = by_name.get(name)
    if tool is None:
        known = ", ".join(sorted(by_name))
        raise ActionError("unknown_tool", f"unknown tool {name!r}; the tools are: {known}")
    arguments = {key: value for key, value in action.items() if key != "tool"}
    validator = jsonschema.Draft202012Validator(tool.input_schema)
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = ".".join(str(p) for p in first.absolute_path) or "(arguments)"
        raise ActionError("invalid_arguments", f"tool {name!r}: {where}: {first.message}")
    return tool, arguments
