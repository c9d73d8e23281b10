"""The task format and the pool rule: start 0 and reference 1, five times each; no trivial credit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import statekit
from statekit_examples.adapters.code_env import CodeEnvAdapter
from statekit_examples.adapters.code_env.tasks import load_task, load_tasks
from statekit_examples.adapters.code_env.validate import (
    REPEATS,
    forged_solutions,
    raising_bodies,
    trivial_solutions,
)

from .conftest import require_root, solve, submit_code


def test_the_store_holds_twenty_tasks_of_both_kinds_with_metadata() -> None:
    tasks = load_tasks()
    assert len(tasks) == 20
    assert {t.category for t in tasks.values()} == {"implement", "bugfix"}
    for task in tasks.values():
        assert set(task.metadata) == {"source", "created", "difficulty"}
        assert task.scoring == ("all" if task.category == "bugfix" else "fraction")
        assert len(task.cases) >= 4 and task.spec


def test_the_seed_picks_which_examples_are_visible() -> None:
    median = load_tasks()["median"]
    assert median.visible_tests(7) == median.visible_tests(7)
    samples = {tuple(median.visible_sample(seed)) for seed in range(40)}
    assert len(samples) > 1 and all(len(s) == len(median.visible) - 1 for s in samples)
    assert "def test_example_" in median.visible_tests(7)
    compile(median.visible_tests(7), "test_visible.py", "exec")


def test_the_hidden_job_carries_inputs_never_expectations() -> None:
    for task in load_tasks().values():
        job = task.hidden_job(now=0.0, seed=0)
        text = repr(job.cases)
        assert "expect" not in text and "raises" not in text


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: (d / "task.toml").write_text("category = 'x'\n"), "category must be one of"),
        (lambda d: (d / "hidden_tests.py").write_text("CASES = [len]\n"), "plain literal"),
        (
            lambda d: (d / "hidden_tests.py").write_text("CASES = [{'name': 'a', 'call': 'f'}]\n"),
            "checks nothing",
        ),
        (lambda d: (d / "hidden_tests.py").unlink(), "hidden_tests.py is missing"),
        (lambda d: [p.unlink() for p in (d / "reference").iterdir()], "reference/ is empty"),
        (lambda d: (d / "start" / "test_visible.py").write_text(""), "is generated"),
        (
            lambda d: (d / "hidden_tests.py").write_text(
                "CASES = [{'name': 'a', 'call': 'median', 'args': ([],), 'raises': 'ValueError'}]\n"
            ),
            "every case expects an exception",
        ),
        (
            lambda d: _add_case(
                d,
                {
                    "name": "m",
                    "call": "median",
                    "args": ([],),
                    "raises": "ValueError",
                    "message": "no median",
                },
            ),
            "which the spec does not quote",
        ),
        (
            lambda d: _add_case(d, {"name": "m", "call": "median", "args": ([],), "raises": "EmptyError"}),
            "names a builtin exception class",
        ),
    ],
)
def test_a_malformed_task_is_refused_with_its_reason(
    task_store: Callable[..., Path], mutate: Callable[[Path], object], message: str
) -> None:
    folder = task_store("median") / "median"
    mutate(folder)
    with pytest.raises(statekit.ConfigError, match=message) as info:
        load_task(folder)
    assert "median" in str(info.value)


def _add_case(folder: Path, case: dict[str, Any]) -> None:
    hidden = folder / "hidden_tests.py"
    hidden.write_text(hidden.read_text().replace("CASES = [", f"CASES = [\n    {case!r},", 1))


def test_trivial_solutions_keep_the_signatures() -> None:
    lru = load_tasks()["lru_cache"]
    variants = trivial_solutions(lru)
    assert set(variants) >= {"None", "0", "FIRST_ARGUMENT", "raise ValueError"}
    code = variants["FIRST_ARGUMENT"]["solution.py"]
    assert "def get(self, key):\n        return key" in code
    assert "def __init__(self, capacity):\n        pass" in code
    raising = variants["raise ValueError"]["solution.py"]
    assert "def __init__(self, capacity):\n        raise ValueError" in raising
    assert "def get(self, key):\n        raise ValueError" in raising


def test_refusing_and_forging_score_nothing_on_any_task(
    code_env: statekit.Environment, adapter: CodeEnvAdapter
) -> None:
    """For every task of the pool, through the environment: every function raising what the hidden
    cases expect (ValueError everywhere, the attack), and modules that forge records on the answers'
    descriptor, all score 0 and end the episode as an ordinary submit (never truncated)."""
    assert len(adapter.task_kinds()) == 20
    for task_id in adapter.task_kinds():
        task = adapter.pool.tasks[task_id]
        trivial = trivial_solutions(task)
        attempts = {body: trivial[body] for body in raising_bodies(task)}
        attempts.update(forged_solutions(task))
        assert "raise ValueError" in attempts and len(attempts) >= 4
        for name, files in attempts.items():
            code_env.reset(seed=1, options={"task": task_id})
            for path, content in files.items():
                code_env.step({"tool": "write_file", "path": path, "content": content})
            _, reward, terminated, truncated, _ = code_env.step({"tool": "submit"})
            assert (reward, terminated, truncated) == (0.0, True, False), (task_id, name)


def test_a_message_the_spec_quotes_is_checked_in_the_sandbox(task_store: Callable[..., Path]) -> None:
    """A case may expect the exception's message when the spec quotes it; only that message passes."""
    require_root()
    folder = task_store("median") / "median"
    toml = (folder / "task.toml").read_text()
    quoted = "An empty list raises ValueError('median of an empty list')."
    (folder / "task.toml").write_text(toml.replace("An empty list raises ValueError.", quoted))
    hidden = folder / "hidden_tests.py"
    message = '"raises": "ValueError", "message": "median of an empty list"'
    hidden.write_text(hidden.read_text().replace('"raises": "ValueError"', message))
    reference = (folder / "reference" / "solution.py").read_text()
    assert 'raise ValueError("median of an empty list")' in reference
    with statekit.make("code_env", tasks_dir=folder.parent) as env:
        assert solve(env, 1, "median") == 1.0
        cases = len(load_task(folder).cases)
        bare = reference.replace('"median of an empty list"', "")
        assert submit_code(env, 1, "median", bare)[0] == (cases - 1) / cases


