"""Login, tokens, and who may change which claim."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from statekit_examples.apps.claims_app import security
from statekit_examples.apps.claims_app.clock import utcnow
from statekit_examples.apps.claims_app.fixtures import FixtureSummary

from .conftest import LoginFn
from .helpers import claim_row, clean_claims, db_snapshot, error_code


def test_password_hashing_round_trip() -> None:
    stored = security.hash_password("s3cret pass")
    assert stored.startswith("scrypt$16384$8$1$")
    assert security.verify_password("s3cret pass", stored)
    assert not security.verify_password("s3cret pass ", stored)
    assert not security.verify_password("s3cret pass", "garbage")
    assert security.hash_password("s3cret pass") != stored  # fresh salt every time


def test_every_fixture_adjuster_can_log_in(
    client: TestClient, login: LoginFn, seeded: FixtureSummary
) -> None:
    for username in seeded.adjusters:
        headers = login(username)
        assert client.get("/claims", params={"limit": 1}, headers=headers).status_code == 200


def test_token_expires_after_ttl(client: TestClient, login: LoginFn) -> None:
    headers = login()
    with time_machine.travel(utcnow() + timedelta(hours=7, minutes=59)):
        assert client.get("/claims", params={"limit": 1}, headers=headers).status_code == 200
    with time_machine.travel(utcnow() + timedelta(hours=8, minutes=1)):
        response = client.get("/claims", params={"limit": 1}, headers=headers)
    assert response.status_code == 401
    assert error_code(response) == "unauthorized"


@pytest.mark.parametrize(
    ("action", "body"),
    [
        ("notes", {"body": "Not my claim"}),
        ("triage", {"priority": "high"}),
        ("deny", {"reason": "Not my claim"}),
        ("approve", {}),
        ("payment-request", None),
    ],
)
def test_another_adjusters_claim_is_read_only(
    client: TestClient,
    login: LoginFn,
    seeded: FixtureSummary,
    session_factory: sessionmaker[Session],
    action: str,
    body: dict[str, str] | None,
) -> None:
    owner = seeded.adjusters[2]
    status = {"approve": "triaged", "payment-request": "approved"}.get(action, "submitted")
    reference = clean_claims(session_factory, seeded, username=owner, status=status)[0]
    headers = login("adjuster")
    assert client.get(f"/claims/{reference}", headers=headers).json()["assigned_to"] == owner
    before = db_snapshot(session_factory)
    response = client.post(f"/claims/{reference}/{action}", json=body, headers=headers)
    assert response.status_code == 403
    assert error_code(response) == "not_assigned"
    assert db_snapshot(session_factory) == before
    # The owner can do it.
    assert client.post(f"/claims/{reference}/{action}", json=body, headers=login(owner)).status_code in (
        200,
        201,
    )


def test_status_machine_refuses_illegal_transitions(
    client: TestClient, auth: dict[str, str], seeded: FixtureSummary, session_factory: sessionmaker[Session]
) -> None:
    reference = clean_claims(session_factory, seeded, username="adjuster", status="submitted")[1]
    steps = [
        ("approve", {}, 409),  # must be triaged first
        ("payment-request", None, 409),
        ("triage", {}, 200),
        ("triage", {}, 409),
        ("approve", {}, 200),
        ("deny", {"reason": "Changed my mind"}, 409),
        ("approve", {}, 409),
        ("payment-request", None, 201),
        ("payment-request", None, 409),
    ]
    for action, body, expected in steps:
        response = client.post(f"/claims/{reference}/{action}", json=body, headers=auth)
        assert response.status_code == expected, (action, response.text)
        if expected == 409:
            assert error_code(response) in ("invalid_transition", "payment_already_requested")
    assert claim_row(session_factory, reference).status == "approved"
