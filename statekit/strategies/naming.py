"""Names for the resources a strategy creates, so a later process can find and sweep orphans.

Every kind of resource (databases, directory trees, containers) is keyed the same way: by its
*owner*, the host, process id and process start time of the process that made it. The start time is
what makes the test sound: a pid alone is reused by the kernel, and a killed process that nobody
reaped yet (a zombie) still answers ``kill(pid, 0)``. An owner is alive only if a process with that
pid runs now, is not a zombie, and started at that same time.

Formats (pid and start time in base 36 in names, decimal in keys; the dashes keep names of older
versions, ``{prefix}_e_{host}_{pid}_{n}``, from ever parsing as an owner)::

    {prefix}_e_{host}-{pid}-{start}_{n}          an episode copy
    {prefix}_b_{host}-{pid}-{start}_{n}_{key}    a golden being built
    {prefix}_g_{key}                             a golden (the world cache: no owner, it outlives us)
    s{host}{pid}p{start}x{token}                 a snapshot (fork) key: its golden belongs to a process

A process that starts sweeps, on its own host, whatever names an owner that is no longer alive.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

_KEY = re.compile(r"^[a-z0-9]{1,40}$")
HOST_TAG = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]
_COPIES = itertools.count(1)
"""Process-wide: several strategies in one process (the harness's sessions) must never pick one name."""
_PROC = Path("/proc")


def check_key(key: str) -> str:
    """Keys become part of identifiers and paths: lower-case hex/alnum, at most 40 characters."""
    if not _KEY.match(key):
        raise ValueError(f"invalid world key {key!r}: use 1-40 characters of [a-z0-9]")
    return key


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if it is gone or a zombie.

    Linux reads ``/proc/PID/stat``; elsewhere the start time is unknown (0) and a signal-0 probe says
    whether the pid exists.
    """
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return _exists(pid)
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    if fields[0] in ("Z", "X"):  # zombie or dead: it will never touch its resources again
        return None
    return int(fields[19])  # field 22 of stat(5): starttime


def _exists(pid: int) -> int | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return 0


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, rest = divmod(number, 36)
        text = digits[rest] + text
        if not number:
            return text


@dataclass(frozen=True)
class Owner:
    """The process that made a resource: host tag, pid and start time (clock ticks since boot)."""

    host: str
    pid: int
    start: int

    @classmethod
    def current(cls) -> Owner:
        """This process (computed per pid, so a forked child is its own owner)."""
        pid = os.getpid()
        cached = _CURRENT.get(pid)
        if cached is None:
            cached = _CURRENT[pid] = cls(HOST_TAG, pid, process_start(pid) or 0)
        return cached

    def is_alive(self) -> bool:
        """Whether this owner may still use its resources. Another host's owner is never ours to judge."""
        if self.host != HOST_TAG or self.pid == os.getpid():
            return True
        start = process_start(self.pid)
        if start is None:
            return False
        return not (self.start and start and start != self.start)  # a reused pid: another process

    @property
    def tag(self) -> str:
        """For names: ``{host}-{pid36}-{start36}``."""
        return f"{self.host}-{_base36(self.pid)}-{_base36(self.start)}"

    @property
    def label(self) -> str:
        """For container labels: ``{host}:{pid}:{start}``."""
        return f"{self.host}:{self.pid}:{self.start}"

    @classmethod
    def from_label(cls, label: str) -> Owner | None:
        """Parse ``host:pid:start`` (or an older ``host:pid``, whose start time is unknown)."""
        parts = label.split(":")
        if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts[1:]):
            return None
        return cls(parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else 0)


_CURRENT: dict[int, Owner] = {}


class CopyNamer:
    """Makes unique copy names for this process and recognises orphans of dead processes."""

    def __init__(self, prefix: str, owner: Owner | None = None) -> None:
        self.prefix = prefix
        self._owner = owner
        """Fixed only to name resources on another process's behalf (tests of the sweep)."""
        self._copy = re.compile(
            rf"^{re.escape(prefix)}_[be]_(?P<host>[0-9a-f]{{6}})-(?P<pid>[0-9a-z]+)-(?P<start>[0-9a-z]+)_"
        )

    @property
    def owner(self) -> Owner:
        return self._owner or Owner.current()

    def golden(self, key: str) -> str:
        return f"{self.prefix}_g_{check_key(key)}"

    def building(self, key: str) -> str:
        return f"{self.prefix}_b_{self.owner.tag}_{_base36(next(_COPIES))}_{check_key(key)}"

    def episode(self) -> str:
        return f"{self.prefix}_e_{self.owner.tag}_{_base36(next(_COPIES))}"

    def owner_of(self, name: str) -> Owner | None:
        """Who made a build or episode copy, or a snapshot golden, named ``name`` (None: no owner)."""
        match = self._copy.match(name)
        if match:
            return Owner(match["host"], int(match["pid"], 36), int(match["start"], 36))
        golden = f"{self.prefix}_g_"
        return snapshot_owner(name[len(golden) :]) if name.startswith(golden) else None

    def is_orphan(self, name: str) -> bool:
        """A build or episode copy, or a snapshot golden, made on this host by a process now gone."""
        owner = self.owner_of(name)
        return owner is not None and not owner.is_alive()


_SNAPSHOT = re.compile(r"^s(?P<host>[0-9a-f]{6})(?P<pid>\d+)p(?P<start>\d+)x")


def snapshot_key(token: str, owner: Owner | None = None) -> str:
    """A snapshot's golden key names its owner, so the goldens of a crashed process (unlike the
    world cache's, which outlive processes on purpose) are swept like its copies."""
    who = owner or Owner.current()
    return check_key(f"s{who.host}{who.pid}p{who.start}x{token}"[:40])


def snapshot_owner(key: str) -> Owner | None:
    """The owner named by a snapshot key, or None for any other key (a cached world's)."""
    match = _SNAPSHOT.match(key)
    return Owner(match["host"], int(match["pid"]), int(match["start"])) if match else None
