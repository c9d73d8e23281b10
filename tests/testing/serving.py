"""Stopping a ``statekit serve`` subprocess the way an operator does (SIGTERM), and saying why when it
does not stop: the harness prints every thread's stack once a shutdown has taken ``SLOW_SHUTDOWN``
(statekit/harness/app.py), and a test that waited 60 s shows those lines."""

from __future__ import annotations

import subprocess


def stop_server(proc: subprocess.Popen[str], lines: list[str], *, wait: float = 60.0) -> None:
    """SIGTERM ``proc`` and wait ``wait`` s; past that, kill it and fail with what it printed since the
    SIGTERM (``lines``: its output, still being appended to by a reader thread)."""
    shutting = len(lines)
    proc.terminate()
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.wait(timeout=30)
        raise AssertionError(
            f"statekit serve did not stop {wait:.0f} s after SIGTERM; its output since (the stacks it "
            "printed after SLOW_SHUTDOWN):\n" + "".join(lines[shutting:][-400:])
        ) from exc
