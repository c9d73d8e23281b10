"""The process sandbox (layer 1) for real: who the code runs as, what it sees, what it cannot reach."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import statekit
from statekit_examples.adapters.code_env.sandbox import launch, process
from statekit_examples.adapters.code_env.sandbox.base import Job, Limits, MiB, RunResult, SandboxSession
from statekit_examples.adapters.code_env.sandbox.cgroups import MOUNTINFO, locate
from statekit_examples.adapters.code_env.sandbox.owners import owner_tag
from statekit_examples.adapters.code_env.sandbox.process import ProcessSandbox
from statekit_examples.adapters.code_env.sandbox.slots import SLOTS, UID_BASE
from statekit_examples.adapters.code_env.tasks import TASKS_DIR

from .conftest import LINGERER, MEMFD_BOMB, most_held, require_root, run_cgroups, sandbox_processes

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import os, socket, sys, time, random, uuid, datetime

def test_probe():
    print("uid", os.getuid(), os.geteuid(), "groups", os.getgroups())
    print("env", sorted(os.environ))
    print("hashseed", os.environ.get("PYTHONHASHSEED"), "hostname", socket.gethostname())
    print("cwd", os.getcwd(), "pid", os.getpid())
    print("now", time.time(), datetime.datetime.now().isoformat(), datetime.date.today())
    print("random", random.random(), uuid.uuid4())
    print("object", object())
    print("set order", list({"pear", "apple", "fig", "kiwi", "plum"}))
    print("tasks dir", os.path.exists(TASKS))
    top = ("root", "home", "var", "run", "work")
    print("top", {d: os.listdir("/" + d) for d in top if os.path.isdir("/" + d)})
    for probe in (lambda: open("written.txt", "w"), lambda: socket.create_connection(("127.0.0.1", PORT), 2)):
        try:
            probe()
            print("ALLOWED")
        except OSError as exc:
            print("refused", type(exc).__name__, exc.errno)
"""


@pytest.fixture
def session(tmp_path: Path) -> Iterator[SandboxSession]:
    require_root()
    tmp_path.chmod(0o755)
    box = ProcessSandbox(Limits(wall_seconds=5), masked=(TASKS_DIR,))
    with box.open(tmp_path) as opened:
        yield opened


def _visible(session: SandboxSession, folder: Path, code: str, *, seed: int = 1) -> RunResult:
    (folder / "test_probe.py").write_text(code)
    (folder / "test_probe.py").chmod(0o644)
    return session.run(Job("visible", now=1_700_000_000.0, seed=seed))


def test_what_the_model_code_sees(session: SandboxSession, tmp_path: Path) -> None:
    os.environ["STATEKIT_TEST_SECRET"] = "leak"
    with socket.create_server(("127.0.0.1", 0)) as listener:
        code = PROBE.replace("TASKS", repr(str(TASKS_DIR))).replace("PORT", str(listener.getsockname()[1]))
        result = _visible(session, tmp_path, code)
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing from the sandbox ever arrived
    out = result.stdout
    assert result.exit_code == 0, result
    uid = int(out.split("uid ")[1].split()[0])
    assert UID_BASE <= uid < UID_BASE + SLOTS and f"uid {uid} {uid} groups []" in out
    assert "STATEKIT_TEST_SECRET" not in out and "'PATH'" in out
    assert "hashseed 0 hostname sandbox" in out
    assert "cwd /tmp/work pid 2" in out  # its own PID namespace (PID 1 is the sandbox's init)
    assert "now 1700000000.0 2023-11-14T22:13:20 2023-11-14" in out
    assert "tasks dir False" in out  # the checkout's directory is not there at all
    top = out.split("top ")[1].splitlines()[0]
    assert top.count("[]") == top.count(":") and "'root': []" in top  # homes, /var, /run: empty
    assert out.count("refused") == 2 and "ALLOWED" not in out
    assert "refused OSError 30" in out  # read-only working directory (EROFS)
    assert "refused OSError 101" in out  # no network (ENETUNREACH)
    assert not (tmp_path / "written.txt").exists()


def test_the_same_seed_repeats_the_output_exactly(session: SandboxSession, tmp_path: Path) -> None:
    code = PROBE.replace("TASKS", repr("/nonexistent")).replace("PORT", "9")
    first, second = _visible(session, tmp_path, code), _visible(session, tmp_path, code)
    other = _visible(session, tmp_path, code, seed=2)
    strip = lambda text: "\n".join(line for line in text.splitlines() if not line.startswith("uid"))  # noqa: E731
    assert strip(first.stdout) == strip(second.stdout)  # time, random, uuid, object addresses, set order
    assert strip(first.stdout) != strip(other.stdout)


