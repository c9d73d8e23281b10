"""The code environment: the environment brief's (document 001) coding world, on statekit's public API.

- World: one directory tree per seed holding every pool task's starting files (``<task>/``, each
  with a seeded sample of visible examples), reset by ``CowFilesystem``; the episode's working
  directory is ``<task>/``. The hidden tests are not in it: they stay in the task store, which the
  sandbox hides.
- Task: the seed picks one from the validated pool; ``options={"task": ID}`` picks by id.
- Tools (``tools.py``): ``list_files``, ``view_file``, ``write_file``, ``run_tests``, ``submit``.
- Sandbox (``sandbox/``): strategy ``subprocess`` (the default: namespaces, limits and a borrowed
  uid on this host, root only) or ``container`` (one container per episode, ``docker exec`` per run).
  Both reset the world the same way; the strategy name picks where the model's code runs.
- Reward: on submit, the hidden cases' calls run in the sandbox and ``grader.py`` judges their
  answers in this process: the fraction of cases passed, or all-or-nothing, per task.
- Validation (``validate.py``): only tasks whose start scores 0 and reference 1, five times each,
  and whose trivial solutions score 0, enter the pool.

Determinism reaches into the sandbox: every run gets the episode's virtual time (its frozen wall
clock) and a seed drawn from the episode's seeded random stream (its ``random`` and ``uuid4``), and
``PYTHONHASHSEED`` is fixed, so the same seed and actions give the same observations and reward.
"""

from __future__ import annotations

import functools
import random
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from statekit import ConfigError
from statekit.kit import (
    Adapter,
    AssayHooks,
    CheckHints,
    CowFilesystem,
    Digest,
    EnvSettings,
    Episode,
    FixtureSource,
    Outcome,
    ResetStrategy,
    Rewinding,
    StateDump,
    StateDumps,
    Task,
    Tool,
    ToolSchemas,
    World,
    file_dump,
    statekit_home,
)
from statekit_examples.adapters.code_env.grader import Grade, grade
from statekit_examples.adapters.code_env.sandbox.base import (
    DEFENCES,
    Job,
    Limits,
    Sandbox,
    SandboxSession,
    check_defences,
)
from statekit_examples.adapters.code_env.sandbox.process import DEFAULT_PYTHON
from statekit_examples.adapters.code_env.tasks import TASKS_DIR, VISIBLE_FILE, TaskSpec, load_tasks
from statekit_examples.adapters.code_env.tools import HANDLERS, PATH_ERRORS, TOOLS, ToolError, Workspace
from statekit_examples.adapters.code_env.validate import Pool, validate_pool, write_tree

BUILDER_VERSION = "1"
TABLE = "files:world"


def _process_sandbox(adapter: CodeEnvAdapter) -> Sandbox:
    from statekit_examples.adapters.code_env.sandbox.process import ProcessSandbox

    masked = (adapter.tasks_dir, statekit_home())
    return ProcessSandbox(adapter.limits, python=adapter.python, masked=masked, disabled=adapter.disabled)


def _container_sandbox(adapter: CodeEnvAdapter) -> Sandbox:
    from statekit_examples.adapters.code_env.sandbox.container import ContainerSandbox

    return ContainerSandbox(adapter.limits, disabled=adapter.disabled)


SANDBOXES: dict[str, Callable[[CodeEnvAdapter], Sandbox]] = {
    "subprocess": _process_sandbox,
    "container": _container_sandbox,
}
"""Strategy name -> where the model's code runs. Every strategy resets the world with CowFilesystem."""


class CodeEpisode(Episode):
    """One task's working directory, its sandbox session, and the five tools."""

    def __init__(self, spec: TaskSpec, task: Task, workspace: Workspace, session: SandboxSession) -> None:
        self.spec = spec
        self.task = task
        self.tools = list(TOOLS)
        self.workspace = workspace
        self.session = session
        self.last_grade: Grade | None = None
        self._tools: dict[str, Callable[[dict[str, Any]], Outcome]] = {
            **{name: functools.partial(self._file_tool, handler) for name, handler in HANDLERS.items()},
            "run_tests": self._run_tests,
            "submit": self._submit,
        }

    def observe(self) -> Any:
        return {"task": self.spec.spec, "files": HANDLERS["list_files"](self.workspace, {})["files"]}

    def call(self, tool: str, arguments: dict[str, Any]) -> Outcome:
        return self._tools[tool](arguments)

    def score(self) -> float:
        """Run the hidden cases' calls in the sandbox and judge the answers here."""
        job = self.spec.hidden_job(now=time.time(), seed=_draw_seed())
        self.last_grade = grade(self.spec, self.session.run(job))
        return self.last_grade.reward(self.spec.scoring)

    def close(self) -> None:
        self.session.close()

    def _file_tool(
        self, handler: Callable[[Workspace, dict[str, Any]], Any], arguments: dict[str, Any]
    ) -> Outcome:
        try:
            return Outcome(handler(self.workspace, arguments))
        except ToolError as exc:
            return Outcome({"error": {"code": exc.code, "message": str(exc)}})
        except OSError as exc:
            if exc.errno not in PATH_ERRORS:
                raise  # the machine's fault (a full disk, permissions): statekit's environment_error
            message = f"{arguments.get('path')!r}: {exc.strerror}"
            return Outcome({"error": {"code": "invalid_path", "message": message}})

    def _run_tests(self, arguments: dict[str, Any]) -> Outcome:
        result = self.session.run(Job("visible", now=time.time(), seed=_draw_seed()))
        return Outcome(result.observation(self.workspace.max_chars))

    def _submit(self, arguments: dict[str, Any]) -> Outcome:
        return Outcome({"submitted": True}, done=True)


