"""The JSON Schemas of one environment: its actions, observations and state (``GET /schema``).

The action schema is a ``oneOf`` with one branch per tool: ``{"tool": {"const": NAME}}`` plus that
tool's own argument properties, so a single schema validates a whole action. Observations are what
the adapter declares, plus the error observation statekit itself returns for a bad action.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import TypeAdapter

from statekit.adapter import Adapter
from statekit.capabilities import ToolSchemas
from statekit.contract import JSON, State, Tool

DIALECT = "https://json-schema.org/draft/2020-12/schema"

ERROR_OBSERVATION: dict[str, JSON] = {
    "title": "error",
    "description": "a malformed action, an unknown tool or bad arguments (reward 0; the step still counts)",
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        }
    },
    "required": ["error"],
}


def action_schema(tools: Sequence[Tool]) -> dict[str, JSON]:
    """One ``oneOf`` branch per tool; without declared tools, any object naming a tool."""
    if not tools:
        return {
            "$schema": DIALECT,
            "title": "action",
            "description": "this adapter declares its tools per episode: see info.tools after POST /reset",
            "type": "object",
            "properties": {"tool": {"type": "string"}},
            "required": ["tool"],
        }
    branches = []
    for tool in tools:
        arguments = dict(tool.input_schema)
        properties = {"tool": {"const": tool.name}, **arguments.pop("properties", {})}
        required = ["tool", *arguments.pop("required", [])]
        arguments.pop("$schema", None)
        branches.append(
            {
                **arguments,
                "title": tool.name,
                "description": tool.description,
                "type": "object",
                "properties": properties,
                "required": required,
            }
        )
    return {"$schema": DIALECT, "title": "action", "oneOf": branches}


def observation_schema(adapter: Adapter) -> dict[str, JSON]:
    declared = (
        adapter.observation_schema()
        if isinstance(adapter, ToolSchemas)
        else {"description": f"an observation of {adapter.name}: any JSON value"}
    )
    return {"$schema": DIALECT, "title": "observation", "anyOf": [declared, ERROR_OBSERVATION]}


def state_schema() -> dict[str, JSON]:
    """Derived from the ``State`` dataclass, so a new field shows up here by itself."""
    schema: dict[str, JSON] = TypeAdapter(State).json_schema()
    return {"$schema": DIALECT, **schema, "title": "state"}


def environment_schemas(adapter: Adapter) -> dict[str, JSON]:
    return {
        "action": action_schema(adapter.declared_tools() if isinstance(adapter, ToolSchemas) else []),
        "observation": observation_schema(adapter),
        "state": state_schema(),
    }
