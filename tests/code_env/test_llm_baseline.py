"""The LLM baseline against the real harness (``statekit serve code_env`` in a subprocess) and a
stand-in OpenAI-compatible server on loopback that answers with scripted tool calls.

No language model exists on this machine; the stand-in checks what the script sends (the prompt, the
tool schemas, tool results matched to their call ids) and replies like an endpoint would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from statekit.client import RemoteEnvironment
from statekit.servers import ThreadedServer
from statekit_examples.adapters.code_env.llm_baseline import ChatClient, parse_tool_calls, play, summary
from statekit_examples.adapters.code_env.tasks import TASKS_DIR
from tests.testing.serving import stop_server

from ..chat_standin import scripted
from .conftest import require_root

REPO = Path(__file__).resolve().parents[2]


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def assistant(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


@pytest.fixture(scope="module")
def harness() -> Iterator[str]:
    """``statekit serve code_env --port 0``, as a user would start it."""
    require_root()
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("statekit")), "serve", "code_env", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "STATEKIT_TOKEN"},
    )
    lines: list[str] = []
    assert proc.stdout is not None
    url = ""
    for line in proc.stdout:
        lines.append(line)
        if " at http://" in line:
            url = line.split(" at ", 1)[1].split()[0]
            break
    threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True).start()
    try:
        assert url, "".join(lines)
        yield url
    finally:
        stop_server(proc, lines)


def test_a_scripted_model_solves_a_task_through_the_harness(harness: str) -> None:
    reference = (TASKS_DIR / "median" / "reference" / "solution.py").read_text()
    stand_in = scripted(
        [
            assistant(
                call("c1", "list_files", {}),
                call("c2", "view_file", {"path": "solution.py"}),
                content="Let me look around.",
            ),
            assistant(call("c3", "write_file", '{"path": "solution.py", "content": ')),  # cut-off JSON
            assistant(content="I think I am done."),  # no tool call: nudged once
            assistant(call("c4", "write_file", {"path": "solution.py", "content": reference})),
            assistant(call("c5", "run_tests", {})),
            assistant(call("c6", "submit", {})),
        ]
    )
    with ThreadedServer(stand_in.app) as llm, RemoteEnvironment(harness) as env:
        client = ChatClient(f"{llm.url}/v1", "stand-in", api_key="sk-test")
        attempt = play(env, client, seed=3, options={"task": "median"})
        client.close()
    assert attempt.reward == 1.0 and attempt.task == "median" and attempt.steps == 5

    first = stand_in.requests[0]
    assert stand_in.headers[0]["authorization"] == "Bearer sk-test"
    assert first["model"] == "stand-in" and first["tool_choice"] == "auto"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert "Implement `median(xs)`" in first["messages"][1]["content"]
    assert "solution.py, test_visible.py" in first["messages"][1]["content"]
    tools = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert set(tools) == {"list_files", "view_file", "write_file", "run_tests", "submit"}
    assert tools["write_file"]["parameters"]["required"] == ["path", "content"]

    second = stand_in.requests[1]["messages"]
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in second if m["role"] == "tool"}
    assert results["c1"] == {"files": ["solution.py", "test_visible.py"]}
    assert "raise NotImplementedError" in results["c2"]["content"]
    assert second[2]["tool_calls"][0]["id"] == "c1"  # the assistant turn is kept, calls and all

    third = stand_in.requests[2]["messages"]
    assert (
        json.loads(third[-1]["content"])["error"]["code"] == "bad_tool_call"
        and third[-1]["tool_call_id"] == "c3"
    )
    assert stand_in.requests[3]["messages"][-1] == {
        "role": "user",
        "content": "Please call one of the tools. Call submit when you are done.",
    }
    run = json.loads(stand_in.requests[5]["messages"][-1]["content"])
    assert run["passed"] is True
    assert summary([attempt])["tasks"]["median"]["solved"] == "1/1"


def test_a_model_that_never_calls_a_tool_ends_as_a_submit(harness: str) -> None:
    stand_in = scripted([assistant(content="hmm"), assistant(content="still thinking")])
    with ThreadedServer(stand_in.app) as llm, RemoteEnvironment(harness) as env:
        attempt = play(env, ChatClient(f"{llm.url}/v1", "stand-in"), seed=4, options={"task": "fizzbuzz"})
    assert attempt.reward == 0.0 and attempt.steps == 1 and len(stand_in.requests) == 2
    assert "authorization" not in stand_in.headers[0]  # no key given, none sent


def test_malformed_tool_calls_are_parsed_into_errors() -> None:
    parsed = parse_tool_calls(
        {
            "tool_calls": [
                call("a", "view_file", {"path": "x"}),
                call("b", "view_file", "[1]"),
                {"id": "c"},
                call("d", "submit", ""),
            ]
        }
    )
    assert parsed[0].action == {"tool": "view_file", "path": "x"}
    assert parsed[1].error == "the arguments must be a JSON object"
    assert parsed[2].error == "a tool call needs a function name"
    assert parsed[3].action == {"tool": "submit"}


def test_an_endpoint_error_is_reported_with_its_status() -> None:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    def refuse() -> None:
        from fastapi import HTTPException

        raise HTTPException(status_code=429, detail="slow down")

    with ThreadedServer(app) as llm, pytest.raises(RuntimeError, match="429"):
        ChatClient(f"{llm.url}/v1", "m").complete([], [])
    with pytest.raises(httpx.ConnectError):
        ChatClient("http://127.0.0.1:9/v1", "m", timeout=2).complete([], [])