def _draw_seed() -> int:
    """A seed for one sandbox run, from the episode's seeded stream (statekit's ``ids`` control swaps
    the global ``random`` state in for every step), so runs repeat exactly under the same seed."""
    return random.getrandbits(63)


class CodeEnvAdapter(Adapter, StateDumps, CheckHints, ToolSchemas, AssayHooks):
    """The environment brief's (document 001) coding environment. Options
    (``statekit.make("code_env", **options)``):

    ``tasks_dir`` (another task store), ``tasks`` (ids to keep), ``limits`` (a dict overriding
    ``sandbox.base.Limits``), ``python`` (the sandbox's interpreter for ``subprocess``),
    ``cow_method`` (``CowFilesystem`` method), ``rewind`` (wrap it in ``Rewinding``: a finished
    episode's tree is put back in place and reused for its seed), ``max_output`` (characters per
    observation field),
    ``workers`` (sessions validating at once), ``disable_defences`` (only to prove one matters).
    """

    name = "code_env"
    strategies = tuple(SANDBOXES)
    tick_seconds = 60
    probe_tasks = {"clock": "request_id", "ids": "request_id"}

    def __init__(
        self,
        *,
        tasks_dir: str | Path | None = None,
        tasks: list[str] | tuple[str, ...] | None = None,
        limits: dict[str, Any] | Limits | None = None,
        python: str = DEFAULT_PYTHON,
        cow_method: str = "auto",
        rewind: bool = False,
        max_output: int = 8000,
        workers: int | None = None,
        disable_defences: tuple[str, ...] | list[str] = (),
    ) -> None:
        self.tasks_dir = Path(tasks_dir).resolve() if tasks_dir else TASKS_DIR
        every = load_tasks(self.tasks_dir)
        if tasks is not None:
            unknown = sorted(set(tasks) - set(every))
            if unknown:
                raise ConfigError(f"unknown task(s) {unknown}; {self.tasks_dir} holds {sorted(every)}")
            every = {tid: every[tid] for tid in sorted(set(tasks))}
        self.all_tasks = every
        self.limits = Limits.from_options(limits)
        self.python = python
        self.cow_method = cow_method
        self.rewind = rewind
        self.max_output = int(max_output)
        self.workers = workers
        self.disabled = check_defences(tuple(disable_defences))
        self.sandbox_kind = self.strategies[0]
        self._sandbox: Sandbox | None = None
        self._pool: Pool | None = None
        self._current: TaskSpec | None = None

    # -- what runs the code, and which tasks may be posed ------------------------------------------
    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = SANDBOXES[self.sandbox_kind](self)
        return self._sandbox

    @property
    def pool(self) -> Pool:
        """The validated tasks (validation runs once per sandbox and task version, then is cached)."""
        if self._pool is None:
            cache = statekit_home() / "code_env" / "validation"
            self._pool = validate_pool(self.all_tasks, self.sandbox, cache, workers=self.workers)
            if not self._pool.tasks:
                raise ConfigError(
                    f"no task passed validation in the {self.sandbox_kind} sandbox: {self._pool.rejected}"
                )
        return self._pool

    def choose_task(self, seed: int, pool: tuple[str, ...] | None = None) -> str:
        """The task ``seed`` poses: drawn from the validated tasks in ``pool`` (default: all of them)."""
        ids = [task_id for task_id in self.pool.ids if pool is None or task_id in pool]
        if not ids:
            raise ConfigError(f"no task is left to pose: the pool {self.pool.ids} is excluded entirely")
        return ids[random.Random(f"code_env:task:{seed}").randrange(len(ids))]

    # -- the adapter contract ------------------------------------------------------------------------
    def fingerprint(self) -> dict[str, str]:
        return {"app": "code_env", "builder": BUILDER_VERSION, "pool": self.pool.digest}

    def make_strategy(self, name: str, **options: Any) -> ResetStrategy:
        if name not in SANDBOXES:
            raise ConfigError(f"code_env offers strategies {list(SANDBOXES)}, not {name!r}")
        if self._sandbox is not None and name != self.sandbox_kind:
            raise ConfigError(f"this adapter already runs code in the {self.sandbox_kind!r} sandbox")
        self.sandbox_kind = name
        root = statekit_home() / "files" / self.name
        world = CowFilesystem(root, method=self.cow_method, prefix="skce")
        return Rewinding(world) if self.rewind else world

    def build_world(self, world: World, seed: int) -> None:
        root = Path(world.location)
        root.chmod(0o755)
        for task_id, spec in self.pool.tasks.items():
            (root / task_id).mkdir(mode=0o755)
            write_tree(root / task_id, spec.start_files(seed))

    def start_episode(
        self,
        world: World,
        *,
        seed: int,
        options: dict[str, Any],
        task: Task | None,
        app: Any,
        settings: EnvSettings,
    ) -> Episode:
        chosen = options.get("task") or self.choose_task(seed, settings.task_pool)
        task_id = task.kind if task is not None else str(chosen)
        spec = self.pool.tasks.get(task_id)
        if spec is None:
            why = (
                f" (left out of the pool: {'; '.join(self.pool.rejected[task_id])})"
                if task_id in self.pool.rejected
                else ""
            )
            raise ValueError(f"no task {task_id!r}{why}; the pool holds {self.pool.ids}")
        work = Path(world.location) / task_id
        statekit_task = task or Task(id=task_id, kind=task_id, prompt=spec.spec, max_steps=spec.max_steps)
        episode = CodeEpisode(spec, statekit_task, Workspace(work, self.max_output), self.sandbox.open(work))
        self._current = spec
        return episode

    def dump(self, world: World) -> StateDump:
        return StateDump(tables={TABLE: file_dump(world.location)})

    def digest(self, world: World, since: Digest | None = None) -> Digest:
        """A full recompute every time (``since`` is ignored): a world is a few dozen small files."""
        return self.dump(world).digest()

    def check_schema(self, world: World) -> list[str]:
        """Every entry of the world is digestible, and every top-level one is a pool task."""
        root = Path(world.location)
        problems = [
            f"{TABLE}.{p.name}: not a task of the pool"
            for p in sorted(root.iterdir())
            if p.name not in self.pool.tasks
        ]
        for path in sorted(root.rglob("*")):
            mode = path.lstat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
                problems.append(f"{TABLE}.{path.relative_to(root)}: a device, socket or pipe")
        return problems

    def task_kinds(self) -> list[str]:
        return self.pool.ids

    def reset_options(self) -> dict[str, dict[str, Any]]:
        """``task``: a task id, any string (``start_episode`` says why one is not in the pool)."""
        return {"task": {"type": "string", "description": "the id of the task to pose"}}

    def reference_actions(self, task: Task) -> list[dict[str, Any]]:
        spec = self.pool.tasks[task.kind]
        writes: list[dict[str, Any]] = [
            {"tool": "write_file", "path": path, "content": content}
            for path, content in sorted(spec.reference.items())
        ]
        return [*writes, {"tool": "run_tests"}, {"tool": "submit"}]

    def declared_tools(self) -> list[Tool]:
        return list(TOOLS)

    def observation_schema(self) -> dict[str, Any]:
        text, flag = {"type": "string"}, {"type": "boolean"}
        files = {"type": "array", "items": text}
        branches: list[dict[str, Any]] = [
            {"title": "start", "properties": {"task": text, "files": files}, "required": ["task", "files"]},
            {"title": "files", "properties": {"files": files, "truncated": flag}, "required": ["files"]},
            {
                "title": "file",
                "properties": {"path": text, "content": text, "truncated": flag},
                "required": ["path", "content"],
            },
            {
                "title": "written",
                "properties": {"path": text, "bytes": {"type": "integer"}},
                "required": ["path", "bytes"],
            },
            {
                "title": "test_run",
                "properties": {
                    "passed": flag,
                    "exit_code": {"type": ["integer", "null"]},
                    "timed_out": flag,
                    "stdout": text,
                    "stderr": text,
                    "signal": text,
                    "truncated": flag,
                },
                "required": ["passed", "exit_code", "timed_out", "stdout", "stderr"],
            },
            {"title": "submitted", "properties": {"submitted": {"const": True}}, "required": ["submitted"]},
        ]
        return {"anyOf": [{"type": "object", **branch} for branch in branches]}

    def fixture_sources(self) -> list[FixtureSource]:
        return [
            FixtureSource(
                name="coding tasks",
                origin="adapters/code_env/tasks (written for statekit: specs, starts, tests, references)",
                synthetic=True,
            )
        ]

    def cassettes(self) -> list[Path]:
        return []  # the sandbox has no network: nothing is recorded or replayed

    def shipped_images(self, strategy: str) -> list[str]:
        """The container sandbox's image (the pool need not be validated to read it)."""
        return [self.sandbox.describe()["image"]] if strategy == "container" else []

    def metadata(self) -> dict[str, Any]:
        """Versions, the sandbox's image digest, and the current task's metadata (source, creation
        date, difficulty), for a trainer to log with every episode."""
        body: dict[str, Any] = {
            **self.fingerprint(),
            "sandbox": self.sandbox_kind,
            "image": self.sandbox.describe()["image"],
        }
        if self._current is not None:
            spec = self._current
            body["task"] = {
                "id": spec.id,
                "category": spec.category,
                "scoring": spec.scoring,
                **spec.metadata,
            }
        return body

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()


__all__ = ["DEFENCES", "SANDBOXES", "VISIBLE_FILE", "CodeEnvAdapter", "CodeEpisode"]
