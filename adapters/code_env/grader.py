"""The verdict: hidden cases against the records of a run, judged here, outside the sandbox.

The sandboxed process only reports what each call returned (``runner.py``); this module, in the
adapter's own process, decides. Expected values never leave it. The comparison is by exact type
(the wire format carries the type: an object with an ``__eq__`` that is always true arrives as
``["unsupported", ...]`` and equals nothing), so the two classic score forgeries fail: such an object
cannot cross the process boundary, and a forged "4 of 4 passed" line on stdout is never read.

The model's code can write to the records' descriptor too, so nothing in a record is trusted:

- a record that is not exactly what the runner writes (``well_formed``) is tampering, and the run
  scores nothing; a record that appears twice for one call fails its case;
- an expected exception matches only the class named (the nearest builtin class of the one raised,
  so a class deriving from every builtin the spec names matches one) and, when the case gives one,
  the message, exactly;
- refusing is credited only alongside answering: a case expecting an exception passes only if some
  case expecting none passed in the same run. A body that raises whatever it is given is not input
  validation; without this rule it would collect every case about bad input.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from statekit_examples.adapters.code_env.sandbox.base import RunResult
from statekit_examples.adapters.code_env.tasks import Case, Step, TaskSpec

_ANSWER_KEYS = ({"case", "step", "value"}, {"case", "step", "raised", "message"}, {"import_error"})


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
    module, for a validation run that tried several). Never raises, whatever the records hold."""
    total = len(task.cases)
    forged = [record for record in run.records if not well_formed(record, variants=variant is not None)]
    if forged:
        example = repr(forged[0])[:200]
        return Grade(0, total, (f"{len(forged)} malformed record(s), e.g. {example}: tampering",))
    keyed: dict[tuple[int, int], dict[str, Any]] = {}
    counts: Counter[tuple[int, int]] = Counter()
    import_error = None
    for record in run.records:
        if record.get("variant") != variant:
            continue
        if "import_error" in record:
            import_error = record["import_error"]
            continue
        key = (record["case"], record["step"])
        counts[key] += 1
        keyed[key] = record
    problems = [
        f"module {task.module!r} did not import ({import_error[0]})"
        if import_error is not None
        else _judge_case(index, case, keyed, counts)
        for index, case in enumerate(task.cases)
    ]
    answered = any(p is None and not _refuses(c) for p, c in zip(problems, task.cases, strict=True))
    failures = []
    for problem, case in zip(problems, task.cases, strict=True):
        if problem is None and _refuses(case) and not answered:
            problem = "raised as expected, but no case expecting a value passed: refusing alone earns nothing"
        if problem is not None:
            failures.append(f"{case.name}: {problem}")
    passed = total - len(failures)
    if run.timed_out:
        failures.append(f"(the run hit its wall-clock limit after {run.seconds:.1f} s)")
    return Grade(passed=passed, total=total, failures=tuple(failures))


def well_formed(record: dict[str, Any], *, variants: bool) -> bool:
    """Exactly the shape ``runner.py`` writes: ``case``/``step`` numbers with a ``value`` (a tagged
    list) or ``raised`` (builtin class names) and ``message``; or an ``import_error``; a ``variant``
    number exactly when the job had variants. Anything else was written by someone else."""
    keys = set(record)
    if variants:
        if not _is_index(record.get("variant")):
            return False
        keys.discard("variant")
    if keys not in _ANSWER_KEYS:
        return False
    if "import_error" in keys:
        return _is_names(record["import_error"])
    if not (_is_index(record["case"]) and _is_index(record["step"])):
        return False
    if "value" in keys:
        return type(record["value"]) is list
    return _is_names(record["raised"]) and type(record["message"]) is str


def _is_index(value: Any) -> bool:
    return type(value) is int and value >= 0


def _is_names(value: Any) -> bool:
    return type(value) is list and bool(value) and all(type(name) is str for name in value)


def _refuses(case: Case) -> bool:
    """Whether ``case`` is about bad input: some step of it expects an exception."""
    return any(step.raises for step in case.steps)


def _judge_case(
    index: int, case: Case, keyed: dict[tuple[int, int], dict[str, Any]], counts: Counter[tuple[int, int]]
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
    """One well-formed record against one step's expectation."""
    raised = record.get("raised")
    if step.raises:
        if raised is None:
            return f"expected {step.raises}, got a return"
        if raised[0] != step.raises:
            return f"expected {step.raises}, got {raised[0]}"
        if step.message is not None and record["message"] != step.message:
            return f"expected {step.raises}({step.message!r}), got {raised[0]}({record['message']!r})"
        return None
    if raised is not None:
        return f"raised {raised[0]}"
    if step.expect is not None and not matches(record["value"], step.expect, approx=step.approx):
        return "wrong value"
    return None


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
