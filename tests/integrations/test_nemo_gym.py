"""NeMo Gym's own resources-server code serves statekit worlds (``statekit.integrations.nemo_gym``),
and verifiers' NeMo Gym taskset plays them as a NeMo Gym agent does.

The resources server runs in ``.venv-nemo-gym`` (``scripts/venv-nemo-gym.sh``: NeMo Gym needs Python
3.12), verifiers in ``.venv-verifiers``; the model is the scripted stand-in on loopback, calling the
tools by OpenAI function calling with each seed's reference actions.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

import statekit
from statekit.harness import HarnessConfig, create_app
from statekit.kit import allow_egress
from statekit.servers import ThreadedServer

from ..chat_standin import ChatStandIn
from .conftest import LEDGER
from .vf import vf_eval

ROOT = Path(__file__).resolve().parents[2]
NEMO = Path(os.environ.get("STATEKIT_NEMO_GYM_VENV", ROOT / ".venv-nemo-gym"))
SEEDS = (3, 4)
ROLLOUTS = 2


@contextmanager
def resources_server(*arguments: str, log_path: Path | None = None) -> Iterator[str]:
    """``python -m statekit.integrations.nemo_gym ARGUMENTS`` from the NeMo Gym venv: its URL. Its
    output goes to ``log_path`` if given (a test failing on a rollout shows why the server said 503)."""
    python = NEMO / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: scripts/test.sh builds it (scripts/venv-nemo-gym.sh)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(python), "-m", "statekit.integrations.nemo_gym", *arguments, "--port", str(port)]
    url = f"http://127.0.0.1:{port}"
    # its output goes to a file, read if it fails to start: a pipe nobody drains would block it
    opened = open(log_path, "w+") if log_path else tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
    with opened as log, allow_egress(url):  # the guard covers every thread
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True)
        try:
            for _ in range(300):
                try:
                    if httpx.get(url, timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    if proc.poll() is not None:
                        log.seek(0)
                        pytest.fail(f"the resources server exited: {log.read()[-3000:]}")
                    time.sleep(0.2)
            else:
                pytest.fail("the resources server did not start")
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def unserved_lines(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "503" in line and "HTTP/1.1" not in line]


RESPONSE = {"id": "r", "created_at": 0, "model": "m", "object": "response", "output": [],
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}  # fmt: skip
"""A model's (empty) Responses API answer, as an agent sends it to ``/verify``."""


def row(seed: int, prompt: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """A NeMo Gym dataset row: the Responses API request (the tools as function tools) and the seed."""
    function_tools = [
        {"type": "function", "name": t["name"], "description": t["description"],
         "parameters": t["input_schema"], "strict": False}
        for t in tools
    ]  # fmt: skip
    return {
        "responses_create_params": {"input": [{"role": "user", "content": prompt}], "tools": function_tools},
        "seed": seed,
    }


def test_the_resources_server_contract_in_process_worlds() -> None:
    with statekit.make(LEDGER) as env:
        first, info = env.reset(seed=3)
        script = env.adapter.reference_actions(env.task)
        data = row(3, "go", env.tools)
    with resources_server("--adapter", LEDGER) as url, httpx.Client(base_url=url, timeout=60) as gym:
        assert gym.post("/transfer", json={}).status_code == 409  # no episode yet in this cookie session
        assert (
            gym.post(
                "/seed_session", json={"responses_create_params": data["responses_create_params"]}
            ).status_code
            == 422
        )
        seeded = gym.post("/seed_session", json=data).json()
        assert seeded["initial_digest"] == info["digest"] and seeded["observation"] == first
        bad = gym.post("/transfer", json={"source": "nobody", "cents": "lots"})
        assert bad.status_code == 200 and "error" in bad.json()["observation"]  # the model's error, answered
        steps = [
            gym.post(f"/{a['tool']}", json={k: v for k, v in a.items() if k != "tool"}).json() for a in script
        ]
        assert steps[-1]["terminated"] and gym.post("/balances", json={}).status_code == 409
        verified = gym.post("/verify", json=data | {"response": RESPONSE}).json()
    assert verified["reward"] == 1.0 and verified["verdict"]["reward"] == 1.0
    assert verified["step_rewards"] == [0.0, 0.0, 1.0] and verified["initial_digest"] == info["digest"]


def test_a_dead_statekit_server_is_a_503_never_a_reward() -> None:
    served = ThreadedServer(create_app(HarnessConfig.of(LEDGER, workers=0))).start()
    with statekit.make(LEDGER) as env:
        env.reset(seed=1)
        data = row(1, "go", env.tools)
    with resources_server("--url", served.url) as url, httpx.Client(base_url=url, timeout=60) as gym:
        assert gym.post("/seed_session", json=data).status_code == 200
        served.stop()
        assert gym.post("/balances", json={}).status_code == 503
        verified = gym.post("/verify", json=data | {"response": RESPONSE})
    assert verified.status_code == 503 and "reward" not in verified.json()


def test_verifiers_nemo_gym_taskset_plays_claims_seeds_through_the_resources_server(tmp_path: Path) -> None:
    scripts: dict[str, list[dict[str, Any]]] = {}
    expected: dict[int, tuple[float, str]] = {}
    rows = []
    with statekit.make("claims_app") as env:
        for seed in SEEDS:
            first, info = env.reset(seed=seed)
            prompt, tools = json.dumps(first, sort_keys=True), env.tools
            script = env.adapter.reference_actions(env.task)
            expected[seed] = (sum(env.step(action)[1] for action in script), info["digest"])
            scripts[prompt] = script
            rows.append(row(seed, prompt, tools))
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def reply(body: dict[str, Any]) -> dict[str, Any]:  # a model calling tools by function calling
        messages = body["messages"]
        script = scripts[next(m["content"] for m in messages if m["role"] == "user")]
        turn = sum(m["role"] == "assistant" for m in messages)
        if turn >= len(script):
            return {"role": "assistant", "content": "Done."}
        action = script[turn]
        arguments = json.dumps({k: v for k, v in action.items() if k != "tool"})
        call = {"index": 0, "id": f"call_{turn}", "type": "function",
                "function": {"name": action["tool"], "arguments": arguments}}  # fmt: skip
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    model = ChatStandIn(reply)
    taskset = (
        f'id = "nemo_gym"\ndataset = "{tmp_path / "rows.jsonl"}"\n\n[env.taskset.task]\nresources_url = '
    )
    served = ThreadedServer(create_app(HarnessConfig.of("claims_app", workers=0)))
    gym_log = tmp_path / "resources-server.log"
    with served, resources_server("--url", served.url, log_path=gym_log) as gym:
        episodes = vf_eval(tmp_path, model, f'{taskset}"{gym}"', rollouts=ROLLOUTS, agent="agent")
    assert sorted(e["task"]["data"]["row"]["seed"] for e in episodes) == sorted(SEEDS * ROLLOUTS)
    for episode in episodes:
        errors = episode["traces"][0]["errors"] if episode["traces"] else episode["errors"]
        assert episode["ok"], f"{errors}; the resources server's 503s: {unserved_lines(gym_log)}"
        trace = episode["traces"][0]
        seed, outcome = episode["task"]["data"]["row"]["seed"], trace["info"]["nemo_gym"]
        reward, digest = expected[seed]
        assert trace["rewards"]["nemo_gym"]["score"] == reward == outcome["verdict"]["reward"]
        assert outcome["initial_digest"] == digest and outcome["terminated"]  # the group's one world
