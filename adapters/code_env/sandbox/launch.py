"""The process sandbox's launcher: a separate program, run as root, that starts one sandboxed run.

Usage: ``python -I -S launch.py < CONFIG`` where CONFIG is ``marshal``-ed plain data written by the
host on stdin (not in ``argv``, whose size the kernel caps); standard library only, and as few imports
as possible: it starts once per run. It is its own
program rather than a ``preexec_fn`` because it forks and mounts: doing that in a copy of a
multi-threaded host process is unsafe. Three processes result:

1. the launcher: ``unshare``\\ s new mount, network, PID, IPC and UTS namespaces, forks, waits, and exits
   with the run's status (``128 + N`` for a signal). If it dies, its child gets ``SIGKILL``
   (``PR_SET_PDEATHSIG``), so killing the launcher kills the run: that is how the host enforces the
   wall clock.
2. PID 1 of the new PID namespace (still root): mounts a fresh ``/proc``; hides every top-level
   directory but the system's own (``/usr``, ``/etc``, ``/dev``, ... and the interpreter's prefix)
   under an empty read-only tmpfs, and every top-level file under ``/dev/null``, so home directories,
   checkouts, ``/var``, ``/run`` and ``/srv`` are simply not there; mounts empty read-only tmpfs over
   every masked path left visible (the hidden tests' store, when it lives in a system directory),
   size-limited tmpfs over ``/tmp`` and ``/dev/shm`` (the only writable places), and the working
   directory read-only at ``/tmp/work``; forks the model's process, reaps, and exits with its status.
   When PID 1 exits the kernel kills everything left in the namespace, so a fork bomb or a daemon
   dies with it.
3. the model's process: sets resource limits, drops to the run's own unprivileged uid (no groups),
   disables address-space randomisation (so ``repr`` addresses repeat), and ``exec``\\ s Python.

A failure before ``exec`` is written to the error descriptor (close-on-exec, so the model's code can
never write there) and the launcher exits 125.
"""

from __future__ import annotations

import ctypes
import fcntl
import marshal
import os
import resource
import signal
import sys
from typing import Any, NoReturn

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
ADDR_NO_RANDOMIZE = 0x0040000
SCRATCH = ("/tmp", "/dev/shm")
SYSTEM = ("bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr")
"""Top-level directories a run keeps (plus the interpreter's prefix); everything else is hidden."""
WORK = "/tmp/work"
RUNNER = "/tmp/.statekit/runner.pyc"
RECORDS_FD = 3
LAUNCH_FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)

RLIMITS = {
    "cpu_seconds": resource.RLIMIT_CPU,
    "memory_bytes": resource.RLIMIT_AS,
    "processes": resource.RLIMIT_NPROC,
    "file_bytes": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
}


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _prepare_filesystem(config: dict[str, Any], work_fd: int) -> None:
    _mount("none", "/", None, MS_REC | MS_PRIVATE)  # nothing we mount leaks back to the host
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    keep = set(SYSTEM) | set(config["keep"])
    for name in sorted(os.listdir("/")) if config["hide_the_rest"] else []:
        path = "/" + name
        if name in keep or os.path.islink(path):  # /bin -> usr/bin: masking it would mask /usr/bin
            continue
        if os.path.isdir(path):
            _hide(path)
        elif os.path.isfile(path):
            _mount("/dev/null", path, None, MS_BIND)
    for path in config["masked"]:
        if os.path.isdir(path):
            _hide(path)
    size = int(config["scratch_bytes"])
    for path in SCRATCH:
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    os.mkdir(os.path.dirname(RUNNER), 0o755)  # root's, in sticky /tmp: the model cannot replace it
    with open(RUNNER, "wb") as out:
        out.write(config["runner_pyc"])
    os.chmod(RUNNER, 0o444)
    os.mkdir(WORK, 0o755)
    _mount(f"/proc/self/fd/{work_fd}", WORK, None, MS_BIND | MS_REC)
    _mount("none", WORK, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _hide(path: str) -> None:
    """An empty, read-only directory where ``path`` was (in this mount namespace only)."""
    _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")


def _become_the_model(config: dict[str, Any]) -> None:
    """Limits, identity, then exec: never returns."""
    for name, value in sorted(config["limits"].items()):
        which = RLIMITS[name]
        soft = int(value)
        hard = soft + 1 if which == resource.RLIMIT_CPU else soft  # SIGXCPU first, then SIGKILL
        resource.setrlimit(which, (soft, hard))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    uid = int(config["uid"])
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if config["no_aslr"]:
        _libc.personality(ADDR_NO_RANDOMIZE)
    os.chdir(WORK)
    argv = [str(a) for a in config["argv"]]
    os.execve(argv[0], argv, {str(k): str(v) for k, v in config["env"].items()})


def _namespace_init(config: dict[str, Any], work_fd: int, error_fd: int) -> int:
    """PID 1: set up the filesystem, run the model's process, reap, and return its wait status."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    _check(_libc.sethostname(b"sandbox", 7), "sethostname")
    _prepare_filesystem(config, work_fd)
    os.close(work_fd)
    child = os.fork()
    if child == 0:
        try:
            _become_the_model(config)
        except BaseException as exc:
            _fail(error_fd, f"starting the sandboxed program failed: {exc}")
    os.close(RECORDS_FD)  # only the model's process writes records
    while True:  # PID 1 reaps orphans until the model's process is done
        pid, status = os.wait()
        if pid == child:
            return status


def _fail(error_fd: int, message: str) -> NoReturn:
    try:
        os.write(error_fd, message.encode(errors="replace"))
    finally:
        os._exit(LAUNCH_FAILED)


def main() -> int:
    config = marshal.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the model's stdin is empty, never the host's pipe
    os.close(null)
    # Park both descriptors high first, so putting the records on fd 3 cannot clobber either.
    error_fd = fcntl.fcntl(int(config["error_fd"]), fcntl.F_DUPFD_CLOEXEC, 10)  # gone at exec
    records = fcntl.fcntl(int(config["records_fd"]), fcntl.F_DUPFD, 10)
    for fd in {int(config["error_fd"]), int(config["records_fd"])}:
        os.close(fd)
    os.dup2(records, RECORDS_FD)
    os.close(records)
    try:
        flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
        if config["network_namespace"]:
            flags |= CLONE_NEWNET
        _check(_libc.unshare(flags), "unshare")
        # Opened after unshare: a bind mount's source must belong to the new mount namespace.
        work_fd = os.open(config["work_dir"], os.O_PATH | os.O_DIRECTORY)
    except BaseException as exc:
        _fail(error_fd, f"creating the sandbox's namespaces failed: {exc}")
    child = os.fork()
    if child == 0:
        try:
            status = _namespace_init(config, work_fd, error_fd)
        except BaseException as exc:
            _fail(error_fd, f"preparing the sandbox failed: {exc}")
        os._exit(
            os.waitstatus_to_exitcode(status) % 256 if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        )
    os.close(work_fd)
    os.close(RECORDS_FD)
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main())
