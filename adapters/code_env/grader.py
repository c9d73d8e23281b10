"""The verdict: hidden cases against the records of a run, judged here, outside the sandbox.

The sandboxed process only reports what each call returned (``runner.py``); this module, in the
adapter's own process, decides. Expected values never leave it. The comparison is by exact type
(the wire format carries the type: an object with an ``__eq__`` that is always true arrives as
``["unsupported", ...]`` and equals nothing), so the two classic score forgeries fail: such an object
cannot cross the process boundary, and a forged "4 of 4 passed" line on stdout is never read.
A record that appears twice for one call is treated as tampering and fails its case.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from adapters.code_env.sandbox.base import RunResult
from adapters.code_env.tasks import Case, Step, TaskSpec


@dataclass(frozen=True)
class Grade:
    passed: int
    total: int
    failures: tuple[str, ...]
    """``case name: why`` for each failed case (for logs and validation messages, never the agent)."""

    def reward(self, scoring: str) -> float:
        """``fraction``: passed / total; ``all``: 1.0 only when every case passed."""
        if scoring == "fraction":
            return self.passed / self.total if self.total else 0.0
        return 1.0 if self.total and self.passed == self.total else 0.0


def grade(task: TaskSpec, run: RunResult, *, variant: int | None = None) -> Grade:
    """Judge every hidden case of ``task`` by the records of one hidden run (of one ``variant`` of the
    module, for a validation run that tried several)."""
    keyed: dict[tuple[Any, Any], dict[str, Any]] = {}
    counts: Counter[tuple[Any, Any]] = Counter()
    import_error = None
    for record in run.records:
        if record.get("variant") != variant:
            continue
        if "import_error" in record:
            import_error = record["import_error"]
            continue
        key = (record.get("case"), record.get("step"))
        counts[key] += 1
        keyed[key] = record
    failures = []
    for index, case in enumerate(task.cases):
        if import_error is not None:
            failures.append(f"{case.name}: module {task.module!r} did not import ({_first(import_error)})")
            continue
        problem = _judge_case(index, case, keyed, counts)
        if problem:
            failures.append(f"{case.name}: {problem}")
    passed = len(task.cases) - len(failures)
    if run.timed_out:
        failures.append(f"(the run hit its wall-clock limit after {run.seconds:.1f} s)")
    return Grade(passed=passed, total=len(task.cases), failures=tuple(failures))


def _judge_case(
    index: int, case: Case, keyed: dict[tuple[Any, Any], dict[str, Any]], counts: Counter[tuple[Any, Any]]
) -> str | None:
    for step_index, step in enumerate(case.steps):
        key = (index, step_index)
        if counts[key] > 1:
            return f"step {step_index} ({step.call}) was answered {counts[key]} times: tampering"
        record = keyed.get(key)
        if record is None:
            return f"step {step_index} ({step.call}) has no answer (the run stopped before it)"
        problem = _judge_step(step, record)
        if problem:
            return f"step {step_index} ({step.call}): {problem}"
    return None


def _judge_step(step: Step, record: dict[str, Any]) -> str | None:
    raised = record.get("raised")
    if step.raises:
        if isinstance(raised, list) and step.raises in raised:
            return None
        return f"expected {step.raises}, got " + (f"{_first(raised)}" if raised is not None else "a return")
    if raised is not None:
        return f"raised {_first(raised)}"
    if "value" not in record:
        return "the answer carries no value"
    if step.expect is not None and not matches(record["value"], step.expect, approx=step.approx):
        return "wrong value"
    return None


def _first(classes: Any) -> str:
    return str(classes[0]) if isinstance(classes, list) and classes else "an exception"


_NUMBERS = ("int", "float")


def matches(observed: Any, expected: list[Any], *, approx: bool = False) -> bool:
    """Tagged ``observed`` (from the sandbox, untrusted) equals tagged ``expected``, type for type.

    ``approx`` compares ints and floats as numbers within a relative 1e-9 (absolute 1e-12).
    """
    if not isinstance(observed, list) or not observed or not isinstance(observed[0], str):
        return False
    tag, want = observed[0], expected[0]
    if approx and tag in _NUMBERS and want in _NUMBERS:
        try:
            a, b = float(observed[1]), float(expected[1])
        except (IndexError, TypeError, ValueError):
            return False
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    if tag != want or tag == "unsupported" or len(observed) != len(expected):
        return False
    if tag in ("list", "tuple", "set", "frozenset"):
        items, wanted = observed[1], expected[1]
        return (
            isinstance(items, list)
            and len(items) == len(wanted)
            and all(matches(a, b, approx=approx) for a, b in zip(items, wanted, strict=True))
        )
    if tag == "dict":
        pairs, wanted = observed[1], expected[1]
        return (
            isinstance(pairs, list)
            and len(pairs) == len(wanted)
            and all(
                isinstance(pair, list)
                and len(pair) == 2
                and matches(pair[0], w[0])
                and matches(pair[1], w[1], approx=approx)
                for pair, w in zip(pairs, wanted, strict=True)
            )
        )
    return bool(observed == expected)
