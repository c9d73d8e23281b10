"""Action parsing: JSON Schema as the spec says it (ECMA-262 patterns, integral floats), and text only."""

from __future__ import annotations

import pickle

import pytest

from statekit.contract import Tool
from statekit.errors import ActionError
from statekit.tools import MAX_ACTION_DEPTH, parse_action, transportable

TOOL = Tool(
    "pick",
    "a probe tool",
    {
        "type": "object",
        "properties": {
            "ref": {"type": "string", "pattern": "^R-[0-9]{3}$"},
            "n": {"type": "integer"},
            "tags": {
                "type": "array",
                "items": {"type": "object", "properties": {"weight": {"type": "integer"}}},
            },
            "any": {},
        },
        "additionalProperties": False,
    },
)


def _parse(**arguments: object) -> dict[str, object]:
    return parse_action({"tool": "pick", **arguments}, [TOOL])[1]


def test_a_pattern_dollar_does_not_accept_a_trailing_newline() -> None:
    assert _parse(ref="R-123") == {"ref": "R-123"}
    with pytest.raises(ActionError, match=r"ref: 'R-123\\n' does not match") as refused:
        _parse(ref="R-123\n")
    assert refused.value.code == "invalid_arguments"


def test_patterns_are_ecma_262_so_digits_are_ascii() -> None:
    with pytest.raises(ActionError, match="does not match"):
        _parse(ref="R-\u0661\u0662\u0663")  # Arabic-Indic digits: Python's \\d and [0-9]? only [0-9] here


def test_integral_floats_become_integers_and_others_are_refused() -> None:
    parsed = _parse(n=3.0, tags=[{"weight": 2.0}])
    assert parsed == {"n": 3, "tags": [{"weight": 2}]}
    assert type(parsed["n"]) is int and type(parsed["tags"][0]["weight"]) is int  # type: ignore[index]
    with pytest.raises(ActionError, match="not of type 'integer'"):
        _parse(n=3.5)


@pytest.mark.parametrize(
    "arguments",
    [{"ref": "\ud800"}, {"any": ["ok", {"k": "x\udfff"}]}, {"any": {"\udc00": 1}}],
    ids=["value", "nested", "key"],
)
def test_lone_surrogates_are_refused_naming_where(arguments: dict[str, object]) -> None:
    with pytest.raises(ActionError, match="lone surrogate") as refused:
        _parse(**arguments)
    assert refused.value.code == "invalid_arguments"
    refused.value.args[0].encode()  # the message itself is valid text


def test_deep_nesting_is_refused_before_validation() -> None:
    deep: object = "leaf"
    for _ in range(5_000):
        deep = [deep]
    with pytest.raises(ActionError, match=f"nested deeper than {MAX_ACTION_DEPTH}") as refused:
        _parse(any=deep)
    assert refused.value.code == "malformed_action"
    shallow: object = "leaf"
    for _ in range(MAX_ACTION_DEPTH - 2):
        shallow = [shallow]
    assert _parse(any=shallow) == {"any": shallow}


def test_error_messages_stay_short() -> None:
    with pytest.raises(ActionError) as refused:
        _parse(ref="R-" + "9" * 100_000)
    assert len(str(refused.value)) < 1_000


@pytest.mark.parametrize("outer", ["object", "array"])
def test_a_hostile_nesting_has_a_picklable_stand_in_refused_the_same_way(outer: str) -> None:
    """Harness workers receive actions pickled; 20,000 levels cannot be pickled, the stand-in can."""
    deep: object = []
    for _ in range(20_000):
        deep = [deep]
    action = {"tool": "t", "x": deep} if outer == "object" else deep
    with pytest.raises(ActionError) as original:
        parse_action(action, [])
    stand_in = pickle.loads(pickle.dumps(transportable(action)))
    with pytest.raises(ActionError) as refused:
        parse_action(stand_in, [])
    assert (refused.value.code, str(refused.value)) == (original.value.code, str(original.value))
    flat = {"tool": "t", "x": [[1]]}
    assert transportable(flat) is flat
