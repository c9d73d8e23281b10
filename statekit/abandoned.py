"""What an application process leaves behind when nobody closes it, and how it goes.

``AppProcess`` starts its application in a session of its own, so nothing ends it with statekit:
an ``AppProcess`` nobody closed (a script that failed, an environment never closed) is ended when it
is collected or the interpreter exits (``abandon``, through ``weakref.finalize``); a statekit
process killed outright runs no finalizer, so the next ``AppProcess`` made on the host sweeps what
dead statekit processes left (``sweep_abandoned``): the application's process group, if its leader
is still the process that was started (pid and start time), its home and its clock directory, all
named by their owner (``statekit.strategies.naming``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from pathlib import Path

from statekit.strategies.naming import CopyNamer, process_start

SHARED_MEMORY = Path("/dev/shm")
"""Where libfaketime keeps the state a process shares with its children (POSIX shared memory), and
where statekit writes the process's clock file when it can: a tmpfs, in memory. The file is rewritten
at every step that moves the clock and read at every time call of the process; on this machine's
ext4 a write and rename cost ~200 us, on the tmpfs ~30 us."""
HOMES = CopyNamer("statekit-app")
"""An application process's home (its output, handoff socket, packet filter rules), named by the
statekit process that made it, so a sweep finds those of dead ones (``sweep_abandoned``)."""
CLOCKS = CopyNamer("statekit-clock")
LEADER = "leader"
"""In the home: the process group leader's pid and start time (clock ticks since boot)."""


def private_dir(path: Path) -> Path:
    """``path`` made, readable by its owner only."""
    path.mkdir(mode=0o700)
    return path


def sweep_abandoned() -> list[str]:
    """End what application processes of dead statekit processes left on this host (a statekit
    process killed outright runs no finalizer): each one's process group, if its leader is still the
    process that was started, and its home and clock directory. What was removed."""
    removed = []
    for home in Path(tempfile.gettempdir()).glob(f"{HOMES.prefix}_e_*"):
        if not HOMES.is_orphan(home.name):
            continue
        try:
            pid, start = (int(part) for part in (home / LEADER).read_text().split())
        except (OSError, ValueError):
            pid = start = 0
        abandon([pid] if pid and process_start(pid) == start else [], home)
        removed.append(home.name)
    for folder in (SHARED_MEMORY, Path(tempfile.gettempdir())):
        for clock_dir in folder.glob(f"{CLOCKS.prefix}_e_*"):
            if CLOCKS.is_orphan(clock_dir.name):
                shutil.rmtree(clock_dir, ignore_errors=True)
                removed.append(clock_dir.name)
    return removed


def abandon(started: list[int], *folders: Path) -> None:
    """End an application process nobody closed (SIGKILL to its group: at exit there is no time to
    wait), its libfaketime state and its ``folders`` (its home, its clock directory)."""
    for pid in started:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        release_clock_state(pid)
    started.clear()
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def release_clock_state(pid: int) -> None:
    """Remove the state libfaketime shared between the processes of ``pid`` (which has ended): its
    first process creates it under its pid and removes it at exit, but that process execs the
    application (``unshare`` -> ``sh`` -> the command), whose image takes it for a child's and leaves
    it. Left behind, a later process with the same pid cannot create its own and runs without it
    (``FAKETIME_SHARED`` unset)."""
    for name in (f"faketime_shm_{pid}", f"sem.faketime_sem_{pid}"):
        (SHARED_MEMORY / name).unlink(missing_ok=True)
