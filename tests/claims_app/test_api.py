"""Happy paths through every endpoint, checked against what lands in the database."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timedelta
from decimal import Decimal

from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from statekit_examples.apps.claims_app import rules
from statekit_examples.apps.claims_app.clock import utcnow
from statekit_examples.apps.claims_app.config import Settings
from statekit_examples.apps.claims_app.fixtures import FixtureSummary
from statekit_examples.apps.claims_app.models import (
    AuditLog,
    AuthSession,
    Claim,
    Document,
    Job,
    Payment,
    Policy,
)

from .conftest import LoginFn
from .helpers import active_policy_number, claim_payload, claim_row, clean_claims


def submit(
    client: TestClient, auth: dict[str, str], factory: sessionmaker[Session], **overrides: object
) -> dict:
    response = client.post(
        "/claims", json=claim_payload(active_policy_number(factory), **overrides), headers=auth
    )
    assert response.status_code == 201, response.text
    return response.json()


def test_health(client: TestClient) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_login_issues_a_session(
    client: TestClient, seeded: FixtureSummary, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    response = client.post("/auth/login", json={"username": "adjuster", "password": seeded.password})
    assert response.status_code == 200
    body = response.json()
    assert body["adjuster"]["username"] == "adjuster"
    expires_at = datetime.fromisoformat(body["expires_at"])
    expected = utcnow() + timedelta(hours=settings.token_ttl_hours)
    assert abs((expires_at - expected).total_seconds()) < 60
    with session_factory() as session:
        stored = session.get_one(AuthSession, body["token"])
        assert stored.expires_at == expires_at
        logins = session.scalar(
            select(func.count()).select_from(AuditLog).where(AuditLog.action == "auth.login")
        )
        assert logins == 1


def test_list_claims_filters_and_pages(
    client: TestClient, auth: dict[str, str], seeded: FixtureSummary
) -> None:
    everything = client.get("/claims", params={"limit": 200}, headers=auth).json()
    assert everything["total"] == seeded.counts["claims"] == len(everything["items"])
    submitted_at = [item["submitted_at"] for item in everything["items"]]
    assert submitted_at == sorted(submitted_at, reverse=True)

    submitted = client.get("/claims", params={"status": "submitted", "limit": 200}, headers=auth).json()
    assert submitted["total"] > 0
    assert {item["status"] for item in submitted["items"]} == {"submitted"}

    mine = client.get("/claims", params={"assigned_to_me": "true", "limit": 200}, headers=auth).json()
    assert 0 < mine["total"] < everything["total"]
    assert {item["assigned_to"] for item in mine["items"]} == {"adjuster"}

    reference = everything["items"][7]["reference"]
    by_reference = client.get("/claims", params={"q": reference}, headers=auth).json()
    assert [item["reference"] for item in by_reference["items"]] == [reference]

    surname = everything["items"][3]["customer_name"].split()[-1]
    by_name = client.get("/claims", params={"q": surname.lower()}, headers=auth).json()
    assert by_name["total"] >= 1
    assert everything["items"][3]["reference"] in {item["reference"] for item in by_name["items"]}

    page1 = client.get("/claims", params={"limit": 10, "offset": 0}, headers=auth).json()
    page2 = client.get("/claims", params={"limit": 10, "offset": 10}, headers=auth).json()
    assert [i["reference"] for i in page1["items"] + page2["items"]] == [
        i["reference"] for i in everything["items"][:20]
    ]


def test_get_claim_shows_policy_notes_documents_payments(
    client: TestClient, auth: dict[str, str], seeded: FixtureSummary, session_factory: sessionmaker[Session]
) -> None:
    with session_factory() as session:
        reference = session.scalar(
            select(Claim.reference)
            .join(Document, Document.claim_id == Claim.id)
            .join(Payment, Payment.claim_id == Claim.id)
            .order_by(Claim.reference)
            .limit(1)
        )
    assert reference is not None
    response = client.get(f"/claims/{reference}", headers=auth)
    assert response.status_code == 200
    body = response.json()
    assert body["reference"] == reference
    assert body["status"] == "paid"
    assert body["policy"]["policy_number"] == body["policy_number"]
    assert 1 <= len(body["notes"]) <= 4
    assert body["documents"] and body["documents"][0]["sha256"]
    assert any(p["status"] == "executed" and p["gateway_transaction_id"] for p in body["payments"])
    assert body["checks"]["filed_within_window"] is True
    assert body["checks"]["policy_active_on_incident"] is True


def test_submit_claim_validates_address_and_queues_fraud_scoring(
    client: TestClient, auth: dict[str, str], seeded: FixtureSummary, session_factory: sessionmaker[Session]
) -> None:
    body = submit(client, auth, session_factory)
    # The reference sequence continues after the seeded claims.
    assert body["reference"] == f"CLM-{seeded.counts['claims'] + 1:06d}"
    assert body["status"] == "submitted"
    assert body["assigned_to"] == "adjuster"
    assert body["amount"] == "1234.56"
    assert body["address_valid"] is True
    assert body["address_validation_id"]
    assert body["fraud_score"] is None
    with session_factory() as session:
        claim = session.scalars(select(Claim).where(Claim.reference == body["reference"])).one()
        assert claim.amount == Decimal("1234.56")
        jobs = session.scalars(select(Job).where(Job.kind == "fraud_score")).all()
        assert [job.payload for job in jobs] == [{"claim_id": str(claim.id)}]
        assert jobs[0].status == "queued"
        audit = session.scalars(select(AuditLog).where(AuditLog.entity_id == str(claim.id))).one()
        assert audit.action == "claim.submitted" and audit.actor == "adjuster"

    second = submit(client, auth, session_factory, amount="99.10", loss_line1="Lighthouse Road")
    assert second["reference"] == f"CLM-{seeded.counts['claims'] + 2:06d}"
    assert second["address_valid"] is False  # the validator wants a house number


def test_add_note_touches_the_claim(
    client: TestClient, auth: dict[str, str], seeded: FixtureSummary, session_factory: sessionmaker[Session]
) -> None:
    reference = clean_claims(session_factory, seeded, username="adjuster", status="triaged")[0]
    before = claim_row(session_factory, reference)
    response = client.post(f"/claims/{reference}/notes", json={"body": "Called the insured."}, headers=auth)
    assert response.status_code == 201
    assert response.json()["author"] == "adjuster"
    after = claim_row(session_factory, reference)
    assert after.last_activity_at > before.last_activity_at
    assert after.updated_at > before.updated_at
    notes = client.get(f"/claims/{reference}", headers=auth).json()["notes"]
    assert notes[-1]["body"] == "Called the insured."


def test_upload_document_stores_file_and_hash(
    client: TestClient,
    auth: dict[str, str],
    seeded: FixtureSummary,
    session_factory: sessionmaker[Session],
    settings: Settings,
) -> None:
    reference = clean_claims(session_factory, seeded, username="adjuster", status="submitted")[0]
    content = b"Estimate: replace 3m of skirting board.\n"
    response = client.post(
        f"/claims/{reference}/documents",
        files={"file": ("../../etc/Repair estimate (v2).txt", content, "text/plain")},
        headers=auth,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["filename"] == "Repair_estimate_v2_.txt"
    assert body["size_bytes"] == len(content)
    assert body["sha256"] == hashlib.sha256(content).hexdigest()
    with session_factory() as session:
        document = session.get_one(Document, uuid.UUID(body["id"]))
    assert document.storage_path.startswith(f"{reference}/")
    assert (settings.upload_dir / document.storage_path).read_bytes() == content
    listed = client.get(f"/claims/{reference}", headers=auth).json()["documents"]
    assert body["id"] in {d["id"] for d in listed}


def test_triage_approve_and_request_payment(
    client: TestClient, auth: dict[str, str], seeded: FixtureSummary, session_factory: sessionmaker[Session]
) -> None:
    with session_factory() as session:
        first_audit_id = session.scalar(select(func.max(AuditLog.id)))
    created = submit(client, auth, session_factory, amount="2500.00")
    reference = created["reference"]

    triaged = client.post(f"/claims/{reference}/triage", json={"priority": "high"}, headers=auth)
    assert triaged.status_code == 200
    assert triaged.json()["status"] == "triaged" and triaged.json()["priority"] == "high"

    approved = client.post(f"/claims/{reference}/approve", json={"reason": "Photos match."}, headers=auth)
    assert approved.status_code == 200, approved.text
    with session_factory() as session:
        policy = session.scalars(select(Policy).where(Policy.policy_number == created["policy_number"])).one()
    expected = rules.payout(Decimal("2500.00"), policy.coverage_limit, policy.deductible)
    assert approved.json()["status"] == "approved"
    assert approved.json()["approved_amount"] == f"{expected:.2f}"
    assert approved.json()["decision_reason"] == "Photos match."

    payment = client.post(f"/claims/{reference}/payment-request", headers=auth)
    assert payment.status_code == 201, payment.text
    assert payment.json()["status"] == "requested"
    assert payment.json()["amount"] == f"{expected:.2f}"
    with session_factory() as session:
        kinds = session.scalars(select(Job.kind).order_by(Job.id)).all()
        assert kinds == ["fraud_score", "execute_payment"]
        actions = session.scalars(
            select(AuditLog.action).where(AuditLog.id > first_audit_id).order_by(AuditLog.id)
        ).all()
    assert actions == ["claim.submitted", "claim.triaged", "claim.approved", "payment.requested"]


def test_triage_without_body_defaults_to_normal_priority(
    client: TestClient, auth: dict[str, str], seeded: FixtureSummary, session_factory: sessionmaker[Session]
) -> None:
    reference = clean_claims(session_factory, seeded, username="adjuster", status="submitted")[0]
    response = client.post(f"/claims/{reference}/triage", headers=auth)
    assert response.status_code == 200
    assert response.json()["priority"] == "normal"


def test_deny_records_reason(
    client: TestClient, auth: dict[str, str], seeded: FixtureSummary, session_factory: sessionmaker[Session]
) -> None:
    reference = clean_claims(session_factory, seeded, username="adjuster", status="submitted")[0]
    response = client.post(f"/claims/{reference}/deny", json={"reason": "Wear and tear."}, headers=auth)
    assert response.status_code == 200
    assert response.json()["status"] == "denied"
    assert claim_row(session_factory, reference).decision_reason == "Wear and tear."


def test_another_adjuster_can_read_but_not_change(
    client: TestClient, login: LoginFn, seeded: FixtureSummary, session_factory: sessionmaker[Session]
) -> None:
    other = seeded.adjusters[1]
    reference = clean_claims(session_factory, seeded, username="adjuster", status="submitted")[0]
    headers = login(other)
    assert client.get(f"/claims/{reference}", headers=headers).status_code == 200
    response = client.post(f"/claims/{reference}/triage", json={}, headers=headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "not_assigned"
    assert claim_row(session_factory, reference).status == "submitted"
