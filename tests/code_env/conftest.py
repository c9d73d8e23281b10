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
import statekit.kit
from statekit_examples.adapters.code_env import CodeEnvAdapter
from statekit_examples.adapters.code_env.sandbox.cgroups import MOUNTINFO, OWN_CGROUPS, locate
from statekit_examples.adapters.code_env.sandbox.owners import owner_tag
from statekit_examples.adapters.code_env.sandbox.slots import SLOTS, UID_BASE
from statekit_examples.adapters.code_env.tasks import TASKS_DIR

IN_CI = os.environ.get("CI") == "true"


def require_root() -> None:
    if os.geteuid() == 0:
        return
    if IN_CI:
        pytest.fail("CI runs as root: the process sandbox needs it (namespaces, mounts, uid switch)")
    pytest.skip("the process sandbox needs root (not in CI, so skipped)")


def require_docker() -> None:
    try:
        statekit.kit.docker_client()
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


def run_cgroups(owner: str | None = None) -> list[Path]:
    """Run cgroups of ``owner`` (an ``owner_tag``; this process by default) that exist right now:
    there should be none between runs."""
    prefix = (owner or owner_tag()).replace(":", "+") + "+"
    return [
        folder
        for hierarchy in locate(MOUNTINFO.read_text(), OWN_CGROUPS.read_text())
        if hierarchy.parent.is_dir()
        for folder in hierarchy.parent.iterdir()
        if folder.name.startswith(prefix)
    ]


MEMFD_BOMB = """
import os, time

def test_bomb():
    # Three processes fill 48 memfds that all of them hold (so one the kernel kills frees nothing),
    # MIB MiB each, and print what the files hold in all after each one: a file is written, never
    # mapped (no address space), and each stays under 16 MiB (the file-size limit).
    fds = [os.memfd_create(f"hog{n}") for n in range(48)]
    chunk = b"x" * (1 << 20)
    for child in range(3):
        if os.fork() == 0:
            try:
                for fd in fds[child * 16 : (child + 1) * 16]:
                    for _ in range(MIB):
                        os.write(fd, chunk)
                    print("held", sum(os.fstat(f).st_blocks for f in fds) * 512 >> 20, flush=True)
                time.sleep(1)
            finally:
                os._exit(0)
    for _ in range(3):
        os.wait()
"""
"""A visible test file; ``MIB`` is replaced by the MiB per memfd (at most 16)."""


def most_held(stdout: str) -> int:
    """The most memory (MiB) the bomb's processes reported holding at once."""
    return max((int(line.split()[1]) for line in stdout.splitlines() if line.startswith("held ")), default=0)


LINGERER = """
import ctypes, os, signal, time

def test_linger():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(15, b"lingerer", 0, 0, 0)  # PR_SET_NAME: findable in /proc
            for fd in range(3):
                os.close(fd)
            time.sleep(600)
        os._exit(0)
    time.sleep(0.2)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with open(f"/proc/{pid}/comm") as comm:
            if comm.read().strip() == "lingerer":
                print("lingerer running", flush=True)
    parent = os.getppid()
    with open(f"/proc/{parent}/stat") as stat:
        grandparent = int(stat.read().rsplit(")", 1)[1].split()[1])
    for pid in (grandparent, parent):  # the wrapper, outermost first, so nothing of it runs on
        if pid > 0:  # 0 would be this process group
            try:
                os.kill(pid, signal.SIGKILL)
                print("killed", pid, flush=True)
            except OSError as exc:
                print("could not kill", pid, exc.strerror, flush=True)
"""
"""A daemon that leaves its session and closes its output, then the run kills what wraps it (the
container layer's shell and ``timeout``; in the process layer its parent is PID 1, root's)."""
NO_LINGERER = """
import os

def test_no_lingerer():
    names = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as comm:
                names.append(comm.read().strip())
        except OSError:
            pass
    print("lingering" if "lingerer" in names else "no lingerer", flush=True)
"""


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
