"""The wire format and the verdict: exact types, no trust in what the sandbox sends."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from statekit_examples.adapters.code_env.grader import grade, matches, well_formed
from statekit_examples.adapters.code_env.sandbox.base import RunResult, parse_records
from statekit_examples.adapters.code_env.sandbox.runner import decode, encode
from statekit_examples.adapters.code_env.tasks import Case, Step, TaskSpec, load_tasks


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
        else {"case": i, "step": 0, "raised": ["ValueError", "Exception"], "message": ""}
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


def _answers(task: TaskSpec, answer: Any) -> list[dict[str, Any]]:
    """One record per step of every case of ``task``: ``answer(case, step)`` merged into its place."""
    return [
        {"case": c, "step": s, **answer(case, step)}
        for c, case in enumerate(task.cases)
        for s, step in enumerate(case.steps)
    ]


def _right(case: Case, step: Step) -> dict[str, Any]:
    if step.raises:
        return {"raised": [step.raises, "Exception", "BaseException"], "message": step.message or ""}
    return {"value": step.expect if step.expect is not None else ["none"]}


def _raised(*classes: str) -> Any:
    return lambda case, step: {"raised": [*classes, "Exception", "BaseException"], "message": ""}


@pytest.mark.parametrize(
    "record",
    [
        {"case": [0], "step": 0, "value": ["none"]},  # the attack: a list where an index goes
        {"case": True, "step": 0, "value": ["none"]},
        {"case": 0, "step": "0", "value": ["none"]},
        {"case": -1, "step": 0, "value": ["none"]},
        {"case": 0, "step": 0, "raised": "ValueError", "message": ""},  # "in" a str: a substring
        {"case": 0, "step": 0, "raised": [], "message": ""},
        {"case": 0, "step": 0, "raised": ["ValueError"]},
        {"case": 0, "step": 0, "raised": ["ValueError"], "message": None},
        {"case": 0, "step": 0, "value": "2"},
        {"case": 0, "step": 0, "value": ["int", "2"], "raised": ["ValueError"], "message": ""},
        {"case": 0, "step": 0, "value": ["int", "2"], "variant": 0},  # no variants in this run
        {"case": 0, "step": 0},
        {"import_error": "SyntaxError"},
        {"passed": 8, "total": 8},
    ],
)
def test_a_malformed_record_is_tampering_and_scores_nothing(record: dict[str, Any]) -> None:
    """Whatever the model writes on the records' descriptor, the grader returns a grade (never an
    exception, which would be statekit's verifier_error and truncate the episode) and pays nothing,
    even next to the right answers to every case."""
    median = load_tasks()["median"]
    assert not well_formed(record, variants=False)
    verdict = grade(median, _run([*_answers(median, _right), record]))
    assert verdict.passed == 0 and verdict.reward("fraction") == 0.0
    assert "tampering" in verdict.failures[0]
    assert grade(median, _run(_answers(median, _right))).reward("fraction") == 1.0


def _right_but_raising(*classes: str) -> Any:
    """Right answers, except that where an exception is due, one of ``classes`` is raised."""
    return lambda case, step: _raised(*classes)(case, step) if step.raises else _right(case, step)


def test_an_expected_exception_matches_its_class_exactly_and_only_alongside_an_answer() -> None:
    median = load_tasks()["median"]

    def passed(answer: Any) -> int:
        return grade(median, _run(_answers(median, answer))).passed

    refusing = [case for case in median.cases if case.steps[0].raises == "ValueError"]
    answering = len(median.cases) - len(refusing)
    assert refusing and not median.cases[0].steps[0].raises
    # every call raised ValueError: refusing everything is no input validation
    assert passed(_raised("ValueError")) == 0
    # where ValueError is due, one of its builtin subclasses: not what the spec says
    assert passed(_right_but_raising("UnicodeError", "ValueError")) == answering
    # a class deriving from several builtins matches the nearest only
    assert passed(_right_but_raising("KeyError", "ValueError")) == answering
    assert passed(_right_but_raising("ValueError", "KeyError")) == len(median.cases)
    # one right value makes the refusals count
    first = median.cases[0]
    assert passed(lambda c, s: _right(c, s) if c is first else _raised("ValueError")(c, s)) == 1 + len(
        refusing
    )


def test_a_message_the_case_gives_must_match_exactly() -> None:
    median = load_tasks()["median"]
    step = Step("median", [encode([])], {}, raises="ValueError", message="median of an empty list")
    task = dataclasses.replace(median, cases=(*median.cases, Case("message", (step,))))

    def answer(message: str) -> Any:
        return lambda c, s: {**_right(c, s), "message": message} if s is step else _right(c, s)

    assert grade(task, _run(_answers(task, answer("median of an empty list")))).reward("all") == 1.0
    verdict = grade(task, _run(_answers(task, answer("empty"))))
    assert verdict.passed == len(task.cases) - 1
    assert "expected ValueError('median of an empty list'), got ValueError('empty')" in verdict.failures[0]
