"""One cgroup per sandboxed run, so memory and processes are counted for the run as a whole.

Resource limits count per process, and not everything: ``RLIMIT_AS`` ignores the pages of a memfd or
a tmpfs file that is written and never mapped, and three processes each under the limit hold three
times it. A memory cgroup counts every page the run charges (anonymous memory, page cache, tmpfs and
memfd shared memory, kernel memory) and a pids cgroup every task, whatever forks.

Where: the ``memory`` and ``pids`` controllers live in cgroup v2's unified hierarchy or in v1
hierarchies of their own (or one in each); ``locate`` reads the mount table to find them. In each
hierarchy is a ``statekit-sandbox`` directory, and in it one directory per run, named
``HOST+PID+START+N`` after the process that made it (``owners.py``), so a later sandbox can tell a
dead owner's leftovers (``sweep``). In v1 it sits under the host process's own cgroup, so what a run
uses is still counted (and limited) where the host is; in v2 under the root, because a v2 cgroup
that holds processes cannot hand its controllers to children.

How: the launcher writes its pid into each ``cgroup.procs`` before it forks (``launch.py``), so every
process of the run is inside. After the run, ``RunCgroup.close`` kills whatever is left (v2's
``cgroup.kill`` where the kernel has it; SIGKILL through a pidfd to each listed pid otherwise, sent
only if the pid is still listed once its pidfd is open, so a pid reused by another process is never
hit) and removes the directories.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from statekit_examples.adapters.code_env.sandbox.base import Limits, SandboxError
from statekit_examples.adapters.code_env.sandbox.owners import is_gone, owner_tag

CONTROLLERS = ("memory", "pids")
PARENT = "statekit-sandbox"
MOUNTINFO = Path("/proc/self/mountinfo")
OWN_CGROUPS = Path("/proc/self/cgroup")
EMPTY_TIMEOUT = 5.0
"""How long a run's cgroup may take to empty after the kill (a process exiting is quick, not instant)."""
_NEXT = itertools.count()
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hierarchy:
    """A mounted cgroup hierarchy carrying some of ``CONTROLLERS``."""

    mount: Path
    version: int
    controllers: tuple[str, ...]
    home: Path = Path("/")
    """Where under the mount the run cgroups go: the host's own cgroup in v1, the root in v2."""

    @property
    def parent(self) -> Path:
        return self.mount / self.home.relative_to("/") / PARENT


def own_cgroup(controller: str, proc_cgroup: str) -> Path:
    """This process's cgroup in the v1 hierarchy of ``controller`` (``/proc/self/cgroup``)."""
    for line in proc_cgroup.splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return Path(path or "/")
    return Path("/")


def locate(mountinfo: str, proc_cgroup: str = "") -> list[Hierarchy]:
    """The hierarchies that carry ``memory`` and ``pids``: the unified (v2) one for the controllers it
    has, v1 hierarchies for the rest (each under this process's own cgroup there, from
    ``proc_cgroup``). SandboxError naming what was found if one is nowhere."""
    unified: Path | None = None
    v1: dict[str, Path] = {}
    roots: dict[str, Path] = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)  # optional fields end at "-"; then type, source, super options
        fstype, mount = fields[dash + 1], Path(_unescape(fields[4]))
        options = fields[dash + 3].split(",") if len(fields) > dash + 3 else []
        if fstype == "cgroup2" and unified is None:
            unified = mount
        elif fstype == "cgroup":
            for name in set(CONTROLLERS) & set(options):
                v1.setdefault(name, mount)
                roots.setdefault(name, Path(_unescape(fields[3])))  # what of the hierarchy is mounted
    found: dict[Path, tuple[int, list[str]]] = {}
    available = set((unified / "cgroup.controllers").read_text().split()) if unified else set()
    for name in CONTROLLERS:
        if name in available and unified is not None:
            found.setdefault(unified, (2, []))[1].append(name)
        elif name in v1:
            found.setdefault(v1[name], (1, []))[1].append(name)
        else:
            raise SandboxError(
                f"no cgroup hierarchy carries the {name!r} controller (cgroup v2 at {unified or 'none'} "
                f"offers {sorted(available)}; v1 hierarchies: {sorted(v1)})"
            )
    return [
        Hierarchy(mount, version, tuple(names), _home(version, names[0], roots, proc_cgroup))
        for mount, (version, names) in found.items()
    ]


def _home(version: int, controller: str, roots: dict[str, Path], proc_cgroup: str) -> Path:
    """Where the run cgroups go, as a path under the mount: v2's root; in v1 the host's own cgroup,
    relative to what of the hierarchy is mounted (in a container, ``/docker/<id>`` both are)."""
    if version == 2:
        return Path("/")
    own, root = own_cgroup(controller, proc_cgroup), roots.get(controller, Path("/"))
    return Path("/") / own.relative_to(root) if own.is_relative_to(root) else Path("/")


