"""Fixtures for the code environment: real sandboxes (root for the process layer, Docker for the
container layer), real task stores, no mocks.

The process sandbox needs root (namespaces, mounts, uid switching). CI runs as root, so there a
missing privilege fails; elsewhere those tests are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import statekit
from adapters.code_env import CodeEnvAdapter
from adapters.code_env.sandbox.slots import SLOTS, UID_BASE
from adapters.code_env.tasks import TASKS_DIR

IN_CI = os.environ.get("CI") == "true"


def require_root() -> None:
    if os.geteuid() == 0:
        return
    if IN_CI:
        pytest.fail("CI runs as root: the process sandbox needs it (namespaces, mounts, uid switch)")
    pytest.skip("the process sandbox needs root (not in CI, so skipped)")


def require_docker() -> None:
    try:
        statekit.docker_client()
    except statekit.ConfigError as exc:
        if IN_CI:
            pytest.fail(f"CI provides a Docker engine (scripts/docker-engine.sh): {exc}")
        pytest.skip(f"no Docker engine (not in CI, so skipped): {exc}")


@pytest.fixture(scope="module")
def code_env() -> Iterator[statekit.Environment]:
    """One subprocess-sandbox environment over the real pool, shared by a module's tests (every test
    resets it). Not longer: an open environment's egress guard covers the whole process."""
    require_root()
    with statekit.make("code_env") as env:
        yield env


@pytest.fixture(scope="module")
def adapter(code_env: statekit.Environment) -> CodeEnvAdapter:
    assert isinstance(code_env.adapter, CodeEnvAdapter)
    return code_env.adapter


@pytest.fixture
def short_env() -> Iterator[Callable[..., statekit.Environment]]:
    """Environments with a 3-second wall clock (for the bombs), closed after the test."""
    require_root()
    made: list[statekit.Environment] = []

    def make(**options: Any) -> statekit.Environment:
        limits = {"wall_seconds": 3.0, **options.pop("limits", {})}
        env = statekit.make("code_env", tasks=["median"], limits=limits, **options)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


@pytest.fixture
def task_store() -> Iterator[Callable[..., Path]]:
    """A task store of copies of real tasks, in a world-readable place the sandbox does not cover
    with its own tmpfs (``/run``), so only the mask can hide it. Removed after the test."""
    folders: list[Path] = []

    def make(*task_ids: str) -> Path:
        root = Path(
            tempfile.mkdtemp(prefix="statekit-test-tasks-", dir="/run" if os.geteuid() == 0 else None)
        )
        root.chmod(0o755)
        for task_id in task_ids:
            shutil.copytree(TASKS_DIR / task_id, root / task_id)
        for path in [root, *root.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        folders.append(root)
        return root

    yield make
    for root in folders:
        shutil.rmtree(root, ignore_errors=True)


def sandbox_processes() -> list[int]:
    """Pids running as any sandbox uid right now (there should be none between runs)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                uid = next(int(line.split()[1]) for line in status if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if UID_BASE <= uid < UID_BASE + SLOTS:
            found.append(int(entry))
    return found


def solve(env: statekit.Environment, seed: int, task: str) -> float:
    """Reset to ``task`` and play its reference script; the final reward."""
    env.reset(seed=seed, options={"task": task})
    reward = 0.0
    for action in env.adapter.reference_actions(env.task):
        _, reward, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    return reward


def submit_code(env: statekit.Environment, seed: int, task: str, code: str) -> tuple[float, dict[str, Any]]:
    """Reset to ``task``, write ``code`` as solution.py, run the visible tests, submit.
    Returns (reward, the run_tests observation)."""
    env.reset(seed=seed, options={"task": task})
    observation, *_ = env.step({"tool": "write_file", "path": "solution.py", "content": code})
    assert "error" not in observation, observation
    tests, *_ = env.step({"tool": "run_tests"})
    _, reward, terminated, truncated, _ = env.step({"tool": "submit"})
    assert terminated and not truncated
    return reward, tests
