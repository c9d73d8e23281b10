"""Who made a leftover: ``HOST:PID:START`` tags on the containers and cgroups a sandbox creates.

A sandbox whose process was killed cannot remove what it made; the next sandbox on this machine
does, once the owner is gone. The start time tells a live owner from a new process that reused its
pid. Both layers tag with this (containers by label, run cgroups by directory name).
"""

from __future__ import annotations

import os
import socket

HOST = socket.gethostname()
"""This machine's real name, read at import: episodes run under statekit's fixed host identity."""


def owner_tag(pid: int | None = None) -> str:
    """``HOST:PID:START`` of ``pid`` (this process by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{HOST}:{pid}:{start_time(pid)}"


def start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (``/proc/PID/stat``), or ``gone``."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (FileNotFoundError, IndexError):
        return "gone"


def is_gone(tag: str) -> bool:
    """Whether the owner named by ``tag`` has exited. Tags of other hosts are never judged gone:
    their pids mean nothing here."""
    host, _, rest = tag.partition(":")
    pid, _, start = rest.partition(":")
    return host == HOST and pid.isdigit() and start_time(int(pid)) != start
