"""The process sandbox (layer 1) for real: who the code runs as, what it sees, what it cannot reach."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import statekit
from adapters.code_env.sandbox import process
from adapters.code_env.sandbox.base import Job, Limits, RunResult, SandboxSession
from adapters.code_env.sandbox.process import ProcessSandbox
from adapters.code_env.sandbox.slots import SLOTS, UID_BASE
from adapters.code_env.tasks import TASKS_DIR

from .conftest import require_root, sandbox_processes

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
