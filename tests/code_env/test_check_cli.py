"""The issue's bar, as a user runs it: ``statekit check code_env --json`` passes every check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import require_root

REPO = Path(__file__).resolve().parents[2]


def test_statekit_check_passes_for_the_code_environment() -> None:
    """Determinism (3 replays of two seeds), seeds differ, reset restores, coverage of the directory
    digest, every task valid (start 0 and reference 1, five times each through the environment), and
    the clock and ids controls proved by switching each off (the request_id task's visible tests print
    the sandbox's time and a random draw)."""
    require_root()
    statekit_cli = Path(sys.executable).with_name("statekit")
    done = subprocess.run(
        [str(statekit_cli), "check", "code_env", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["problems"] == []
    for check in ("deterministic", "seeds_differ", "reset_restores_initial", "coverage", "tasks_valid"):
        assert report[check] is True, check
    assert report["controls"] == {"clock": True, "ids": True}
