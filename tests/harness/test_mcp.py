"""MCP at ``/mcp`` and OpenEnv's ``/metadata``: the MCP SDK's own client plays episodes, and OpenEnv's
own validator (``openenv validate --url``) passes every criterion against ``statekit serve``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

import statekit.kit

from .conftest import ClaimsReference

SESSION = "Mcp-Session-Id"


async def _play_over_mcp(url: str, seed: int, script: list[dict[str, Any]]) -> dict[str, Any]:
    async with streamable_http_client(f"{url}/mcp") as (read, write, _), ClientSession(read, write) as mcp:
        hello = await mcp.initialize()
        before = [tool.name for tool in (await mcp.list_tools()).tools]
        first = await mcp.call_tool("statekit_reset", {"seed": seed})
        listed = [tool.name for tool in (await mcp.list_tools()).tools]
        steps = [
            await mcp.call_tool(action["tool"], {k: v for k, v in action.items() if k != "tool"})
            for action in script
        ]
        state = await mcp.call_tool("statekit_state", {})
    return {
        "server": hello.serverInfo.name,
        "before": before,
        "listed": listed,
        "first": first,
        "steps": steps,
        "state": state.structuredContent,
    }


def test_the_mcp_sdk_client_plays_a_claims_episode(
    claims_server: str, claims_reference: ClaimsReference
) -> None:
    script, local = claims_reference.script(7), claims_reference.trace(7)
    with statekit.kit.allow_egress(claims_server):
        played = asyncio.run(_play_over_mcp(claims_server, 7, script))
    assert played["server"] == "statekit-claims_app"
    assert played["before"][:2] == ["statekit_reset", "statekit_state"]
    episode_tools = [tool["name"] for tool in claims_reference.env.tools]
    assert played["listed"] == ["statekit_reset", "statekit_state", *episode_tools]
    first = played["first"]
    assert first.structuredContent["observation"] == local.observations[0]
    assert json.loads(first.content[0].text)["observation"] == local.observations[0]
    results = [step.structuredContent for step in played["steps"]]
    assert [r["observation"] for r in results] == local.observations[1:]
    assert [r["reward"] for r in results] == local.rewards
    assert [r["terminated"] for r in results] == [False] * (len(script) - 1) + [True]
    assert not any(step.isError for step in played["steps"])
    assert json.loads(played["steps"][-1].content[0].text)["reward"] == local.rewards[-1]
    assert played["state"]["digest"] == local.digests[-1] and played["state"]["seed"] == 7


def test_openenv_validate_passes_every_criterion(claims_server: str) -> None:
    openenv = Path(sys.executable).with_name("openenv")
    run = subprocess.run(
        [str(openenv), "validate", "--url", claims_server, "--json", "--timeout", "60"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(run.stdout)
    failed = [c for c in report["criteria"] if not c["passed"]]
    assert failed == [] and report["passed"], json.dumps(failed, indent=1)
    assert {"metadata_endpoint", "mcp_endpoint"} <= {c["id"] for c in report["criteria"]}
    assert run.returncode == 0, run.stderr
    metadata = httpx.get(f"{claims_server}/metadata", timeout=30).json()
    assert metadata["name"] == "claims_app" and "claims" in metadata["description"].lower()
    assert "file_new_claim" in metadata["task_kinds"] and metadata["spec"]["adapter"] == "claims_app"


def _rpc(client: httpx.Client, url: str, body: Any, session: str | None = None) -> httpx.Response:
    headers = {SESSION: session} if session else {}
    if isinstance(body, (str, bytes)):
        return client.post(
            f"{url}/mcp", content=body, headers={**headers, "content-type": "application/json"}
        )
    return client.post(f"{url}/mcp", json=body, headers=headers)


def test_bad_mcp_input_is_a_json_rpc_error_and_the_session_survives(ledger_url: str) -> None:
    with httpx.Client(timeout=60) as client:
        for body, code in (({}, -32600), ("{not json", -32700), ([1, 2], -32600)):
            answer = _rpc(client, ledger_url, body)
            assert answer.status_code == 200 and answer.json()["error"]["code"] == code, answer.text
        for body in (
            '{"jsonrpc": "2.0", "id": NaN, "method": "ping"}',
            '{"jsonrpc": "2.0", "id": null, "method": "ping"}',
        ):
            assert _rpc(client, ledger_url, body).json()["error"]["code"] in (-32700, -32600)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "balances"}}
        assert _rpc(client, ledger_url, call).status_code == 400  # no session: initialize first
        assert _rpc(client, ledger_url, call, "no-such-session").status_code == 404
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        assert _rpc(client, ledger_url, ping, "no-such-session").status_code == 404
        sessions = httpx.get(f"{ledger_url}/health").json()["sessions"]
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        first = _rpc(client, ledger_url, init).headers[SESSION]
        hello = _rpc(client, ledger_url, init, first)  # initialized again: the first session is closed
        session = hello.headers[SESSION]
        assert session != first and httpx.get(f"{ledger_url}/health").json()["sessions"] == sessions + 1
        assert _rpc(client, ledger_url, ping, first).status_code == 404
        assert _rpc(client, ledger_url, ping, session).json()["result"] == {}
        for header, status in (
            ({"origin": "http://evil.example"}, 403),
            ({"mcp-protocol-version": "1999-01-01"}, 400),
        ):
            refused = client.post(f"{ledger_url}/mcp", json=ping, headers={SESSION: session, **header})
            assert refused.status_code == status and "error" in refused.json()
        assert hello.json()["result"]["capabilities"] == {"tools": {"listChanged": False}}
        # before any reset: a step is refused as the environment's error, never scored 0
        early = _rpc(client, ledger_url, call, session).json()["error"]
        assert early["code"] == -32000 and early["data"]["statekit_code"] == "reset_needed"
        reset = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "statekit_reset"}}
        bad_seed = {**reset, "params": {"name": "statekit_reset", "arguments": {"seed": -1}}}
        assert _rpc(client, ledger_url, bad_seed, session).json()["error"]["code"] == -32602
        reset["params"]["arguments"] = {"seed": 1}
        assert (
            "Move"
            in _rpc(client, ledger_url, reset, session).json()["result"]["structuredContent"]["observation"][
                "task"
            ]
        )
        unknown = {**call, "params": {"name": "launch_rockets", "arguments": {}}}
        wrong = _rpc(client, ledger_url, unknown, session).json()["result"]
        assert (
            wrong["isError"] and wrong["structuredContent"]["observation"]["error"]["code"] == "unknown_tool"
        )
        assert wrong["structuredContent"]["reward"] == 0.0
        fine = _rpc(client, ledger_url, call, session).json()["result"]
        assert not fine["isError"] and fine["structuredContent"]["observation"]["accounts"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert _rpc(client, ledger_url, note, session).status_code == 202
        assert client.get(f"{ledger_url}/mcp").status_code == 405
        assert client.delete(f"{ledger_url}/mcp", headers={SESSION: session}).status_code == 200
        assert _rpc(client, ledger_url, call, session).status_code == 404
        assert httpx.get(f"{ledger_url}/health").json()["sessions"] == sessions
