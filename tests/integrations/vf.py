"""Running verifiers as its users do: ``vf-eval @ eval.toml`` from ``.venv-verifiers``
(``scripts/venv-verifiers.sh``), the model a scripted stand-in on loopback."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from statekit.servers import ThreadedServer

from ..chat_standin import ChatStandIn

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("STATEKIT_VERIFIERS_VENV", ROOT / ".venv-verifiers"))


@dataclass
class Eval:
    """One ``vf-eval`` configuration: ``taskset`` (the TOML under ``[env.taskset]``), ``rollouts`` per
    task, the env's agent (``player`` for an OpenEnv or statekit taskset, ``agent`` for a single-agent
    one) and the model that answers it."""

    model: ChatStandIn
    taskset: str
    rollouts: int
    agent: str


def vf_eval(
    tmp_path: Path, model: ChatStandIn, taskset: str, *, rollouts: int, agent: str
) -> list[dict[str, Any]]:
    """Run one ``vf-eval``: the episodes it wrote (``traces.jsonl``)."""
    return vf_evals(tmp_path, {"eval": Eval(model, taskset, rollouts, agent)})["eval"]


def vf_evals(tmp_path: Path, evals: dict[str, Eval]) -> dict[str, list[dict[str, Any]]]:
    """Run each of ``evals`` with verifiers' own ``vf-eval`` (its CLI's ``main``, one configuration
    after another in one process: its imports, about ten seconds, are paid once) on verifiers' null
    harness in a subprocess runtime, each model served on loopback: per name, the episodes it wrote."""
    command = VENV / "bin" / "vf-eval"
    if not command.exists():
        pytest.fail(f"{command} is missing: scripts/test.sh builds it (scripts/venv-verifiers.sh)")
    with ExitStack() as stack:
        configs = []
        for name, spec in evals.items():
            endpoint = stack.enter_context(ThreadedServer(spec.model.app))
            (tmp_path / name).mkdir()
            configs.append(config := tmp_path / name / "eval.toml")
            config.write_text(
                f'model = "scripted"\nnum_rollouts = {spec.rollouts}\npush = false\n'
                f'output_dir = "{tmp_path / name / "out"}"\n\n[client]\nbase_url = "{endpoint.url}/v1"\n\n'
                f"[env.taskset]\n{spec.taskset}\n\n"
                f'[env.{spec.agent}]\nharness = {{id = "null"}}\nruntime = {{type = "subprocess"}}\n'
            )
        environ = {**os.environ, "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}", "PRIME_API_KEY": "unused"}
        run = subprocess.run(
            [str(VENV / "bin" / "python"), "-c", MAIN, *map(str, configs)],
            cwd=tmp_path,
            env=environ,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return {
        name: [
            json.loads(line)
            for path in (tmp_path / name / "out").rglob("traces.jsonl")
            for line in path.open()
        ]
        for name in evals
    }


MAIN = """
import sys
from verifiers.v1.cli.eval.main import main
for config in sys.argv[1:]:
    main(["@", config])
"""
"""What ``vf-eval @ eval.toml`` runs (its console script), once per configuration."""
