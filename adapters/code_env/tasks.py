"""Tasks: the seed's format, one directory per task under ``adapters/code_env/tasks/``.

::

    tasks/<id>/task.toml        category (implement | bugfix), scoring (fraction | all), module under
                                test, the spec (everything the hidden tests check), visible examples,
                                [metadata] source, created, difficulty
    tasks/<id>/start/           the starting files of the working directory
    tasks/<id>/reference/       files that, written over the start, solve the task
    tasks/<id>/hidden_tests.py  CASES = [...]: the hidden tests as *data* (a Python literal read with
                                ``ast.literal_eval``; never imported, executed or copied anywhere the
                                agent or the sandbox can read)

A hidden case is one call (``{"name", "call", "args", "kwargs", "expect" | "raises", "message",
"approx", "at", "seed"}``) or a list of ``steps`` of that shape, where a step may keep its result
``as`` a name that later steps call methods on (``"call": "cache.get"``). ``expect`` is compared by
exact type and value (``2`` is not ``2.0``, ``True`` is not ``1``, a tuple is not a list) unless
``approx`` is set; ``raises`` names a builtin exception class, and ``message``, when given, the
exception's exact ``str``, which the spec must quote (a hidden test checks only what the spec says);
``at`` pins the sandbox clock (epoch seconds) and ``seed`` reseeds ``random`` for that step. A task
needs a case that expects no exception: refusing is credited only alongside answering (``grader.py``).

The visible tests are generated: ``test_visible.py`` holds a seeded sample of the examples (all but
one when there are three or more), so different seeds show the agent different examples. That sample is
the only part of the world a seed changes besides the choice of task.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import random
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statekit import ConfigError
from statekit_examples.adapters.code_env.sandbox.base import Job, Limits
from statekit_examples.adapters.code_env.sandbox.runner import encode

TASKS_DIR = Path(__file__).resolve().parent / "tasks"
CATEGORIES = ("implement", "bugfix")
SCORINGS = ("fraction", "all")
VISIBLE_FILE = "test_visible.py"
MAX_JOB_CHARS = 120_000
"""A run's job travels as one command-line argument, which the kernel caps at 128 KiB."""
_STEP_KEYS = {"call", "args", "kwargs", "expect", "raises", "message", "approx", "at", "seed", "as"}
_CASE_KEYS = {"name", "steps"} | _STEP_KEYS
_TOML_KEYS = {"category", "scoring", "module", "spec", "visible", "metadata", "max_steps"}
_METADATA_KEYS = ("source", "created", "difficulty")


@dataclass(frozen=True)
class Step:
    """One call of a hidden case. ``expect`` is the encoded expected value (None: no expectation)."""

    call: str
    args: list[Any]
    kwargs: dict[str, Any]
    expect: list[Any] | None = None
    raises: str | None = None
    message: str | None = None
    """The exception's exact message, when the spec states one."""
    approx: bool = False
    store_as: str | None = None
    at: float | None = None
    seed: int | None = None

    def wire(self) -> dict[str, Any]:
        """What the sandbox is told about this step: the call and its inputs, never the expectation."""
        body: dict[str, Any] = {"call": self.call, "args": self.args, "kwargs": self.kwargs}
        if self.store_as:
            body["as"] = self.store_as
        if self.at is not None:
            body["at"] = self.at
        if self.seed is not None:
            body["seed"] = self.seed
        return body


