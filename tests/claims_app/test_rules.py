"""Business rules: the pure functions, then the same rules enforced through the API."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from statekit_examples.apps.claims_app import rules
from statekit_examples.apps.claims_app.clock import today, utcnow
from statekit_examples.apps.claims_app.fixtures import FixtureSummary

from .conftest import LoginFn
from .helpers import (
    active_policy_number,
    claim_payload,
    claim_row,
    db_snapshot,
    error_code,
    inactive_policy_number,
)

# --- pure rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("days_after_incident", "within"),
    [(0, True), (29, True), (30, True), (31, False), (400, False)],
)
def test_filing_window_is_inclusive_of_day_30(days_after_incident: int, within: bool) -> None:
    incident = date(2024, 3, 1)
    submitted_at = datetime(2024, 3, 1, 23, 59, tzinfo=UTC) + timedelta(days=days_after_incident)
    assert rules.filed_within_window(incident, submitted_at, 30) is within


@pytest.mark.parametrize(
    ("day", "active"),
    [
        (date(2023, 12, 31), False),
        (date(2024, 1, 1), True),
        (date(2024, 12, 30), True),
        (date(2024, 12, 31), False),
    ],
)
def test_policy_active_on_covers_effective_to_expiry(day: date, active: bool) -> None:
    assert rules.policy_active_on(date(2024, 1, 1), date(2024, 12, 30), day) is active


@pytest.mark.parametrize(
    ("amount", "limit", "deductible", "expected"),
    [
        ("1000.00", "5000.00", "250.00", "750.00"),  # under the limit: amount minus deductible
        ("9000.00", "5000.00", "250.00", "4750.00"),  # capped at the limit first
        ("200.00", "5000.00", "250.00", "0.00"),  # deductible larger than the loss: nothing
        ("1234.56", "5000.00", "0.00", "1234.56"),
    ],
)
def test_payout(amount: str, limit: str, deductible: str, expected: str) -> None:
    result = rules.payout(Decimal(amount), Decimal(limit), Decimal(deductible))
    assert result == Decimal(expected)
    assert result.as_tuple().exponent == -2


def test_sla_overdue_only_for_open_claims_past_the_deadline() -> None:
    now = datetime(2024, 6, 10, 12, 0, tzinfo=UTC)
    five_days_ago = now - timedelta(days=5)
    assert rules.is_overdue("submitted", five_days_ago, 5, now=now)
    assert rules.is_overdue("triaged", five_days_ago - timedelta(hours=1), 5, now=now)
    assert not rules.is_overdue("triaged", five_days_ago + timedelta(seconds=1), 5, now=now)
    assert not rules.is_overdue("approved", five_days_ago - timedelta(days=30), 5, now=now)
    with time_machine.travel(now, tick=False):
        assert rules.is_overdue("submitted", five_days_ago, 5)  # reads the clock when not told "now"


def test_duplicate_detection_ignores_denied_claims() -> None:
    key = rules.ClaimKey("policy-1", date(2024, 5, 1), Decimal("100.00"), "submitted")
    assert rules.is_duplicate(key, rules.ClaimKey("policy-1", date(2024, 5, 1), Decimal("100.0"), "paid"))
    assert not rules.is_duplicate(
        key, rules.ClaimKey("policy-1", date(2024, 5, 1), Decimal("100.00"), "denied")
    )
    assert not rules.is_duplicate(
        key, rules.ClaimKey("policy-2", date(2024, 5, 1), Decimal("100.00"), "paid")
    )
    assert not rules.is_duplicate(
        key, rules.ClaimKey("policy-1", date(2024, 5, 2), Decimal("100.00"), "paid")
    )
    assert not rules.is_duplicate(
        key, rules.ClaimKey("policy-1", date(2024, 5, 1), Decimal("100.01"), "paid")
    )


# --- rules enforced by the API -------------------------------------------------------------------


def test_submit_on_the_last_day_of_the_window_then_one_day_late(
    client: TestClient, login: LoginFn, session_factory: sessionmaker[Session]
) -> None:
    auth = login()
    incident = today() - timedelta(days=30)
    number = active_policy_number(session_factory, on=incident)
    on_time = client.post(
        "/claims",
        json=claim_payload(number, incident_date=incident.isoformat(), amount="10.00"),
        headers=auth,
    )
    assert on_time.status_code == 201, on_time.text
    with time_machine.travel(utcnow() + timedelta(days=1)):
        tomorrow_auth = login()  # yesterday's token has expired
        late = client.post(
            "/claims",
            json=claim_payload(number, incident_date=incident.isoformat(), amount="20.00"),
            headers=tomorrow_auth,
        )
    assert late.status_code == 422, late.text
    assert error_code(late) == "filed_late"


def test_submit_refuses_policy_not_in_force_and_future_incidents(
    client: TestClient, auth: dict[str, str], session_factory: sessionmaker[Session]
) -> None:
    incident = today() - timedelta(days=2)
    before = db_snapshot(session_factory)
    inactive = client.post(
        "/claims", json=claim_payload(inactive_policy_number(session_factory, incident)), headers=auth
    )
    assert inactive.status_code == 422 and error_code(inactive) == "policy_inactive"
    future = client.post(
        "/claims",
        json=claim_payload(
            active_policy_number(session_factory), incident_date=(today() + timedelta(days=1)).isoformat()
        ),
        headers=auth,
    )
    assert future.status_code == 422 and error_code(future) == "incident_in_future"
    assert db_snapshot(session_factory) == before


def test_submit_refuses_a_duplicate_of_a_live_claim(
    client: TestClient, auth: dict[str, str], session_factory: sessionmaker[Session]
) -> None:
    payload = claim_payload(active_policy_number(session_factory), amount="777.70")
    first = client.post("/claims", json=payload, headers=auth)
    assert first.status_code == 201
    again = client.post("/claims", json=payload | {"amount": "777.7"}, headers=auth)
    assert again.status_code == 409 and error_code(again) == "duplicate_claim"
    denied = client.post(
        f"/claims/{first.json()['reference']}/deny", json={"reason": "Filed twice"}, headers=auth
    )
    assert denied.status_code == 200
    # Once the first one is denied, the loss can be claimed again.
    assert client.post("/claims", json=payload, headers=auth).status_code == 201


def _triaged(client: TestClient, auth: dict[str, str], reference: str) -> None:
    if client.get(f"/claims/{reference}", headers=auth).json()["status"] == "submitted":
        assert client.post(f"/claims/{reference}/triage", json={}, headers=auth).status_code == 200


@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [
        ("filed_late", 422, "filed_late"),
        ("policy_inactive", 422, "policy_inactive"),
        ("over_coverage", 422, "over_coverage_limit"),
        ("duplicate", 409, "duplicate_claim"),
    ],
)
def test_approve_refuses_planted_rule_breakers(
    client: TestClient,
    auth: dict[str, str],
    seeded: FixtureSummary,
    session_factory: sessionmaker[Session],
    kind: str,
    status: int,
    code: str,
) -> None:
    reference = seeded.planted[kind][0]
    _triaged(client, auth, reference)
    before = db_snapshot(session_factory)
    response = client.post(f"/claims/{reference}/approve", json={"reason": "Looks fine"}, headers=auth)
    assert response.status_code == status
    assert error_code(response) == code
    assert db_snapshot(session_factory) == before
    assert claim_row(session_factory, reference).status == "triaged"


def test_approve_pays_out_capped_amount_minus_deductible(
    client: TestClient, auth: dict[str, str], seeded: FixtureSummary, session_factory: sessionmaker[Session]
) -> None:
    for reference in seeded.planted["overdue"]:  # overdue claims are otherwise in order
        _triaged(client, auth, reference)
        body = client.get(f"/claims/{reference}", headers=auth).json()
        response = client.post(f"/claims/{reference}/approve", headers=auth)
        assert response.status_code == 200, response.text
        policy = body["policy"]
        expected = max(
            min(Decimal(body["amount"]), Decimal(policy["coverage_limit"])) - Decimal(policy["deductible"]),
            Decimal("0"),
        )
        assert Decimal(response.json()["approved_amount"]) == expected
        assert response.json()["approved_amount"] == body["checks"]["expected_payout"]
