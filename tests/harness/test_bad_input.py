"""Bad input gets a JSON error with a 4xx status, never a crash, and never touches another session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .conftest import TOKEN

MiB = 1 << 20


def _error(response: httpx.Response) -> dict[str, str]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["message"], "every error says what went wrong"
    return body["error"]


@pytest.fixture
def http(ledger_url: str) -> Iterator[httpx.Client]:
    opened: list[str] = []

    def remember(response: httpx.Response) -> None:
        if response.request.url.path == "/reset" and response.status_code == 200:
            response.read()
            opened.append(response.json()["session_id"])

    with httpx.Client(base_url=ledger_url, timeout=30, event_hooks={"response": [remember]}) as client:
        yield client
        for session in opened:
            client.delete("/session", params={"session_id": session})


@pytest.fixture
def bystander(http: httpx.Client) -> dict[str, Any]:
    """A healthy session in mid-episode; every bad request below must leave it exactly as it was."""
    started = http.post("/reset", json={"seed": 5}).json()
    session = started["session_id"]
    http.post("/step", json={"session_id": session, "action": {"tool": "balances"}})
    return {"session_id": session, "state": http.get("/state", params={"session_id": session}).json()}


JSON = {"content-type": "application/json"}

MATRIX: list[tuple[str, str, dict[str, Any], int, str]] = [
    ("malformed JSON", "/reset", {"content": b'{"seed": 7', "headers": JSON}, 400, "malformed_json"),
    ("malformed JSON in step", "/step", {"content": b"{,}", "headers": JSON}, 400, "malformed_json"),
    ("body is not an object", "/reset", {"json": [7]}, 422, "invalid_request"),
    ("seed is a string", "/reset", {"json": {"seed": "7"}}, 422, "invalid_request"),
    ("seed is a bool", "/reset", {"json": {"seed": True}}, 422, "invalid_request"),
    ("seed is negative", "/reset", {"json": {"seed": -1}}, 422, "invalid_request"),
    ("seed is a float", "/reset", {"json": {"seed": 7.5}}, 422, "invalid_request"),
    ("seed is huge", "/reset", {"json": {"seed": 2**64}}, 422, "invalid_request"),
    ("options is a list", "/reset", {"json": {"seed": 1, "options": [1]}}, 422, "invalid_request"),
    (
        "options the adapter refuses",
        "/reset",
        {"json": {"options": {"max_steps": "x"}}},
        422,
        "invalid_reset",
    ),
    ("unknown field", "/reset", {"json": {"sed": 7}}, 422, "invalid_request"),
    ("step without session", "/step", {"json": {"action": {"tool": "balances"}}}, 422, "invalid_request"),
    ("step without action", "/step", {"json": {"session_id": "x"}}, 422, "invalid_request"),
    ("session id is a number", "/step", {"json": {"session_id": 7, "action": {}}}, 422, "invalid_request"),
    ("unknown session", "/step", {"json": {"session_id": "nope", "action": {}}}, 404, "unknown_session"),
    ("reset unknown session", "/reset", {"json": {"session_id": "nope"}}, 404, "unknown_session"),
    ("snapshot unknown session", "/snapshot", {"json": {"session_id": "nope"}}, 404, "unknown_session"),
    (
        "restore unknown session",
        "/restore",
        {"json": {"session_id": "n", "snapshot_id": "s"}},
        404,
        "unknown_session",
    ),
    ("export unknown session", "/export", {"json": {"session_id": "nope"}}, 404, "unknown_session"),
    ("import without episode", "/import", {"json": {}}, 422, "invalid_request"),
    ("import not base64", "/import", {"json": {"episode": "%%%"}}, 422, "invalid_episode"),
    ("import not an episode", "/import", {"json": {"episode": "Z2FyYmFnZQ=="}}, 422, "invalid_episode"),
    ("oversized body", "/reset", {"content": b" " * (MiB + 1), "headers": JSON}, 413, "body_too_large"),
]


@pytest.mark.parametrize(
    ("path", "request_kwargs", "status", "code"), [m[1:] for m in MATRIX], ids=[m[0] for m in MATRIX]
)
def test_bad_requests_are_4xx_json_errors(
    http: httpx.Client,
    bystander: dict[str, Any],
    path: str,
    request_kwargs: dict[str, Any],
    status: int,
    code: str,
) -> None:
    response = http.post(path, **request_kwargs)
    assert response.status_code == status, response.text
    assert _error(response)["code"] == code
    session = bystander["session_id"]
    assert http.get("/state", params={"session_id": session}).json() == bystander["state"]
    assert http.get("/health").json()["status"] == "healthy"


def test_an_oversized_body_without_content_length_is_refused_too(http: httpx.Client) -> None:
    def chunks() -> Any:
        for _ in range(3):
            yield b" " * (MiB // 2)

    response = http.post("/reset", content=chunks(), headers=JSON)
    assert response.status_code == 413 and _error(response)["code"] == "body_too_large"


def test_an_unknown_tool_is_a_normal_step_with_an_error_observation(http: httpx.Client) -> None:
    session = http.post("/reset", json={"seed": 1}).json()["session_id"]
    for action, code in [
        ({"tool": "rm -rf"}, "unknown_tool"),
        ({"tool": "transfer", "cents": "lots"}, "invalid_arguments"),
        ("transfer", "malformed_action"),
        (None, "malformed_action"),
    ]:
        response = http.post("/step", json={"session_id": session, "action": action})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["observation"]["error"]["code"] == code
        assert body["reward"] == 0.0 and body["terminated"] is False


@pytest.mark.parametrize(
    ("action", "code"),
    [
        ('{"tool": "transfer", "source": "\\ud800", "target": "bob", "cents": 1}', "invalid_arguments"),
        ('{"tool": "balances", "x": ' + "[" * 500 + "]" * 500 + "}", "malformed_action"),
        ("[" * 100_000 + "]" * 100_000, None),
    ],
    ids=["lone-surrogate", "nested-action", "nested-body"],
)
def test_hostile_json_in_a_step_is_refused_and_the_session_goes_on(
    http: httpx.Client, action: str, code: str | None
) -> None:
    session = http.post("/reset", json={"seed": 1}).json()["session_id"]
    body = f'{{"session_id": "{session}", "action": {action}}}'.encode()
    response = http.post("/step", content=body, headers=JSON)
    assert response.status_code < 500, response.text
    if code is None:
        assert response.status_code == 400 and _error(response)["code"] == "malformed_json"
    else:
        assert response.status_code == 200 and response.json()["observation"]["error"]["code"] == code
    ok = http.post("/step", json={"session_id": session, "action": {"tool": "balances"}})
    assert ok.status_code == 200 and not ok.json()["truncated"]


def test_step_before_reset_and_after_the_end_ask_for_a_reset(http: httpx.Client) -> None:
    session = http.post("/reset", json={"seed": 1, "options": {"max_steps": 1}}).json()["session_id"]
    assert http.post("/step", json={"session_id": session, "action": {"tool": "balances"}}).json()[
        "truncated"
    ]
    ended = http.post("/step", json={"session_id": session, "action": {"tool": "balances"}})
    assert ended.status_code == 409 and _error(ended)["code"] == "reset_needed"
    assert "reset" in _error(ended)["message"]


def test_a_failed_reset_in_a_new_session_leaves_no_session_behind(http: httpx.Client) -> None:
    before = http.get("/health").json()["sessions"]
    assert http.post("/reset", json={"options": {"max_steps": []}}).status_code == 422
    assert http.get("/health").json()["sessions"] == before


def test_a_refused_reset_of_a_session_keeps_its_episode(http: httpx.Client) -> None:
    session = http.post("/reset", json={"seed": 5}).json()["session_id"]
    http.post("/step", json={"session_id": session, "action": {"tool": "balances"}})
    before = http.get("/state", params={"session_id": session}).json()
    refused = http.post("/reset", json={"session_id": session, "seed": 6, "options": {"max_steps": "x"}})
    assert refused.status_code == 422 and _error(refused)["code"] == "invalid_reset"
    assert http.get("/state", params={"session_id": session}).json() == before
    step = http.post("/step", json={"session_id": session, "action": {"tool": "balances"}})
    assert step.status_code == 200 and step.json()["info"]["step"] == 2


def test_restore_needs_a_snapshot_of_the_same_session(http: httpx.Client) -> None:
    a = http.post("/reset", json={"seed": 1}).json()["session_id"]
    b = http.post("/reset", json={"seed": 2}).json()["session_id"]
    fork = http.post("/snapshot", json={"session_id": a}).json()["snapshot_id"]
    stolen = http.post("/restore", json={"session_id": b, "snapshot_id": fork})
    assert stolen.status_code == 404 and _error(stolen)["code"] == "unknown_snapshot"
    assert http.post("/restore", json={"session_id": a, "snapshot_id": fork}).status_code == 200


def test_unknown_routes_and_methods_are_json_errors(http: httpx.Client) -> None:
    missing = http.get("/nowhere")
    assert missing.status_code == 404 and _error(missing)["code"] == "not_found"
    wrong = http.put("/reset")
    assert wrong.status_code == 405 and _error(wrong)["code"] == "method_not_allowed"
    no_id = http.get("/state")
    assert no_id.status_code == 422 and "session_id" in _error(no_id)["message"]


def test_closing_a_session_by_query_or_body(http: httpx.Client) -> None:
    a = http.post("/reset", json={"seed": 1}).json()["session_id"]
    b = http.post("/reset", json={"seed": 1}).json()["session_id"]
    assert http.delete("/session", params={"session_id": a}).json() == {"session_id": a, "closed": True}
    assert http.request("DELETE", "/session", json={"session_id": b}).json()["closed"] is True
    again = http.delete("/session", params={"session_id": a})
    assert again.status_code == 404 and _error(again)["code"] == "unknown_session"
    neither = http.delete("/session")
    assert neither.status_code == 422 and _error(neither)["code"] == "invalid_request"


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", "Bearer", TOKEN, "Basic !!!", "Basic dXNlcjp3cm9uZw=="],
    ids=["missing", "wrong", "empty", "no-scheme", "bad-basic", "wrong-basic"],
)
def test_without_the_token_every_route_but_health_is_401(token_url: str, authorization: str | None) -> None:
    url = token_url
    headers = {"Authorization": authorization} if authorization else {}
    with httpx.Client(base_url=url, headers=headers) as http:
        for method, path in [
            ("POST", "/reset"),
            ("POST", "/step"),
            ("GET", "/schema"),
            ("GET", "/openapi.json"),
        ]:
            response = http.request(method, path, json={})
            assert response.status_code == 401, (method, path)
            assert _error(response)["code"] == "unauthorized"
            assert response.headers["www-authenticate"].startswith("Bearer")
        assert http.get("/health").status_code == 200
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        reset = http.post("/reset", json={"seed": 1})
        assert reset.status_code == 200
        closed = http.delete("/session", params={"session_id": reset.json()["session_id"]})
        assert closed.json()["closed"] is True  # the harness is shared: what a test opens, it closes
