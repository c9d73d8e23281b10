"""Which tasks may enter the pool: SWE-bench's rule, checked in the sandbox that will serve them.

For every task, in the sandbox the episodes will use:

1. the untouched start scores 0, ``REPEATS`` times;
2. the reference solution scores 1, ``REPEATS`` times (so its reward is identical every time: a
   flaky test, such as one that depends on set order with the hash seed unset, fails here);
3. trivial solutions score 0: the module under test with every function body replaced by
   ``return None``, ``return 0``, ``return ''``, ``return []``, ``return {}``, ``return True``,
   ``return False`` or ``return <first argument>``, or by ``raise`` of each exception the hidden
   cases expect (with their message, if any) and of ``ValueError``, so no policy collects reward
   without implementing anything (the checker's degenerate-policy probes rely on this);
4. forged answers score 0: a module that writes records on the answers' descriptor itself and exits
   before the runner can (claiming every call raised what some case expects, naming the classes in
   one string, numbering calls with lists, bools and strs), so the grader neither pays a forgery nor
   fails on one.

Each repeat runs with a different virtual time and seed, so a hidden test that depends on the
episode's clock or randomness without pinning them is caught too. A task failing any check never
enters the pool. Verdicts are cached under ``$STATEKIT_HOME/code_env/validation``, keyed by the
task's files, the sandbox's description (interpreter or image digest, limits) and this module's
version: a verdict holds only for the sandbox it was reached in.
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from statekit_examples.adapters.code_env.grader import grade
from statekit_examples.adapters.code_env.sandbox.base import AST_LOCK, Sandbox, SandboxSession
from statekit_examples.adapters.code_env.tasks import TaskSpec

log = logging.getLogger(__name__)
VALIDATOR_VERSION = "2"
REPEATS = 5
BASE_NOW = 1_736_154_000.0  # 2025-01-06T09:00:00Z
TRIVIAL_RETURNS = ("None", "0", "''", "[]", "{}", "True", "False", "FIRST_ARGUMENT")


@dataclass(frozen=True)
class Verdict:
    task_id: str
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class Pool:
    """The tasks that passed validation (by id), and why the others were refused."""

    tasks: dict[str, TaskSpec]
    rejected: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def ids(self) -> list[str]:
        return sorted(self.tasks)

    @property
    def digest(self) -> str:
        """Changes whenever an accepted task's files change (part of the world's fingerprint)."""
        body = json.dumps({t: self.tasks[t].digest for t in self.ids}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]


def validate_task(
    task: TaskSpec, session: SandboxSession, scratch: Path, *, repeats: int = REPEATS
) -> Verdict:
    """Run the four checks for one task in ``session``, whose working directory is ``scratch``."""
    problems: list[str] = []

    def rewards(files: Mapping[str, str], times: int) -> list[tuple[float, tuple[str, ...]]]:
        _materialise(scratch, files)
        out = []
        for run in range(times):
            result = session.run(task.hidden_job(now=BASE_NOW + run * 90_061.0, seed=run))
            verdict = grade(task, result)
            out.append((verdict.reward(task.scoring), verdict.failures))
        return out

    start = task.start_files(0)
    for reward, _ in rewards(start, repeats):
        if reward != 0.0:
            problems.append(f"the untouched start scores {reward}, expected 0")
            break
    reference = rewards({**start, **task.reference}, repeats)
    scores = [reward for reward, _ in reference]
    if any(score != 1.0 for score in scores):
        failing = next(failures for reward, failures in reference if reward != 1.0)
        problems.append(
            f"the reference scores {scores} over {repeats} runs, expected 1.0 each: {list(failing)}"
        )
    trivial = trivial_solutions(task)
    folders = {f"trivial{i}": files for i, files in enumerate(trivial.values())}
    _materialise(
        scratch,
        {
            f"{folder}/{path}": text
            for folder, files in folders.items()
            for path, text in {**start, **files}.items()
        },
    )
    result = session.run(task.hidden_job(now=BASE_NOW, seed=0, variants=list(folders)))
    for number, body in enumerate(trivial):  # one run tries them all: they are deterministic
        reward = grade(task, result, variant=number).reward(task.scoring)
        if reward != 0.0:
            behaviour = body if body.startswith("raise ") else f"returns {body}"
            problems.append(f"a trivial solution (every function {behaviour}) scores {reward}, expected 0")
    for name, files in forged_solutions(task).items():  # each ends its run: one run apiece
        _materialise(scratch, {**start, **files})
        reward = grade(task, session.run(task.hidden_job(now=BASE_NOW, seed=0))).reward(task.scoring)
        if reward != 0.0:
            problems.append(f"forged records ({name}) score {reward}, expected 0")
    return Verdict(task.id, tuple(problems))


def trivial_solutions(task: TaskSpec) -> dict[str, dict[str, str]]:
    """The module under test with every function body replaced by one trivial ``return`` or
    ``raise`` (keyed by the returned expression, or by the raise statement)."""
    path = f"{task.module}.py"
    out = {}
    with AST_LOCK:
        for body in (*TRIVIAL_RETURNS, *raising_bodies(task)):
            copy = ast.parse(task.start[path])
            for node in ast.walk(copy):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    node.body = [_trivial_statement(node, body)]
            out[body] = {path: ast.unparse(ast.fix_missing_locations(copy)) + "\n"}
    return out


def raising_bodies(task: TaskSpec) -> list[str]:
    """``raise`` of every exception the hidden cases expect, bare and with the expected message (the
    spec quotes it, so a policy can too), and of ``ValueError``: refusing whatever comes."""
    expected = {(s.raises, s.message) for case in task.cases for s in case.steps if s.raises}
    bodies = {f"raise {name}" for name, _ in expected} | {"raise ValueError"}
    bodies |= {f"raise {name}({message!r})" for name, message in expected if message is not None}
    return sorted(bodies)


def _trivial_statement(node: ast.FunctionDef | ast.AsyncFunctionDef, body: str) -> ast.stmt:
    if body.startswith("raise "):
        return ast.parse(body).body[0]  # in __init__ too: a class that refuses to be made
    if node.name == "__init__":
        return ast.Pass()
    if body == "FIRST_ARGUMENT":
        params = [*node.args.posonlyargs, *node.args.args]
        names = [p.arg for p in params if p.arg not in ("self", "cls")]
        return ast.Return(value=ast.Name(id=names[0], ctx=ast.Load()) if names else ast.Constant(None))
    return ast.Return(value=ast.parse(body, mode="eval").body)


_FORGER = "import os\nos.write(3, {data!r})\nos._exit(0)\n"


def forged_solutions(task: TaskSpec) -> dict[str, dict[str, str]]:
    """Modules that, on import, write records for every call of the hidden cases on the answers'
    descriptor (fd 3) and exit before the runner writes any: what a policy that read ``runner.py``
    could try without knowing the answers. Keyed by what they forge."""
    expected = sorted({(s.raises, s.message or "") for case in task.cases for s in case.steps if s.raises})
    names = [name for name, _ in expected] or ["ValueError"]
    message = expected[0][1] if expected else ""
    calls = [(c, s) for c, case in enumerate(task.cases) for s in range(len(case.steps))]
    forgeries: dict[str, list[dict[str, object]]] = {
        "every call raised every class a case expects": [
            {"case": c, "step": s, "raised": [*names, "Exception", "BaseException"], "message": message}
            for c, s in calls
        ],
        "the classes raised as one string": [
            {"case": c, "step": s, "raised": " ".join(names), "message": message} for c, s in calls
        ],
        "calls numbered with lists, bools and strings": [
            *({"case": [c], "step": s, "value": ["none"]} for c, s in calls),
            *({"case": bool(c), "step": str(s), "value": ["none"]} for c, s in calls),
        ],
    }
    path = f"{task.module}.py"
    return {
        name: {path: _FORGER.format(data="".join(f"{record!r}\n" for record in records).encode())}
        for name, records in forgeries.items()
    }


def _materialise(folder: Path, files: Mapping[str, str]) -> None:
    """Make ``folder`` hold exactly ``files`` (the folder itself stays: a session has it mounted)."""
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    write_tree(folder, files)


def write_tree(folder: Path, files: Mapping[str, str]) -> None:
    """Write ``files`` under ``folder``, world-readable (the sandbox's uid is not the owner)."""
    folder.chmod(0o755)
    for relative, content in sorted(files.items()):
        path = folder / relative
        for parent in reversed(path.relative_to(folder).parents[:-1]):
            (folder / parent).mkdir(mode=0o755, exist_ok=True)
            (folder / parent).chmod(0o755)
        path.write_text(content)
        path.chmod(0o644)


def validate_pool(
    tasks: Mapping[str, TaskSpec],
    sandbox: Sandbox,
    cache_dir: Path,
    *,
    workers: int | None = None,
    repeats: int = REPEATS,
    progress: Callable[[Verdict], None] | None = None,
) -> Pool:
    """Validate every task not yet validated for this sandbox (in ``workers`` sessions at once).

    Processes that validate the same cache at once (a harness's workers, starting together) take
    turns under a lock on it: the first validates, the others then find its verdicts cached."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _validate_pool(tasks, sandbox, cache_dir, workers=workers, repeats=repeats, progress=progress)


def _validate_pool(
    tasks: Mapping[str, TaskSpec],
    sandbox: Sandbox,
    cache_dir: Path,
    *,
    workers: int | None,
    repeats: int,
    progress: Callable[[Verdict], None] | None,
) -> Pool:
    identity = json.dumps(
        {**sandbox.describe(), "validator": VALIDATOR_VERSION, "repeats": repeats}, sort_keys=True
    )
    keys = {
        tid: hashlib.sha256(f"{identity}\n{t.digest}".encode()).hexdigest()[:32] for tid, t in tasks.items()
    }
    verdicts: dict[str, Verdict] = {}
    todo = []
    for task_id in sorted(tasks):
        cached = cache_dir / f"{keys[task_id]}.json"
        try:
            data = json.loads(cached.read_text())
            verdicts[task_id] = Verdict(task_id, tuple(data["problems"]))
        except (FileNotFoundError, ValueError, KeyError):
            todo.append(task_id)
    if todo:
        count = max(1, min(workers or os.cpu_count() or 1, len(todo)))
        shares = [todo[i::count] for i in range(count)]

        def work(share: list[str]) -> list[Verdict]:
            scratch = Path(tempfile.mkdtemp(prefix="validate-", dir=cache_dir))
            try:
                with sandbox.open(scratch) as session:
                    done = []
                    for task_id in share:
                        verdict = validate_task(tasks[task_id], session, scratch, repeats=repeats)
                        _store(cache_dir / f"{keys[task_id]}.json", verdict)
                        if progress:
                            progress(verdict)
                        done.append(verdict)
                    return done
            finally:
                shutil.rmtree(scratch, ignore_errors=True)

        with ThreadPoolExecutor(max_workers=count) as pool:
            for done in pool.map(work, shares):
                verdicts.update({v.task_id: v for v in done})
    rejected = {tid: v.problems for tid, v in verdicts.items() if not v.ok}
    for task_id, problems in sorted(rejected.items()):
        log.warning("task %r is left out of the pool: %s", task_id, "; ".join(problems))
    return Pool({tid: tasks[tid] for tid in sorted(tasks) if tid not in rejected}, rejected)


def _store(path: Path, verdict: Verdict) -> None:
    """Write atomically: another process may be validating the same task at the same moment."""
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"task": verdict.task_id, "problems": list(verdict.problems)}) + "\n")
    os.replace(tmp, path)
