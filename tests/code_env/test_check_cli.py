"""The issue's bar, as a user runs it: ``statekit check code_env`` renders the check plan.

The full plan for the code environment (determinism of every task kind, the probes, the clock and ids
controls proved by switching each off: the request_id task's visible tests print the sandbox's time
and a random draw) runs once in CI, as the pytest plugin's generated tests ``statekit[code_env]::*``.
Here the command line renders the quick plan, and the controls without a probe task are said to be
not checked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import statekit
from statekit.checks import controls_to_check

from .conftest import require_root

REPO = Path(__file__).resolve().parents[2]


def test_statekit_check_quick_passes_for_the_code_environment() -> None:
    require_root()
    statekit_cli = Path(sys.executable).with_name("statekit")
    done = subprocess.run(
        [str(statekit_cli), "check", "code_env", "--quick", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["problems"] == []
    for check in ("deterministic", "seeds_differ", "reset_restores_initial", "coverage"):
        assert report[check] is True, check
    assert report["spec"]["adapter"] == "code_env"
    assert "tasks_robust: not checked (probes skipped)" in report["notes"]


def test_the_code_environment_proves_clock_and_ids_and_says_the_rest_are_unchecked() -> None:
    require_root()
    with statekit.make("code_env") as env:
        assert controls_to_check(env) == (["clock", "ids"], ["host", "egress", "db_clock"])
