"""Layer 1, the process sandbox: every run is a fresh process tree in its own namespaces, on this host.

Per run (``launch.py`` does the privileged part; see its docstring for the three processes):

- no network: a new network namespace holds only a loopback interface that is down;
- its own PID namespace: killing the launcher kills the whole tree, whatever it forked or ``setsid``-ed;
- its own cgroup (``cgroups.py``): memory, shared memory included, and tasks counted for the run as a
  whole; whatever is left in it after the run is killed, and the cgroup removed;
- its own mount namespace: a fresh ``/proc``, size-limited tmpfs for every world-writable directory,
  the hidden tests' store hidden under an empty tmpfs, and the working directory read-only at
  ``/tmp/work`` (the same path in every run and every layer, so tracebacks repeat);
- resource limits: CPU seconds, address space, processes, file size, open files; a wall-clock
  timeout enforced from outside (``SIGKILL`` to the launcher's process group);
- an unprivileged uid of its own (``slots.py``), no supplementary groups, a scrubbed environment with
  ``PYTHONHASHSEED`` fixed, address-space randomisation off, ``no_new_privs``, and no new user
  namespaces (a seccomp filter).

It needs root: creating namespaces and cgroups, mounting and switching uid are privileged. Without
root, or where no cgroup can be made (a read-only ``/sys/fs/cgroup``), ``ProcessSandbox`` refuses to
start (``ConfigError``) rather than run untrusted code less isolated than promised; use
``strategy="container"`` instead. What it does not stop: reading world-readable files of the host
outside the masked paths (the container layer does).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import selectors
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from statekit import ConfigError
from statekit_examples.adapters.code_env.sandbox import launch, runner
from statekit_examples.adapters.code_env.sandbox.base import (
    BoundedBuffer,
    Job,
    Limits,
    RunResult,
    Sandbox,
    SandboxError,
    SandboxSession,
    parse_records,
    sandbox_environment,
)
from statekit_examples.adapters.code_env.sandbox.cgroups import RunCgroup, RunCgroups
from statekit_examples.adapters.code_env.sandbox.runner import PYTHON_FLAGS, RUNNER_PATH
from statekit_examples.adapters.code_env.sandbox.slots import Lease, UidSlots

DEFAULT_PYTHON = "/usr/bin/python3"
"""The interpreter the model's code runs on: the system's, outside any 0700 home directory."""
KILL_GRACE = 5.0
"""After the kill, how long the pipes may take to close (the namespace's teardown)."""
LAUNCHER = Path(launch.__file__)
RUNNER_SOURCE = Path(runner.__file__).read_text()


class ProcessSandbox(Sandbox):
    """Runs each job in a fresh namespaced process tree as a borrowed unprivileged uid (root only)."""

    kind = "subprocess"

    def __init__(
        self,
        limits: Limits,
        *,
        python: str = DEFAULT_PYTHON,
        masked: tuple[Path, ...] = (),
        disabled: frozenset[str] = frozenset(),
        slots: UidSlots | None = None,
    ) -> None:
        if os.geteuid() != 0:
            raise ConfigError(
                "the subprocess sandbox needs root: it creates network, mount and PID namespaces and "
                "runs the model's code as an unprivileged uid. Run as root, or use strategy='container' "
                "(a Docker engine); statekit never runs untrusted code without isolation."
            )
        if not os.access(python, os.X_OK):
            raise ConfigError(
                f"the sandbox's Python {python!r} is not an executable file; pass python=PATH (a "
                "Python >= 3.11 outside any home directory, e.g. /usr/bin/python3 from python3-minimal)"
            )
        if "userns" not in disabled and os.uname().machine not in launch.SYSCALLS:
            raise ConfigError(
                f"the subprocess sandbox cannot switch off user namespaces on {os.uname().machine} "
                f"(its seccomp filter knows {sorted(launch.SYSCALLS)}); use strategy='container'"
            )
        self.limits = limits
        self.python = python
        self.masked = tuple(str(Path(p).resolve()) for p in masked)
        self.disabled = disabled
        self.slots = slots or UidSlots()
        self.cgroups = None if "cgroup" in disabled else _run_cgroups(limits)
        self._identity = _interpreter_identity(python)
        self.runner_pyc, prefixes = _compile_runner(python)
        """The runner compiled once by the sandbox's own interpreter (bytecode is version-specific):
        compiling its source on every run would cost more than the run's own work on small tasks."""
        self.keep = sorted({Path(p).parts[1] for p in prefixes if len(Path(p).parts) > 1})
        """Top-level directories the interpreter needs besides the system's (e.g. ``opt``)."""

    def open(self, work_dir: Path) -> ProcessSession:
        return ProcessSession(self, Path(work_dir))

    def describe(self) -> dict[str, str]:
        return {
            "sandbox": self.kind,
            "image": self._identity,
            "limits": json.dumps(self.limits.as_dict(), sort_keys=True),
            "disabled_defences": ",".join(sorted(self.disabled)),
        }


class ProcessSession(SandboxSession):
    """Nothing to hold between runs: every run builds and tears down its own namespaces."""

    def __init__(self, sandbox: ProcessSandbox, work_dir: Path) -> None:
        self.sandbox = sandbox
        self.work_dir = work_dir

    def run(self, job: Job) -> RunResult:
        box = self.sandbox
        with box.slots.borrow() as lease:
            cgroup = box.cgroups.create() if box.cgroups is not None else None
            try:
                return self._run(job, lease, cgroup)
            finally:
                if cgroup is not None and not cgroup.close():
                    lease.killed = True  # something of the run is still alive: its uid waits for it

    def _run(self, job: Job, lease: Lease, cgroup: RunCgroup | None) -> RunResult:
        box = self.sandbox
        records_r, records_w = os.pipe()
        error_r, error_w = os.pipe()
        try:
            config: dict[str, Any] = {
                "work_dir": str(self.work_dir),
                "uid": lease.uid,
                "host_pid": os.getpid(),
                "cgroup_procs": cgroup.procs if cgroup is not None else [],
                "records_fd": records_w,
                "error_fd": error_w,
                "limits": box.limits.rlimits(),
                "scratch_bytes": box.limits.scratch_bytes,
                "masked": [] if "mask" in box.disabled else list(box.masked),
                "hide_the_rest": "mask" not in box.disabled,
                "keep": box.keep,
                "network_namespace": "network" not in box.disabled,
                "block_user_namespaces": "userns" not in box.disabled,
                "no_aslr": True,
                "env": sandbox_environment(box.disabled),
                "runner_pyc": box.runner_pyc,
                "argv": [box.python, *PYTHON_FLAGS, launch.RUNNER, job.encoded(box.limits)],
            }
            started = time.monotonic()
            try:
                proc = subprocess.Popen(
                    [box.python, "-I", "-S", str(LAUNCHER)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=(records_w, error_w),
                    start_new_session=True,  # its own process group: the timeout kills all of it
                    env={"PATH": "/usr/bin:/bin"},
                )
            finally:  # only the launcher holds the write ends now: EOF means the run is over
                os.close(records_w)
                os.close(error_w)
            assert proc.stdin is not None
            with contextlib.suppress(BrokenPipeError):  # a launcher that died at once says why below
                proc.stdin.write(marshal.dumps(config, 4))
            proc.stdin.close()
            out, err = BoundedBuffer(box.limits.output_bytes), BoundedBuffer(box.limits.output_bytes)
            records, failure = BoundedBuffer(box.limits.records_bytes), BoundedBuffer(64 * 1024)
            assert proc.stdout is not None and proc.stderr is not None
            streams = {
                proc.stdout.fileno(): out,
                proc.stderr.fileno(): err,
                records_r: records,
                error_r: failure,
            }
            with proc:  # closes stdout/stderr and waits, whatever happens
                try:
                    timed_out = _drain(streams, proc.pid, box.limits.wall_seconds)
                except BaseException:
                    _kill(proc.pid)
                    lease.killed = True
                    raise
            lease.killed = timed_out
        finally:
            os.close(records_r)
            os.close(error_r)
        if failure.size and proc.returncode == launch.LAUNCH_FAILED:
            raise SandboxError(f"the process sandbox could not start the run: {failure.text()}")
        exit_code, signal_name = _status(proc.returncode, timed_out)
        return RunResult(
            exit_code=exit_code,
            signal=signal_name,
            timed_out=timed_out,
            stdout=out.text(),
            stderr=err.text(),
            truncated=out.truncated or err.truncated,
            records=parse_records(records.data()),
            seconds=time.monotonic() - started,
        )


def _run_cgroups(limits: Limits) -> RunCgroups:
    try:
        return RunCgroups(limits)
    except SandboxError as exc:
        raise ConfigError(
            f"the subprocess sandbox holds each run's memory and processes in a cgroup of its own and "
            f"cannot make one here: {exc}. It needs the memory and pids controllers (cgroup v2 at "
            "/sys/fs/cgroup with both enabled, or v1 hierarchies) on a writable cgroup filesystem "
            "(a container's /sys/fs/cgroup is often read-only); or use strategy='container'."
        ) from exc


def _kill(pid: int) -> None:
    """SIGKILL the launcher's process group; PID 1 of the run follows it (``PR_SET_PDEATHSIG``)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _drain(streams: dict[int, BoundedBuffer], pid: int, wall: float) -> bool:
    """Read every stream to its end; past ``wall`` seconds kill the run. Returns whether it timed out."""
    selector = selectors.DefaultSelector()
    for fd in streams:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + wall
    timed_out = False
    try:
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if timed_out:  # killed, yet something still holds a pipe: stop waiting for it
                    break
                timed_out = True
                _kill(pid)
                deadline = time.monotonic() + KILL_GRACE
                continue
            for key, _ in selector.select(remaining):
                fd = int(key.fd)
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if chunk:
                    streams[fd].add(chunk)
                else:
                    selector.unregister(fd)
    finally:
        selector.close()
    return timed_out


def _status(returncode: int, timed_out: bool) -> tuple[int | None, str | None]:
    """(exit code, signal name): the launcher exits ``128 + N`` when the run died of signal N."""
    if timed_out or returncode < 0:
        return None, "SIGKILL"
    if returncode > 128:
        try:
            return None, signal.Signals(returncode - 128).name
        except ValueError:
            return returncode, None
    return returncode, None


def _compile_runner(python: str) -> tuple[bytes, list[str]]:
    """The runner as a ``.pyc``, compiled by ``python`` itself (bytecode is version-specific), and that
    interpreter's prefixes (its standard library must stay visible in the sandbox)."""
    with tempfile.TemporaryDirectory(prefix="statekit-runner-") as tmp:
        source, compiled = Path(tmp) / "runner.py", Path(tmp) / "runner.pyc"
        source.write_text(RUNNER_SOURCE)
        done = subprocess.run(
            [
                python,
                "-I",
                "-S",
                "-c",
                "import py_compile,sys;"
                f"py_compile.compile({str(source)!r}, cfile={str(compiled)!r}, dfile={RUNNER_PATH!r},"
                "doraise=True);print(sys.prefix);print(sys.base_prefix);print(sys.exec_prefix)",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise ConfigError(
                f"{python} could not compile the sandbox runner (Python >= 3.11 needed): {done.stderr[-500:]}"
            )
        return compiled.read_bytes(), done.stdout.split()


def _interpreter_identity(python: str) -> str:
    """The 'image' of this layer: the interpreter's real path and the SHA-256 of its binary."""
    real = os.path.realpath(python)
    with open(real, "rb") as binary:
        digest = hashlib.file_digest(binary, "sha256").hexdigest()
    return f"{real}@sha256:{digest}"