def test_a_store_inside_a_system_directory_is_masked(tmp_path: Path) -> None:
    """System directories stay visible (the interpreter lives there), so a task store installed in
    one is hidden by its own mask; a sibling without one is readable, which shows the mask at work."""
    require_root()
    stores = [Path(tempfile.mkdtemp(prefix="statekit-test-", dir="/usr/local/share")) for _ in range(2)]
    try:
        for store in stores:
            store.chmod(0o755)
            shutil.copy(TASKS_DIR / "median" / "hidden_tests.py", store / "hidden_tests.py")
            (store / "hidden_tests.py").chmod(0o644)
        tmp_path.chmod(0o755)
        box = ProcessSandbox(Limits(wall_seconds=5), masked=(stores[0],))
        code = "def test_read():\n"
        for store in stores:
            code += f"    print(os.path.exists({str(store / 'hidden_tests.py')!r}))\n"
        result = _visible(box.open(tmp_path), tmp_path, "import os\n" + code)
        assert result.stdout.splitlines()[:2] == ["False", "True"], result
    finally:
        for store in stores:
            shutil.rmtree(store)


def test_without_root_the_process_sandbox_refuses_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process.os, "geteuid", lambda: 1000)
    with pytest.raises(statekit.ConfigError, match=r"needs root.*strategy='container'"):
        ProcessSandbox(Limits())


def test_a_missing_interpreter_is_a_config_error() -> None:
    require_root()
    with pytest.raises(statekit.ConfigError, match="not an executable file"):
        ProcessSandbox(Limits(), python="/nonexistent/python3")


def test_limits_are_checked() -> None:
    with pytest.raises(statekit.ConfigError, match="unknown sandbox limit"):
        Limits.from_options({"wall_secs": 1})
    with pytest.raises(statekit.ConfigError, match="positive number"):
        Limits.from_options({"wall_seconds": 0})


def test_no_sandbox_process_outlives_its_run(session: SandboxSession, tmp_path: Path) -> None:
    code = "import os, time\ndef test_daemon():\n    if os.fork() == 0:\n        os.setsid()\n"
    code += "        time.sleep(60)\n"
    result = _visible(session, tmp_path, code)
    assert result.exit_code == 0
    assert sandbox_processes() == []


