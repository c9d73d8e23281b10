"""Running verifiers as its users do: ``vf-eval @ eval.toml`` from ``.venv-verifiers``
(``scripts/venv-verifiers.sh``), the model a scripted stand-in on loopback."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from statekit.servers import ThreadedServer

from ..chat_standin import ChatStandIn

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("STATEKIT_VERIFIERS_VENV", ROOT / ".venv-verifiers"))


def vf_eval(
    tmp_path: Path, model: ChatStandIn, taskset: str, *, rollouts: int, agent: str
) -> list[dict[str, Any]]:
    """Run ``vf-eval`` with ``taskset`` (the TOML under ``[env.taskset]``), ``rollouts`` per task, the
    env's agent (``player`` for an OpenEnv or statekit taskset, ``agent`` for a single-agent one) on
    verifiers' null harness in a subprocess runtime: the episodes it wrote (``traces.jsonl``)."""
    command = VENV / "bin" / "vf-eval"
    if not command.exists():
        pytest.fail(f"{command} is missing: scripts/test.sh builds it (scripts/venv-verifiers.sh)")
    with ThreadedServer(model.app) as endpoint:
        (tmp_path / "eval.toml").write_text(
            f'model = "scripted"\nnum_rollouts = {rollouts}\npush = false\n'
            f'output_dir = "{tmp_path / "out"}"\n\n[client]\nbase_url = "{endpoint.url}/v1"\n\n'
            f"[env.taskset]\n{taskset}\n\n"
            f'[env.{agent}]\nharness = {{id = "null"}}\nruntime = {{type = "subprocess"}}\n'
        )
        environ = {**os.environ, "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}", "PRIME_API_KEY": "unused"}
        run = subprocess.run(
            [str(command), "@", "eval.toml"],
            cwd=tmp_path,
            env=environ,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return [json.loads(line) for path in (tmp_path / "out").rglob("traces.jsonl") for line in path.open()]