def test_every_task_of_the_store_enters_the_pool(adapter: CodeEnvAdapter) -> None:
    """Validation ran in the real sandbox: start 0 and reference 1, REPEATS times each, and every
    trivial body 0, for all twenty tasks."""
    assert REPEATS == 5
    assert adapter.pool.rejected == {}
    assert adapter.task_kinds() == sorted(load_tasks())


def test_a_task_failing_validation_never_enters_the_pool(task_store: Callable[..., Path]) -> None:
    require_root()
    store = task_store("median", "fizzbuzz", "leap_year", "chunk")
    # the reference is wrong
    (store / "median" / "reference" / "solution.py").write_text("def median(xs):\n    return sorted(xs)[0]\n")
    # the start already passes
    (store / "fizzbuzz" / "start" / "solution.py").write_text(
        (store / "fizzbuzz" / "reference" / "solution.py").read_text()
    )
    # partial credit for a trivial body: a case whose answer is []
    hidden = store / "chunk" / "hidden_tests.py"
    hidden.write_text(
        hidden.read_text().replace(
            "CASES = [", 'CASES = [\n    {"name": "free", "call": "chunk", "args": ([], 2), "expect": []},', 1
        )
    )
    with statekit.make("code_env", tasks_dir=store) as env:
        adapter = env.adapter
        assert isinstance(adapter, CodeEnvAdapter)
        assert adapter.task_kinds() == ["leap_year"]
        rejected = adapter.pool.rejected
        assert "the reference scores" in rejected["median"][0]
        assert "the untouched start scores 1.0" in rejected["fizzbuzz"][0]
        assert any("trivial solution" in p and "returns []" in p for p in rejected["chunk"])
        with pytest.raises(ValueError, match="left out of the pool"):
            env.reset(seed=1, options={"task": "median"})
        assert env.reset(seed=1)[1]["task_id"] == "leap_year"


def test_hidden_inputs_too_large_for_one_command_line_are_refused(task_store: Callable[..., Path]) -> None:
    folder = task_store("median") / "median"
    big = "[" + ", ".join(str(i) for i in range(40_000)) + "]"
    (folder / "hidden_tests.py").write_text(
        f"CASES = [{{'name': 'big', 'call': 'median', 'args': ({big},), 'expect': 1}}]\n"
    )
    with pytest.raises(statekit.ConfigError, match="on a command line"):
        load_task(folder)
