"""Bad input on every endpoint: a 4xx JSON error with a code, and the database exactly as it was.

One seeded database serves the whole module: every case must leave it untouched, which is what we
assert after each request anyway.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session, sessionmaker

from statekit_examples.apps.claims_app.api import create_app
from statekit_examples.apps.claims_app.clock import today
from statekit_examples.apps.claims_app.db import create_schema, make_engine, make_session_factory
from statekit_examples.apps.claims_app.fixtures import FixtureSummary, generate

from .conftest import login_with, make_settings
from .helpers import active_policy_number, claim_payload, clean_claims, db_snapshot, error_code, files_under


@dataclass
class Env:
    client: TestClient
    factory: sessionmaker[Session]
    upload_dir: Path
    headers: dict[str, dict[str, str]]
    refs: dict[str, str]
    policy: str
    late_policy: str


@pytest.fixture(scope="module")
def env(pg_cluster: Any, vendors_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    name = f"claims_badinput_{uuid.uuid4().hex[:10]}"
    url = pg_cluster.create_database(name)
    upload_dir = tmp_path_factory.mktemp("uploads")
    settings = make_settings(url, upload_dir, vendors_url, max_upload_bytes=1024)
    engine = make_engine(url)
    try:
        create_schema(engine)
        factory = make_session_factory(engine)
        with factory.begin() as session:
            summary: FixtureSummary = generate(session, seed=2, upload_dir=upload_dir)
        with TestClient(create_app(settings, session_factory=factory)) as client:
            login = login_with(client)

            def mine(status: str) -> str:
                return clean_claims(factory, summary, username="adjuster", status=status)[0]

            refs = {
                "submitted": mine("submitted"),
                "triaged": mine("triaged"),
                "approved": mine("approved"),
                "paid": mine("paid"),
                "other": clean_claims(factory, summary, username="adjuster", status="submitted", mine=False)[
                    0
                ],
                "unknown": "CLM-999999",
            }
            late_day = today() - timedelta(days=45)
            yield Env(
                client=client,
                factory=factory,
                upload_dir=upload_dir,
                headers={"mine": login(), "none": {}, "bogus": {"Authorization": "Bearer not-a-real-token"}},
                refs=refs,
                policy=active_policy_number(factory),
                late_policy=active_policy_number(factory, on=late_day),
            )
    finally:
        engine.dispose()
        pg_cluster.drop_database(name)


@dataclass
class Case:
    name: str
    method: str
    path: str
    status: int
    code: str
    json: Any = None
    params: dict[str, Any] | None = None
    files: dict[str, Any] | None = None
    content: bytes | None = None
    auth: str = "mine"
    extra_headers: dict[str, str] = field(default_factory=dict)


JSON_HEADERS = {"Content-Type": "application/json"}
BAD_JSON = b'{"body": "unterminated'


def submit(**overrides: Any) -> dict[str, Any]:
    """A valid claim body with ``overrides``; ``policy_number`` is filled in per test."""
    return claim_payload("{policy}", **overrides)


def without(body: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != key}


IN_THE_FUTURE = (today() + timedelta(days=2)).isoformat()
"""Computed when the cases are collected: two days ahead, so a run that crosses midnight still sends
a date after its own today (one day ahead became today at midnight and was accepted)."""

CASES = [
    # login
    Case(
        "login-missing-password", "POST", "/auth/login", 422, "invalid_request", json={"username": "adjuster"}
    ),
    Case(
        "login-wrong-type",
        "POST",
        "/auth/login",
        422,
        "invalid_request",
        json={"username": 5, "password": "x"},
    ),
    Case(
        "login-extra-field",
        "POST",
        "/auth/login",
        422,
        "invalid_request",
        json={"username": "adjuster", "password": "x", "admin": True},
    ),
    Case("login-not-an-object", "POST", "/auth/login", 422, "invalid_request", json=["adjuster", "pw"]),
    Case(
        "login-nul",
        "POST",
        "/auth/login",
        422,
        "invalid_request",
        json={"username": "a\x00", "password": "x"},
    ),
    Case(
        "login-bad-json",
        "POST",
        "/auth/login",
        400,
        "malformed_json",
        content=BAD_JSON,
        extra_headers=JSON_HEADERS,
    ),
    Case(
        "login-wrong-password",
        "POST",
        "/auth/login",
        401,
        "invalid_credentials",
        json={"username": "adjuster", "password": "guess"},
    ),
    Case(
        "login-unknown-user",
        "POST",
        "/auth/login",
        401,
        "invalid_credentials",
        json={"username": "nobody", "password": "claims-demo-password"},
    ),
    # authentication
    Case("list-no-token", "GET", "/claims", 401, "unauthorized", auth="none"),
    Case("list-bogus-token", "GET", "/claims", 401, "unauthorized", auth="bogus"),
    Case(
        "list-basic-auth",
        "GET",
        "/claims",
        401,
        "unauthorized",
        auth="none",
        extra_headers={"Authorization": "Basic eDp5"},
    ),
    Case("get-no-token", "GET", "/claims/{submitted}", 401, "unauthorized", auth="none"),
    # list
    Case("list-bad-status", "GET", "/claims", 422, "invalid_request", params={"status": "closed"}),
    Case("list-limit-zero", "GET", "/claims", 422, "invalid_request", params={"limit": 0}),
    Case("list-limit-text", "GET", "/claims", 422, "invalid_request", params={"limit": "ten"}),
    Case("list-negative-offset", "GET", "/claims", 422, "invalid_request", params={"offset": -1}),
    Case("list-huge-offset", "GET", "/claims", 422, "invalid_request", params={"offset": 10**12}),
    Case("list-bad-bool", "GET", "/claims", 422, "invalid_request", params={"assigned_to_me": "maybe"}),
    Case("list-long-query", "GET", "/claims", 422, "invalid_request", params={"q": "x" * 201}),
    # get
    Case("get-unknown", "GET", "/claims/{unknown}", 404, "claim_not_found"),
    Case("get-nul-reference", "GET", "/claims/CLM-%00", 404, "claim_not_found"),
    Case("note-nul-reference", "POST", "/claims/CLM-%00/notes", 404, "claim_not_found", json={"body": "x"}),
    # submit
    Case("submit-no-token", "POST", "/claims", 401, "unauthorized", json=submit(), auth="none"),
    Case(
        "submit-missing-amount", "POST", "/claims", 422, "invalid_request", json=without(submit(), "amount")
    ),
    Case("submit-missing-everything", "POST", "/claims", 422, "invalid_request", json={}),
    Case("submit-negative-amount", "POST", "/claims", 422, "invalid_request", json=submit(amount="-5.00")),
    Case("submit-zero-amount", "POST", "/claims", 422, "invalid_request", json=submit(amount=0)),
    Case("submit-text-amount", "POST", "/claims", 422, "invalid_request", json=submit(amount="lots")),
    Case("submit-three-decimals", "POST", "/claims", 422, "invalid_request", json=submit(amount="10.001")),
    Case("submit-bool-amount", "POST", "/claims", 422, "invalid_request", json=submit(amount=True)),
    Case("submit-nan-amount", "POST", "/claims", 422, "invalid_request", json=submit(amount="NaN")),
    Case(
        "submit-huge-amount",
        "POST",
        "/claims",
        422,
        "invalid_request",
        json=submit(amount="12345678901234.00"),
    ),
    Case(
        "submit-word-date", "POST", "/claims", 422, "invalid_request", json=submit(incident_date="yesterday")
    ),
    Case(
        "submit-number-date", "POST", "/claims", 422, "invalid_request", json=submit(incident_date=20240101)
    ),
    Case(
        "submit-impossible-date",
        "POST",
        "/claims",
        422,
        "invalid_request",
        json=submit(incident_date="2024-02-30"),
    ),
    Case(
        "submit-future-date",
        "POST",
        "/claims",
        422,
        "incident_in_future",
        json=submit(incident_date=IN_THE_FUTURE),
    ),
    Case(
        "submit-blank-description", "POST", "/claims", 422, "invalid_request", json=submit(description="   ")
    ),
    Case(
        "submit-nul-description", "POST", "/claims", 422, "invalid_request", json=submit(description="a\x00b")
    ),
    Case("submit-bad-country", "POST", "/claims", 422, "invalid_request", json=submit(loss_country="USA")),
    Case("submit-unknown-field", "POST", "/claims", 422, "invalid_request", json=submit(priority="high")),
    Case("submit-list-body", "POST", "/claims", 422, "invalid_request", json=[submit()]),
    Case(
        "submit-bad-json",
        "POST",
        "/claims",
        400,
        "malformed_json",
        content=BAD_JSON,
        extra_headers=JSON_HEADERS,
    ),
    Case(
        "submit-unknown-policy",
        "POST",
        "/claims",
        422,
        "unknown_policy",
        json=claim_payload("POL-00000000"),
    ),
    Case(
        "submit-late",
        "POST",
        "/claims",
        422,
        "filed_late",
        json=claim_payload("{late_policy}", incident_date=(today() - timedelta(days=45)).isoformat()),
    ),
    # notes
    Case("note-missing-body", "POST", "/claims/{submitted}/notes", 422, "invalid_request", json={}),
    Case("note-empty-body", "POST", "/claims/{submitted}/notes", 422, "invalid_request", json={"body": ""}),
    Case("note-number-body", "POST", "/claims/{submitted}/notes", 422, "invalid_request", json={"body": 42}),
    Case(
        "note-too-long",
        "POST",
        "/claims/{submitted}/notes",
        422,
        "invalid_request",
        json={"body": "x" * 5001},
    ),
    Case(
        "note-unknown-claim", "POST", "/claims/{unknown}/notes", 404, "claim_not_found", json={"body": "hi"}
    ),
    Case("note-other-adjuster", "POST", "/claims/{other}/notes", 403, "not_assigned", json={"body": "hi"}),
    Case(
        "note-bad-json",
        "POST",
        "/claims/{submitted}/notes",
        400,
        "malformed_json",
        content=BAD_JSON,
        extra_headers=JSON_HEADERS,
    ),
    # documents
    Case(
        "doc-no-file",
        "POST",
        "/claims/{submitted}/documents",
        422,
        "invalid_request",
        files={"other": ("a.txt", b"x")},
    ),
    Case(
        "doc-too-large",
        "POST",
        "/claims/{submitted}/documents",
        413,
        "file_too_large",
        files={"file": ("big.txt", b"x" * 1025, "text/plain")},
    ),
    Case(
        "doc-empty",
        "POST",
        "/claims/{submitted}/documents",
        422,
        "empty_file",
        files={"file": ("empty.txt", b"", "text/plain")},
    ),
    Case(
        "doc-unknown-claim",
        "POST",
        "/claims/{unknown}/documents",
        404,
        "claim_not_found",
        files={"file": ("a.txt", b"abc", "text/plain")},
    ),
    Case(
        "doc-other-adjuster",
        "POST",
        "/claims/{other}/documents",
        403,
        "not_assigned",
        files={"file": ("a.txt", b"abc", "text/plain")},
    ),
    Case(
        "doc-json-not-multipart",
        "POST",
        "/claims/{submitted}/documents",
        422,
        "invalid_request",
        json={"file": "abc"},
    ),
    # triage
    Case(
        "triage-bad-priority",
        "POST",
        "/claims/{submitted}/triage",
        422,
        "invalid_request",
        json={"priority": "urgent"},
    ),
    Case(
        "triage-number-priority",
        "POST",
        "/claims/{submitted}/triage",
        422,
        "invalid_request",
        json={"priority": 3},
    ),
    Case(
        "triage-extra-field",
        "POST",
        "/claims/{submitted}/triage",
        422,
        "invalid_request",
        json={"status": "paid"},
    ),
    Case("triage-unknown-claim", "POST", "/claims/{unknown}/triage", 404, "claim_not_found", json={}),
    Case("triage-other-adjuster", "POST", "/claims/{other}/triage", 403, "not_assigned", json={}),
    Case("triage-twice", "POST", "/claims/{triaged}/triage", 409, "invalid_transition", json={}),
    Case("triage-paid", "POST", "/claims/{paid}/triage", 409, "invalid_transition", json={}),
    # approve
    Case(
        "approve-number-reason",
        "POST",
        "/claims/{triaged}/approve",
        422,
        "invalid_request",
        json={"reason": 1},
    ),
    Case("approve-not-triaged", "POST", "/claims/{submitted}/approve", 409, "invalid_transition", json={}),
    Case("approve-other-adjuster", "POST", "/claims/{other}/approve", 403, "not_assigned", json={}),
    Case("approve-unknown-claim", "POST", "/claims/{unknown}/approve", 404, "claim_not_found", json={}),
    Case(
        "approve-bad-json",
        "POST",
        "/claims/{triaged}/approve",
        400,
        "malformed_json",
        content=BAD_JSON,
        extra_headers=JSON_HEADERS,
    ),
    # deny
    Case("deny-no-body", "POST", "/claims/{submitted}/deny", 422, "invalid_request"),
    Case("deny-missing-reason", "POST", "/claims/{submitted}/deny", 422, "invalid_request", json={}),
    Case(
        "deny-empty-reason", "POST", "/claims/{submitted}/deny", 422, "invalid_request", json={"reason": ""}
    ),
    Case(
        "deny-blank-reason",
        "POST",
        "/claims/{submitted}/deny",
        422,
        "invalid_request",
        json={"reason": "  \t "},
    ),
    Case("deny-paid", "POST", "/claims/{paid}/deny", 409, "invalid_transition", json={"reason": "No"}),
    Case(
        "deny-approved", "POST", "/claims/{approved}/deny", 409, "invalid_transition", json={"reason": "No"}
    ),
    Case("deny-other-adjuster", "POST", "/claims/{other}/deny", 403, "not_assigned", json={"reason": "No"}),
    Case(
        "deny-unknown-claim", "POST", "/claims/{unknown}/deny", 404, "claim_not_found", json={"reason": "No"}
    ),
    # payment request
    Case("pay-triaged", "POST", "/claims/{triaged}/payment-request", 409, "invalid_transition"),
    Case("pay-paid", "POST", "/claims/{paid}/payment-request", 409, "invalid_transition"),
    Case("pay-other-adjuster", "POST", "/claims/{other}/payment-request", 403, "not_assigned"),
    Case("pay-unknown-claim", "POST", "/claims/{unknown}/payment-request", 404, "claim_not_found"),
    Case("pay-no-token", "POST", "/claims/{approved}/payment-request", 401, "unauthorized", auth="none"),
    # routing
    Case("unknown-route", "GET", "/claimz", 404, "not_found"),
    Case("wrong-method", "DELETE", "/claims", 405, "method_not_allowed"),
]


def _fill(value: Any, env: Env) -> Any:
    names = env.refs | {"policy": env.policy, "late_policy": env.late_policy}
    if isinstance(value, str):
        return value.format(**names) if "{" in value else value
    if isinstance(value, dict):
        return {k: _fill(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, env) for v in value]
    return value


def test_cases_cover_every_endpoint() -> None:
    covered = {(case.method, case.path.split("/")[-1] if "{" in case.path else case.path) for case in CASES}
    for endpoint in [
        ("POST", "/auth/login"),
        ("GET", "/claims"),
        ("POST", "/claims"),
        ("GET", "{unknown}"),
        ("POST", "notes"),
        ("POST", "documents"),
        ("POST", "triage"),
        ("POST", "approve"),
        ("POST", "deny"),
        ("POST", "payment-request"),
    ]:
        assert endpoint in covered, endpoint


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_is_refused_and_changes_nothing(env: Env, case: Case) -> None:
    before = db_snapshot(env.factory)
    files_before = files_under(env.upload_dir)
    headers = env.headers[case.auth] | case.extra_headers
    response = env.client.request(
        case.method,
        _fill(case.path, env),
        json=_fill(case.json, env),
        params=case.params,
        files=case.files,
        content=case.content,
        headers=headers,
    )
    assert response.status_code == case.status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert error_code(response) == case.code
    assert db_snapshot(env.factory) == before
    assert files_under(env.upload_dir) == files_before


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
SUBMIT_FIELDS = list(claim_payload("x"))


@hypothesis_settings(max_examples=60, deadline=None)
@given(
    endpoint=st.sampled_from(
        ["/claims", "/claims/{submitted}/notes", "/claims/{triaged}/triage", "/auth/login"]
    ),
    body=json_values | st.fixed_dictionaries({}, optional={name: json_values for name in SUBMIT_FIELDS}),
)
def test_random_json_never_breaks_the_server(env: Env, endpoint: str, body: Any) -> None:
    response = env.client.post(_fill(endpoint, env), json=body, headers=env.headers["mine"])
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert error_code(response)
