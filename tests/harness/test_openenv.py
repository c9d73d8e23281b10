"""OpenEnv's own client (openenv, unchanged) plays statekit environments over ``/ws``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from .conftest import TOKEN, ClaimsReference

if TYPE_CHECKING:
    from openenv.core import GenericEnvClient


@pytest.fixture(scope="module")
def openenv_client() -> type[GenericEnvClient]:
    """OpenEnv's client class, imported by the first test that uses it: ``openenv.core`` imports
    gradio (~3 CPU-s), which every test process would otherwise pay to collect this module."""
    from openenv.core import GenericEnvClient

    return GenericEnvClient


def test_openenv_client_plays_a_claims_episode(
    claims_server: str, claims_reference: ClaimsReference, openenv_client: type[GenericEnvClient]
) -> None:
    script, local = claims_reference.script(7), claims_reference.trace(7)
    with openenv_client(base_url=claims_server).sync() as env:
        first = env.reset(seed=7)
        assert first.observation == local.observations[0]
        assert first.reward is None and first.done is False
        results = [env.step(action) for action in script]
        state = env.state()
    assert [r.observation for r in results] == local.observations[1:]
    assert [r.reward for r in results] == local.rewards
    assert [r.done for r in results] == [False] * (len(script) - 1) + [True]
    assert state["step_count"] == len(script) and state["seed"] == 7
    assert state["digest"] == local.digests[-1]


def test_openenv_client_authenticates_with_the_token_in_the_url(
    token_url: str, openenv_client: type[GenericEnvClient]
) -> None:
    host = token_url.removeprefix("http://")
    with openenv_client(base_url=f"http://statekit:{TOKEN}@{host}").sync() as env:
        result = env.reset(seed=1)
        assert "Move" in result.observation["task"]
        assert env.step({"tool": "balances"}).observation["accounts"]
    for refused in (token_url, f"http://statekit:wrong@{host}"):
        client = openenv_client(base_url=refused).sync()
        try:
            with pytest.raises(ConnectionError, match="401"):
                client.connect()
        finally:
            client.close()


async def _exchange(url: str, messages: list[str]) -> list[dict[str, Any]]:
    async with connect(url.replace("http://", "ws://") + "/ws") as socket:
        replies = []
        for message in messages:
            await socket.send(message)
            replies.append(json.loads(await socket.recv()))
        return replies


def test_bad_messages_get_openenv_error_replies_and_the_session_survives(ledger_url: str) -> None:
    replies = asyncio.run(
        _exchange(
            ledger_url,
            [
                '{"type": "step", "data": {"tool": "balances"}}',
                "{not json",
                '["reset"]',
                '{"type": "teleport"}',
                '{"type": "reset", "data": {"seed": "seven"}}',
                '{"type": "reset", "data": {"seed": 2, "episode_id": "ignored"}}',
                '{"type": "step", "data": {"tool": "rm -rf"}}',
                '{"type": "step"}',
                '{"type": "state"}',
            ],
        )
    )
    codes = [r["data"].get("code") if r["type"] == "error" else r["type"] for r in replies]
    assert codes == [
        "EXECUTION_ERROR",  # step before reset
        "INVALID_JSON",
        "VALIDATION_ERROR",
        "UNKNOWN_TYPE",
        "VALIDATION_ERROR",
        "observation",
        "observation",  # an unknown tool is an ordinary step with an error observation
        "VALIDATION_ERROR",
        "state",
    ]
    assert "reset" in str(replies[0]["data"])
    unknown_tool = replies[6]["data"]
    assert unknown_tool["observation"]["error"]["code"] == "unknown_tool"
    assert replies[8]["data"]["step_count"] == 1


def test_a_refused_reset_over_the_socket_keeps_the_episode(ledger_url: str) -> None:
    replies = asyncio.run(
        _exchange(
            ledger_url,
            [
                '{"type": "reset", "data": {"seed": 5}}',
                '{"type": "step", "data": {"tool": "balances"}}',
                '{"type": "reset", "data": {"seed": 6, "options": {"max_steps": "x"}}}',
                '{"type": "state"}',
                '{"type": "step", "data": {"tool": "balances"}}',
            ],
        )
    )
    assert replies[2]["type"] == "error" and replies[2]["data"]["code"] == "VALIDATION_ERROR"
    assert replies[3]["data"]["seed"] == 5 and replies[3]["data"]["step_count"] == 1
    assert replies[4]["type"] == "observation" and replies[4]["data"]["info"]["step"] == 2


def test_deeply_nested_json_is_an_invalid_json_reply_and_the_socket_stays_open(ledger_url: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    nested_action = '{"type": "step", "data": ' + "[" * 5_000 + "]" * 5_000 + "}"
    replies = asyncio.run(
        _exchange(
            ledger_url,
            [
                '{"type": "reset", "data": {"seed": 1}}',
                deep,
                nested_action,
                '{"type": "state"}',
            ],
        )
    )
    assert replies[1]["type"] == "error" and replies[1]["data"]["code"] == "INVALID_JSON"
    assert "deep" in replies[1]["data"]["message"]
    assert replies[2]["type"] in ("error", "observation")
    if replies[2]["type"] == "observation":
        assert replies[2]["data"]["observation"]["error"]["code"] == "malformed_action"
    assert replies[3]["type"] == "state" and replies[3]["data"]["seed"] == 1


def test_a_full_server_refuses_a_socket_with_capacity_reached(serve_app: Callable[..., str]) -> None:
    url = serve_app(max_sessions=1)

    async def second_while_first_is_open() -> dict[str, Any]:
        ws = url.replace("http://", "ws://") + "/ws"
        async with connect(ws) as first:
            await first.send('{"type": "reset", "data": {"seed": 1}}')
            await first.recv()
            async with connect(ws) as second:
                return json.loads(await second.recv())

    reply = asyncio.run(second_while_first_is_open())
    assert reply["type"] == "error" and reply["data"]["code"] == "CAPACITY_REACHED"


def test_an_unauthenticated_socket_is_refused_before_it_opens(token_url: str) -> None:
    with pytest.raises(InvalidStatus) as refused:
        asyncio.run(_exchange(token_url, ['{"type": "state"}']))
    assert refused.value.response.status_code == 401
