"""Names for the copies a strategy creates, so a later process can find and sweep orphans.

A copy's name carries the host and process that made it: ``{prefix}_e_{host}_{pid}_{n}``. A process
that starts sweeps copies from its own host whose process is gone (a crash mid-reset or mid-episode).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import socket

_KEY = re.compile(r"^[a-z0-9]{1,40}$")
HOST_TAG = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:6]
_COPIES = itertools.count(1)
"""Process-wide: several strategies in one process (the harness's sessions) must never pick one name."""


def check_key(key: str) -> str:
    """Keys become part of identifiers and paths: lower-case hex/alnum, at most 40 characters."""
    if not _KEY.match(key):
        raise ValueError(f"invalid world key {key!r}: use 1-40 characters of [a-z0-9]")
    return key


class CopyNamer:
    """Makes unique copy names for this process and recognises orphans of dead processes."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def golden(self, key: str) -> str:
        return f"{self.prefix}_g_{check_key(key)}"

    def building(self, key: str) -> str:
        return f"{self.prefix}_b_{HOST_TAG}_{os.getpid()}_{next(_COPIES)}_{check_key(key)}"

    def episode(self) -> str:
        return f"{self.prefix}_e_{HOST_TAG}_{os.getpid()}_{next(_COPIES)}"

    def is_orphan(self, name: str) -> bool:
        """A build or episode copy, or a snapshot golden, made on this host by a dead process."""
        match = re.match(rf"^{re.escape(self.prefix)}_[be]_([0-9a-f]{{6}})_(\d+)_", name) or re.match(
            rf"^{re.escape(self.prefix)}_g_s([0-9a-f]{{6}})(\d+)x", name
        )
        if not match or match.group(1) != HOST_TAG:
            return False
        return not pid_alive(int(match.group(2)))


def snapshot_key(token: str) -> str:
    """A snapshot's golden key names its host and process, so the goldens of a crashed process
    (unlike the snapshot cache's, which outlive processes on purpose) are swept like its copies."""
    return check_key(f"s{HOST_TAG}{os.getpid()}x{token}"[:40])


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