def _unescape(field: str) -> str:
    """Mount points in ``mountinfo`` escape space, tab, newline and backslash as octal."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


class RunCgroups:
    """Makes one cgroup per run, limited to ``limits.memory_bytes`` (swap included) and
    ``limits.processes`` tasks (plus the launcher and the run's PID 1, which are in it too).

    Made once per sandbox: it prepares the ``statekit-sandbox`` parents, proves a cgroup can be made,
    limited, joined and removed (SandboxError saying which step failed), and sweeps dead owners' runs.
    """

    def __init__(self, limits: Limits) -> None:
        self.memory_bytes = limits.memory_bytes
        self.tasks = limits.processes + 2
        self.owner = owner_tag().replace(":", "+")
        try:
            self.hierarchies = locate(MOUNTINFO.read_text(), OWN_CGROUPS.read_text())
            for hierarchy in self.hierarchies:
                _prepare(hierarchy)
            with self.create() as probe:
                probe.prove_joinable()
            self.swept = self.sweep()
        except OSError as exc:
            raise SandboxError(f"preparing the sandbox's cgroups failed: {exc}") from exc

    def create(self) -> RunCgroup:
        """A new, limited cgroup for one run (SandboxError if the kernel refuses)."""
        leaf = f"{self.owner}+{next(_NEXT)}"
        cgroup = RunCgroup([(h, h.parent / leaf) for h in self.hierarchies])
        try:
            for hierarchy, folder in cgroup.folders:
                folder.mkdir()
                cgroup.made.append(folder)
                for knob, value in self._settings(hierarchy, folder):
                    (folder / knob).write_text(value)
        except OSError as exc:
            cgroup.close()
            raise SandboxError(f"making the run's cgroup failed: {exc}") from exc
        return cgroup

    def _settings(self, hierarchy: Hierarchy, folder: Path) -> list[tuple[str, str]]:
        """Limits in the order the kernel accepts them (v1's memory+swap limit may not be below memory's)."""
        memory, out = str(self.memory_bytes), []
        if "memory" in hierarchy.controllers:
            if hierarchy.version == 2:
                out.append(("memory.max", memory))
                if (folder / "memory.swap.max").exists():
                    out.append(("memory.swap.max", "0"))
            else:
                out.append(("memory.limit_in_bytes", memory))
                if (folder / "memory.memsw.limit_in_bytes").exists():  # absent without swap accounting
                    out.append(("memory.memsw.limit_in_bytes", memory))
        if "pids" in hierarchy.controllers:
            out.append(("pids.max", str(self.tasks)))
        return out

    def sweep(self) -> list[str]:
        """Kill and remove the run cgroups of owners that are gone (killed before they could)."""
        removed = []
        for hierarchy in self.hierarchies:
            for folder in sorted(hierarchy.parent.iterdir()):
                owner = ":".join(folder.name.split("+")[:3])
                if folder.is_dir() and is_gone(owner):
                    log.warning("removing the cgroup %s of a sandbox run whose owner is gone", folder)
                    if RunCgroup([(hierarchy, folder)], made=[folder]).close():
                        removed.append(str(folder))
        return removed


def _prepare(hierarchy: Hierarchy) -> None:
    """The ``statekit-sandbox`` parent; in v2, with the controllers handed down to its children."""
    if hierarchy.version == 2:
        enabled = (hierarchy.mount / "cgroup.subtree_control").read_text().split()
        missing = [name for name in hierarchy.controllers if name not in enabled]
        if missing:
            raise SandboxError(
                f"cgroup v2 at {hierarchy.mount} does not enable {missing} for its children: run "
                f"`echo '{' '.join('+' + m for m in missing)}' > {hierarchy.mount}/cgroup.subtree_control`"
            )
    hierarchy.parent.mkdir(mode=0o755, exist_ok=True)
    if hierarchy.version == 2:
        wanted = " ".join(f"+{name}" for name in hierarchy.controllers)
        (hierarchy.parent / "cgroup.subtree_control").write_text(wanted)


class RunCgroup:
    """One run's cgroup: a directory in each hierarchy. ``close`` empties and removes it."""

    def __init__(self, folders: list[tuple[Hierarchy, Path]], *, made: list[Path] | None = None) -> None:
        self.folders = folders
        self.made: list[Path] = made if made is not None else []
        """The directories that exist (so far), the ones ``close`` removes."""

    @property
    def procs(self) -> list[str]:
        """The ``cgroup.procs`` files the launcher writes its pid to."""
        return [str(folder / "cgroup.procs") for _, folder in self.folders]

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.made:
            with contextlib.suppress(FileNotFoundError):
                found.update(int(pid) for pid in (folder / "cgroup.procs").read_text().split())
        return found

    def kill(self) -> None:
        """SIGKILL every process in the cgroup."""
        for hierarchy, folder in self.folders:
            if hierarchy.version == 2 and (folder / "cgroup.kill").exists():
                with contextlib.suppress(FileNotFoundError):
                    (folder / "cgroup.kill").write_text("1")
        pidfds = {}
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                pidfds[pid] = os.pidfd_open(pid)
        try:
            still = self.pids()  # a pid listed after its pidfd was opened is that process
            for pid, pidfd in pidfds.items():
                if pid in still:
                    with contextlib.suppress(ProcessLookupError):
                        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        finally:
            for pidfd in pidfds.values():
                os.close(pidfd)

    def prove_joinable(self) -> None:
        """A shell joins the cgroup and exits: what the launcher will do, proven before any run."""
        done = subprocess.run(
            ["/bin/sh", "-c", 'for f; do echo $$ > "$f" || exit 1; done', "sh", *self.procs],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SandboxError(f"a process could not join the run's cgroup: {done.stderr.strip()}")

    def close(self) -> bool:
        """Kill what is left and remove the directories; False (logged) if they would not empty in
        ``EMPTY_TIMEOUT`` seconds. Safe twice."""
        deadline = time.monotonic() + EMPTY_TIMEOUT
        problem: OSError | None = None
        while self.made:
            self.kill()
            for folder in list(self.made):
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as exc:  # EBUSY: a process is still on its way out
                    problem = exc
                    continue
                self.made.remove(folder)
            if self.made and time.monotonic() > deadline:
                log.error("cannot remove the sandbox run cgroup(s) %s: %s", self.made, problem)
                return False
            if self.made:
                time.sleep(0.01)
        return True

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
