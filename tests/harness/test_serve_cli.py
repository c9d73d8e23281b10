"""``statekit serve`` refuses bad configuration up front, with exit status 2 and a message."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from .helpers import LEDGER

STATEKIT = str(Path(sys.executable).with_name("statekit"))


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STATEKIT, "serve", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_an_unknown_adapter_fails_before_listening() -> None:
    result = _serve("no_such_app", "--port", "0")
    assert result.returncode == 2
    assert "unknown adapter 'no_such_app'" in result.stderr and "claims_app" in result.stderr


def test_an_unknown_strategy_fails_before_listening() -> None:
    result = _serve(LEDGER, "--strategy", "template", "--port", "0")
    assert result.returncode == 2 and "offers strategies ['memory', 'rewind']" in result.stderr


def test_a_busy_port_says_to_pick_another() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = _serve(LEDGER, "--port", str(busy.getsockname()[1]))
    assert result.returncode == 2 and "pick another --port" in result.stderr


def test_bad_limits_are_refused() -> None:
    result = _serve(LEDGER, "--max-sessions", "0", "--port", "0")
    assert result.returncode == 2 and "max_sessions must be at least 1" in result.stderr
