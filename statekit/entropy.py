"""statekit's own entropy: bytes, tokens and draws from the operating system, even while a control is
active.

The ids control patches ``os.urandom`` (and what ``random`` and ``secrets`` draw from) process-wide while
an episode runs, so another thread drawing at that moment draws from the episode's streams. statekit's own
names and draws (episodes, sessions, snapshots, a cache holder, a seedless reset's seed) come from here:
``os.urandom`` as it was when statekit was imported, before any control could patch it.
"""

from __future__ import annotations

import os

_OS_URANDOM = os.urandom


def true_random_bytes(n: int) -> bytes:
    """Bytes from the operating system, even while a control is active (statekit's own ids)."""
    return _OS_URANDOM(n)


def true_token(nbytes: int) -> str:
    """A hex token from the operating system: ``secrets.token_hex`` for statekit's own names, which
    must not come from an episode's stream when another thread's controls are active."""
    return true_random_bytes(nbytes).hex()


def true_randbelow(n: int) -> int:
    """A uniform integer in ``[0, n)`` from the operating system (``secrets.randbelow``), for the same
    reason as ``true_token``."""
    if n <= 0:
        raise ValueError("true_randbelow needs a positive bound")
    bits = n.bit_length()
    while True:  # rejection sampling: no modulo bias
        value = int.from_bytes(true_random_bytes((bits + 7) // 8), "big") >> (-bits % 8)
        if value < n:
            return value