@dataclass(frozen=True)
class Case:
    name: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class TaskSpec:
    """One task, loaded and checked. ``digest`` covers every file of its directory."""

    id: str
    category: str
    scoring: str
    module: str
    spec: str
    visible: tuple[str, ...]
    start: Mapping[str, str]
    reference: Mapping[str, str]
    cases: tuple[Case, ...]
    metadata: Mapping[str, str]
    digest: str
    max_steps: int
    source_dir: Path = field(compare=False)

    def visible_sample(self, seed: int) -> list[int]:
        """Which examples seed ``seed`` shows (indices, in their written order)."""
        count = len(self.visible)
        keep = count - 1 if count >= 3 else count
        return sorted(random.Random(f"code_env:visible:{self.id}:{seed}").sample(range(count), keep))

    def visible_tests(self, seed: int) -> str:
        lines = [
            '"""Visible tests for this task: a sample of its examples. The run_tests tool runs every',
            'test_* function here; the task statement says everything the hidden tests check."""',
            "",
            f"from {self.module} import *  # noqa: F403",
        ]
        for index in self.visible_sample(seed):
            lines += ["", "", f"def test_example_{index + 1}():"]
            lines += [f"    {line}" if line else "" for line in self.visible[index].strip().splitlines()]
        return "\n".join(lines) + "\n"

    def start_files(self, seed: int) -> dict[str, str]:
        """The working directory at the start of an episode with ``seed``."""
        return {**self.start, VISIBLE_FILE: self.visible_tests(seed)}

    def hidden_job(self, *, now: float, seed: int, variants: list[str] | None = None) -> Job:
        cases = [[s.wire() for s in c.steps] for c in self.cases]
        return Job("hidden", now=now, seed=seed, module=self.module, cases=cases, variants=variants or [])


def load_tasks(root: Path = TASKS_DIR) -> dict[str, TaskSpec]:
    """Every task under ``root`` (a directory per task), by id; a malformed task is a ConfigError."""
    if not root.is_dir():
        raise ConfigError(f"no task directory at {root}")
    tasks = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        tasks[folder.name] = load_task(folder)
    if not tasks:
        raise ConfigError(f"{root} holds no tasks (one directory per task, each with a task.toml)")
    return tasks


def load_task(folder: Path) -> TaskSpec:
    where = folder.name

    def fail(problem: str) -> ConfigError:
        return ConfigError(f"task {where!r} ({folder}): {problem}")

    try:
        config = tomllib.loads((folder / "task.toml").read_text())
    except FileNotFoundError as exc:
        raise fail("task.toml is missing") from exc
    except tomllib.TOMLDecodeError as exc:
        raise fail(f"task.toml is not valid TOML: {exc}") from exc
    unknown = sorted(set(config) - _TOML_KEYS)
    if unknown:
        raise fail(f"task.toml has unknown keys {unknown}; known: {sorted(_TOML_KEYS)}")
    category, scoring = config.get("category"), config.get("scoring", "all")
    if category not in CATEGORIES:
        raise fail(f"category must be one of {list(CATEGORIES)}, got {category!r}")
    if scoring not in SCORINGS:
        raise fail(f"scoring must be one of {list(SCORINGS)}, got {scoring!r}")
    spec, visible = config.get("spec"), config.get("visible", [])
    if not isinstance(spec, str) or not spec.strip():
        raise fail("spec (the task statement) is missing")
    if not isinstance(visible, list) or len(visible) < 2 or not all(isinstance(v, str) for v in visible):
        raise fail("visible must list at least two example snippets")
    metadata = config.get("metadata", {})
    missing = [key for key in _METADATA_KEYS if not isinstance(metadata.get(key), str)]
    if missing:
        raise fail(f"[metadata] needs {missing} (strings)")
    module = str(config.get("module", "solution"))
    start, reference = _files(folder / "start"), _files(folder / "reference")
    if f"{module}.py" not in start:
        raise fail(f"start/ has no {module}.py, the module under test")
    if not reference:
        raise fail("reference/ is empty: a task needs a known-good solution")
    if VISIBLE_FILE in start or VISIBLE_FILE in reference:
        raise fail(f"{VISIBLE_FILE} is generated from the examples; remove it from start/ and reference/")
    cases = _load_cases(folder / "hidden_tests.py", spec, fail)
    size = len(Job("hidden", 0.0, 0, module, [[s.wire() for s in c.steps] for c in cases]).encoded(Limits()))
    if size > MAX_JOB_CHARS:
        raise fail(
            f"the hidden cases' inputs take {size} characters on a command line; the limit is {MAX_JOB_CHARS}"
        )
    return TaskSpec(
        id=folder.name,
        category=category,
        scoring=scoring,
        module=module,
        spec=spec.strip(),
        visible=tuple(visible),
        start=start,
        reference=reference,
        cases=cases,
        metadata={key: str(metadata[key]) for key in sorted(metadata)},
        digest=_digest(folder),
        max_steps=int(config.get("max_steps", 30)),
        source_dir=folder,
    )


