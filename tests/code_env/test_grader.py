"""The wire format and the verdict: exact types, no trust in what the sandbox sends."""

from __future__ import annotations

import math
from typing import Any

import pytest

from adapters.code_env.grader import grade, matches
from adapters.code_env.sandbox.base import RunResult, parse_records
from adapters.code_env.sandbox.runner import decode, encode
from adapters.code_env.tasks import load_tasks


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -7,
        10**40,
        2.5,
        math.inf,
        "",
        "héllo\n",
        b"\x00\xff",
        [1, [2]],
        (1, "a"),
        {"a": 1, 2: (3,)},
        {3, 1, 2},
        frozenset({"x"}),
    ],
)
def test_supported_values_round_trip(value: Any) -> None:
    assert decode(encode(value)) == value
    assert type(decode(encode(value))) is type(value)


def test_types_are_exact() -> None:
    assert not matches(encode(2.0), encode(2))
    assert not matches(encode(True), encode(1))
    assert not matches(encode((1, 2)), encode([1, 2]))
    assert not matches(encode({"a": 1.0}), encode({"a": 1}))
    assert matches(encode({3, 1, 2}), encode({1, 2, 3}))
    assert matches(encode(0.1 + 0.2), encode(0.3), approx=True)
    assert not matches(encode(0.1 + 0.2), encode(0.3))


def test_an_object_that_equals_everything_equals_nothing() -> None:
    class Liar:
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    class SneakyInt(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    for liar in (Liar(), SneakyInt(3), [Liar()]):
        assert not matches(encode(liar), encode(3))
    assert encode(Liar())[0] == "unsupported"


@pytest.mark.parametrize(
    "observed", [None, [], ["int"], "2", ["int", 2], ["list", "x"], ["dict", [[1]]], ["float", "nan?"]]
)
def test_malformed_answers_never_match(observed: Any) -> None:
    assert not matches(observed, encode(2))
    assert not matches(observed, encode([1]))


def _run(records: list[dict[str, Any]], *, timed_out: bool = False) -> RunResult:
    return RunResult(None if timed_out else 0, None, timed_out, "", "", False, records, 1.0)


def test_grade_counts_cases_and_treats_duplicates_as_tampering() -> None:
    median = load_tasks()["median"]
    good = [
        {"case": i, "step": 0, "value": case.steps[0].expect}
        if case.steps[0].expect is not None
        else {"case": i, "step": 0, "raised": ["ValueError", "Exception"]}
        for i, case in enumerate(median.cases)
    ]
    assert grade(median, _run(good)).passed == len(median.cases)
    assert grade(median, _run(good)).reward("fraction") == 1.0
    tampered = [*good, {"case": 0, "step": 0, "value": ["int", "99"]}]
    verdict = grade(median, _run(tampered))
    assert verdict.passed == len(median.cases) - 1
    assert "tampering" in verdict.failures[0]
    assert verdict.reward("all") == 0.0
    assert grade(median, _run([{"import_error": ["SyntaxError"]}])).passed == 0
    assert grade(median, _run(good[:3], timed_out=True)).passed == 3


def test_the_records_channel_is_parsed_without_evaluating_code() -> None:
    data = b"{'case': 0, 'step': 0, 'value': ['int', '2']}\n__import__('os').system('false')\n"
    data += b"[1, 2]\n((((\n{'case': 1"
    assert parse_records(data) == [{"case": 0, "step": 0, "value": ["int", "2"]}]
