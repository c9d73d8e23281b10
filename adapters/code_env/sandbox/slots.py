"""A uid of its own for every concurrent run, so no run can starve another.

``RLIMIT_NPROC`` counts the processes of a *user*, machine-wide: if every sandbox ran as one user, a
fork bomb in one episode would use up the process budget of every other episode running at that moment.
So each run borrows a uid from a range nothing else uses (no passwd entry needed: the kernel only
needs a number), and gives it back when every process of the run is gone. Slots are ``flock``\\ s on
files under ``/run/statekit-sandbox``, so processes sharing this machine never hand out the same uid,
and a crashed holder releases its slot with its last file descriptor.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from statekit_examples.adapters.code_env.sandbox.base import SandboxError

UID_BASE = 2_000_000_000
"""Far above login users (1000-59999), Debian's reserved ranges and systemd's dynamic users."""
SLOTS = 256
LOCK_DIR = Path("/run/statekit-sandbox")
_NEXT = itertools.count()
log = logging.getLogger(__name__)


class UidSlots:
    """Lends uids ``base .. base + count - 1``, one per concurrent run on this machine."""

    def __init__(self, *, base: int = UID_BASE, count: int = SLOTS, lock_dir: Path = LOCK_DIR) -> None:
        self.base = base
        self.count = count
        self.lock_dir = lock_dir
        lock_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._stuck: list[int] = []

    @contextlib.contextmanager
    def borrow(self) -> Iterator[Lease]:
        """A uid no other run holds. Mark the lease ``killed`` if the run was killed from outside: its
        uid is then returned only once no process of it is left."""
        start = (os.getpid() * 31 + next(_NEXT)) % self.count
        for offset in range(self.count):
            slot = (start + offset) % self.count
            fd = os.open(self.lock_dir / f"uid-{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            lease = Lease(self.base + slot)
            try:
                yield lease
            finally:
                if not lease.killed or wait_until_gone(lease.uid):
                    os.close(fd)
                else:  # never lend a uid that still has processes: keep its lock until we exit
                    log.error("processes of sandbox uid %d outlived their run", lease.uid)
                    self._stuck.append(fd)
            return
        raise SandboxError(
            f"all {self.count} sandbox uids are in use (locks under {self.lock_dir}); "
            "run fewer sandboxes at once on this machine"
        )


@dataclass
class Lease:
    uid: int
    killed: bool = False
    """A run that ended normally took its whole PID namespace with it (PID 1 waits for every process
    in it before it exits); only a killed launcher leaves a teardown in flight."""


def processes_of(uid: int) -> list[int]:
    """Pids whose real uid is ``uid`` (read from ``/proc/PID/status``: a process that changed its
    credentials is not dumpable, so its ``/proc`` directory belongs to root)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as status:
                for line in status:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            found.append(int(entry))
                        break
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


def wait_until_gone(uid: int, timeout: float = 5.0) -> bool:
    """Wait until no process runs as ``uid`` (a PID namespace's teardown is quick but not instant)."""
    deadline = time.monotonic() + timeout
    while processes_of(uid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