def _files(folder: Path) -> dict[str, str]:
    if not folder.is_dir():
        return {}
    return {
        str(path.relative_to(folder)): path.read_text()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            h.update(str(path.relative_to(folder)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _load_cases(path: Path, spec: str, fail: Any) -> tuple[Case, ...]:
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except FileNotFoundError as exc:
        raise fail("hidden_tests.py is missing") from exc
    except SyntaxError as exc:
        raise fail(f"hidden_tests.py does not parse: {exc}") from exc
    values = [
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["CASES"]
    ]
    if len(values) != 1:
        raise fail("hidden_tests.py must assign CASES = [...] exactly once")
    try:
        raw = ast.literal_eval(values[0])
    except ValueError as exc:
        raise fail(f"CASES must be a plain literal (no names, calls or expressions): {exc}") from exc
    if not isinstance(raw, list) or not raw:
        raise fail("CASES must be a non-empty list of cases")
    cases, names = [], set()
    for number, entry in enumerate(raw, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise fail(f"case #{number} must be a dict with a 'name'")
        name = entry["name"]
        if name in names:
            raise fail(f"two cases are named {name!r}")
        names.add(name)
        unknown = sorted(set(entry) - _CASE_KEYS)
        if unknown:
            raise fail(f"case {name!r} has unknown keys {unknown}")
        raw_steps = entry["steps"] if "steps" in entry else [{k: v for k, v in entry.items() if k != "name"}]
        steps = tuple(_step(step, f"case {name!r}", fail) for step in raw_steps)
        if not any(s.expect is not None or s.raises for s in steps):
            raise fail(f"case {name!r} checks nothing: give a step an 'expect' or 'raises'")
        for step in steps:
            if step.message is not None and step.message not in spec:
                raise fail(
                    f"case {name!r} expects the message {step.message!r}, which the spec does not quote: "
                    "a hidden test checks only what the spec says"
                )
        cases.append(Case(name, steps))
    if all(any(s.raises for s in case.steps) for case in cases):
        raise fail(
            "every case expects an exception, and refusing is credited only alongside answering: "
            "add a case that expects a value"
        )
    return tuple(cases)


def _step(raw: Any, where: str, fail: Any) -> Step:
    if not isinstance(raw, dict) or not isinstance(raw.get("call"), str):
        raise fail(f"{where}: every step needs a 'call' (a function name, or NAME.method)")
    unknown = sorted(set(raw) - _STEP_KEYS)
    if unknown:
        raise fail(f"{where}: step has unknown keys {unknown}")
    if "expect" in raw and "raises" in raw:
        raise fail(f"{where}: a step expects a value or an exception, not both")
    args, kwargs = raw.get("args", ()), raw.get("kwargs", {})
    if not isinstance(args, tuple | list) or not isinstance(kwargs, dict):
        raise fail(f"{where}: 'args' must be a tuple and 'kwargs' a dict")
    encoded = [encode(a) for a in args] + [encode(v) for v in kwargs.values()]
    expect = encode(raw["expect"]) if "expect" in raw else None
    if any(e[0] == "unsupported" for e in [*encoded, *([expect] if expect else [])]):
        raise fail(f"{where}: arguments and expectations must be plain data (int, str, list, dict, ...)")
    raises, message = raw.get("raises"), raw.get("message")
    if raises is not None and not _is_builtin_exception(raises):
        raise fail(f"{where}: 'raises' names a builtin exception class, e.g. 'ValueError', not {raises!r}")
    if message is not None and not (isinstance(message, str) and raises):
        raise fail(f"{where}: 'message' is the expected exception's message (a str), next to 'raises'")
    return Step(
        call=raw["call"],
        args=[encode(a) for a in args],
        kwargs={str(k): encode(v) for k, v in kwargs.items()},
        expect=expect,
        raises=raises,
        message=message,
        approx=bool(raw.get("approx", False)),
        store_as=raw.get("as"),
        at=float(raw["at"]) if "at" in raw else None,
        seed=int(raw["seed"]) if "seed" in raw else None,
    )


def _is_builtin_exception(name: Any) -> bool:
    cls = getattr(builtins, name, None) if isinstance(name, str) else None
    return isinstance(cls, type) and issubclass(cls, BaseException)