def _until(predicate: Callable[[], bool], seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _processes_in(folder: Path) -> list[str]:
    try:
        return (folder / "cgroup.procs").read_text().split()
    except FileNotFoundError:
        return []


@pytest.mark.parametrize("defended", [True, False], ids=["cgroup", "cgroup_removed"])
def test_a_memfd_bomb_is_held_by_the_runs_cgroup(tmp_path: Path, defended: bool) -> None:
    """Three processes, each within every per-process limit, write 384 MiB of memfds against a
    256 MiB limit: without the run's cgroup they hold all of it (the attack held 3.9 GB so)."""
    require_root()
    tmp_path.chmod(0o755)
    disabled = frozenset() if defended else frozenset({"cgroup"})
    box = ProcessSandbox(Limits(wall_seconds=10, memory_bytes=256 * MiB), disabled=disabled)
    result = _visible(box.open(tmp_path), tmp_path, MEMFD_BOMB.replace("MIB", "8"))
    if defended:
        assert 0 < most_held(result.stdout) < 256, result  # the kernel killed what it had to
    else:
        assert most_held(result.stdout) == 384 and result.exit_code == 0, result
    assert sandbox_processes() == [] and run_cgroups() == []


def test_a_daemon_that_tries_to_kill_its_wrapper_dies_with_its_run(
    session: SandboxSession, tmp_path: Path
) -> None:
    """What wraps the model's process here (PID 1, the launcher) is root's; the daemon, alive when
    the run ends, is gone with the run's PID namespace and cgroup."""
    result = _visible(session, tmp_path, LINGERER)
    assert result.exit_code == 0 and "lingerer running" in result.stdout, result
    assert "could not kill 1 Operation not permitted" in result.stdout
    assert sandbox_processes() == [] and run_cgroups() == []


USER_NAMESPACES = """
import ctypes, os, threading

def test_user_namespaces():
    libc = ctypes.CDLL(None, use_errno=True)
    child = libc.syscall(CLONE, 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD
    if child == 0:
        os._exit(0)
    print("clone", -ctypes.get_errno() if child < 0 else "made", flush=True)
    if child > 0:
        os.waitpid(child, 0)
    print("clone3", -ctypes.get_errno() if libc.syscall(CLONE3, 0, 0) < 0 else "made", flush=True)
    print("unshare", -ctypes.get_errno() if libc.unshare(0x10000000) < 0 else "made", flush=True)
    thread = threading.Thread(target=lambda: print("a thread runs", flush=True))
    thread.start()
    thread.join()
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    print("a fork exits", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


@pytest.mark.parametrize("defended", [True, False], ids=["userns_off", "userns_filter_removed"])
def test_no_user_namespace_can_be_made_in_the_sandbox(tmp_path: Path, defended: bool) -> None:
    """Root in a user namespace of its own would open the kernel's namespace code to the model: clone
    and unshare with CLONE_NEWUSER are refused (EPERM), clone3 is unknown (ENOSYS: glibc falls back
    to clone for threads and forks, which still work)."""
    require_root()
    tmp_path.chmod(0o755)
    _, clone, _, clone3 = launch.SYSCALLS[os.uname().machine]
    code = USER_NAMESPACES.replace("CLONE3", str(clone3)).replace("CLONE", str(clone))
    disabled = frozenset() if defended else frozenset({"userns"})
    result = _visible(
        ProcessSandbox(Limits(wall_seconds=5), disabled=disabled).open(tmp_path), tmp_path, code
    )
    assert result.exit_code == 0, result
    assert "a thread runs" in result.stdout and "a fork exits 7" in result.stdout
    if defended:
        assert "clone -1\n" in result.stdout and "unshare -1\n" in result.stdout  # EPERM
        assert "clone3 -38\n" in result.stdout  # ENOSYS
    else:  # the exploit is real: an unprivileged uid in the sandbox makes user namespaces
        assert "clone made" in result.stdout and "unshare made" in result.stdout


READ_ONLY_CGROUPS = """
import tempfile
from pathlib import Path
import statekit
from statekit_examples.adapters.code_env.sandbox.base import Job, Limits
from statekit_examples.adapters.code_env.sandbox.process import ProcessSandbox
try:
    ProcessSandbox(Limits())
    print("started")
except statekit.ConfigError as exc:
    print("refused:", exc)
work = Path(tempfile.mkdtemp())
work.chmod(0o755)
(work / "test_ok.py").write_text("def test_ok():\\n    pass\\n")
(work / "test_ok.py").chmod(0o644)
box = ProcessSandbox(Limits(), disabled=frozenset({"cgroup"}))
print("without a cgroup the run exits", box.open(work).run(Job("visible", now=0.0, seed=0)).exit_code)
"""


def test_without_a_writable_cgroup_filesystem_the_sandbox_refuses_to_start() -> None:
    """In a mount namespace of its own whose cgroup filesystems are read-only (as in many
    containers) and where the sandbox otherwise works, making one is a ConfigError saying why,
    never a run without the limits."""
    require_root()
    mounts = " ".join(str(hierarchy.mount) for hierarchy in locate(MOUNTINFO.read_text()))
    remount = 'for m in $MOUNTS; do mount -o remount,bind,ro "$m" || exit 1; done; exec "$@"'
    python = [sys.executable, "-c", READ_ONLY_CGROUPS]
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", remount, "sh", *python],
        cwd=REPO,
        env={**os.environ, "MOUNTS": mounts},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "refused: the subprocess sandbox holds each run's memory and processes in a cgroup" in done.stdout
    assert "Read-only file system" in done.stdout and "strategy='container'" in done.stdout
    assert "without a cgroup the run exits 0" in done.stdout  # what the ConfigError protects from


def test_no_run_cgroup_outlives_a_run_that_was_killed(session: SandboxSession, tmp_path: Path) -> None:
    result = _visible(session, tmp_path, "def test_loop():\n    while True:\n        pass\n")
    assert result.timed_out
    assert sandbox_processes() == [] and run_cgroups() == []


KILLED_HOST = """
import sys
from pathlib import Path
from statekit_examples.adapters.code_env.sandbox.base import Job, Limits
from statekit_examples.adapters.code_env.sandbox.process import ProcessSandbox
ProcessSandbox(Limits(wall_seconds=120)).open(Path(sys.argv[1])).run(Job("visible", now=0.0, seed=0))
"""


def test_a_killed_hosts_run_dies_with_it_and_the_next_sandbox_removes_its_cgroup(tmp_path: Path) -> None:
    require_root()
    tmp_path.chmod(0o755)
    (tmp_path / "test_sleep.py").write_text("import time\ndef test_sleep():\n    time.sleep(600)\n")
    (tmp_path / "test_sleep.py").chmod(0o644)
    host = subprocess.Popen([sys.executable, "-c", KILLED_HOST, str(tmp_path)], cwd=REPO)
    try:
        owner = owner_tag(host.pid)
        started = _until(lambda: any(_processes_in(folder) for folder in run_cgroups(owner)))
        assert started, "the run never started"
    finally:
        host.kill()
        host.wait()
    left = run_cgroups(owner)
    # the launcher, PID 1 and the model's process died with the host (each one's PR_SET_PDEATHSIG)
    assert _until(lambda: not any(_processes_in(folder) for folder in left), 5.0)
    assert left and all(folder.is_dir() for folder in left)  # nobody was left to remove its cgroup
    swept = ProcessSandbox(Limits()).cgroups.swept  # type: ignore[union-attr]
    assert run_cgroups(owner) == [] and {str(folder) for folder in left} <= set(swept)


def test_v1_run_cgroups_go_under_the_hosts_own_cgroup_relative_to_what_is_mounted() -> None:
    """In a container the v1 mount shows ``/docker/ID`` of the hierarchy, and the host's cgroup is
    under it: the run cgroups go there (counted where the host is), v2's at its root."""
    mountinfo = (
        "30 1 0:1 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "31 1 0:2 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
    )
    memory, pids = locate(mountinfo, "5:memory:/docker/abc/job\n4:pids:/slice\n")
    assert memory.parent == Path("/sys/fs/cgroup/memory/job/statekit-sandbox")
    assert pids.parent == Path("/sys/fs/cgroup/pids/slice/statekit-sandbox")
