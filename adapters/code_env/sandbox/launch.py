"""The process sandbox's launcher: a separate program, run as root, that starts one sandboxed run.

Usage: ``python -I -S launch.py < CONFIG`` where CONFIG is ``marshal``-ed plain data written by the
host on stdin (not in ``argv``, whose size the kernel caps); standard library only, and as few imports
as possible: it starts once per run. It is its own
program rather than a ``preexec_fn`` because it forks and mounts: doing that in a copy of a
multi-threaded host process is unsafe. Three processes result:

1. the launcher: dies with the host (``PR_SET_PDEATHSIG``), joins the run's cgroup (``cgroups.py``:
   memory and tasks counted for the run as a whole, from here on), ``unshare``\\ s new mount,
   network, PID, IPC, UTS and cgroup namespaces (the run's cgroup is its root), forks, waits, and
   exits with the run's status (``128 + N`` for a signal). If it dies, its child gets ``SIGKILL``
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
   disables address-space randomisation (so ``repr`` addresses repeat), sets ``no_new_privs`` (no
   setuid program raises it again) and a seccomp filter that refuses new user namespaces (in which
   it would be root, and the kernel's namespace code is a wide door), and ``exec``\\ s Python.

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
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
CLONE_NEWUSER = 0x10000000
SYSCALLS = {"x86_64": (0xC000003E, 56, 272, 435), "aarch64": (0xC00000B7, 220, 97, 435)}
"""Per machine: the seccomp audit architecture, and the numbers of clone, unshare and clone3."""
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


class _Instruction(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Instruction))]


def user_namespace_filter(machine: str) -> list[tuple[int, int, int, int]]:
    """A classic-BPF seccomp program (``code, jump-if-true, jump-if-false, k``; jumps count the
    instructions skipped): clone and unshare with ``CLONE_NEWUSER`` fail with EPERM; clone3 fails
    with ENOSYS (its flags are in memory a filter cannot read; glibc then falls back to clone); a
    foreign ABI (i386's ``int 0x80``) kills the process; x32 numbers fail; everything else passes."""
    arch, clone, unshare, clone3 = SYSCALLS[machine]
    load, equal, at_least, has_bits, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, kill, fail = 0x7FFF0000, 0x80000000, 0x00050000  # SECCOMP_RET_ALLOW, _KILL_PROCESS, _ERRNO
    return [
        (load, 0, 0, 4),  # 0: seccomp_data.arch
        (equal, 1, 0, arch),  # 1: this ABI: go on at 3
        (ret, 0, 0, kill),  # 2
        (load, 0, 0, 0),  # 3: seccomp_data.nr
        (at_least, 8, 0, 0x40000000),  # 4: x32: 13
        (equal, 7, 0, clone3),  # 5: 13
        (equal, 2, 0, unshare),  # 6: 9
        (equal, 1, 0, clone),  # 7: 9
        (ret, 0, 0, allow),  # 8
        (load, 0, 0, 16),  # 9: the low half of args[0], the flags of both
        (has_bits, 0, 1, CLONE_NEWUSER),  # 10: 11 if set, else 12
        (ret, 0, 0, fail | 1),  # 11: EPERM
        (ret, 0, 0, allow),  # 12
        (ret, 0, 0, fail | 38),  # 13: ENOSYS
    ]


def _block_user_namespaces() -> None:
    program = user_namespace_filter(os.uname().machine)
    instructions = (_Instruction * len(program))(*(_Instruction(*i) for i in program))
    pointer = ctypes.byref(_Program(len(program), instructions))
    mode, zero = ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.c_ulong(0)
    _check(_libc.prctl(PR_SET_SECCOMP, mode, pointer, zero, zero), "prctl(PR_SET_SECCOMP)")


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
    one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, one, zero, zero, zero), "prctl(PR_SET_NO_NEW_PRIVS)")
    if config["block_user_namespaces"]:
        _block_user_namespaces()
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


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


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
        # The host enforces the wall clock; a launcher that outlived it would run unwatched.
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
        if os.getppid() != int(config["host_pid"]):
            raise OSError("the host exited before the run started")
        for procs in config["cgroup_procs"]:  # first: everything below is counted in the run's cgroup
            _write(procs, str(os.getpid()))
        flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP
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
