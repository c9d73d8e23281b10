"""The background worker end to end, with the vendor stubs really answering on loopback."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import time_machine
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from statekit_examples.apps.claims_app.clock import utcnow
from statekit_examples.apps.claims_app.config import Settings
from statekit_examples.apps.claims_app.fixtures import FixtureSummary
from statekit_examples.apps.claims_app.models import OPEN_STATUSES, AuditLog, Claim, Job, Payment
from statekit_examples.apps.claims_app.services import enqueue
from statekit_examples.apps.claims_app.worker import Worker, start_in_thread

from .conftest import LoginFn, make_settings
from .helpers import active_policy_number, claim_payload, claim_row, db_snapshot, error_code


def _submit(client: TestClient, auth: dict[str, str], factory: sessionmaker[Session], amount: str) -> str:
    response = client.post(
        "/claims", json=claim_payload(active_policy_number(factory), amount=amount), headers=auth
    )
    assert response.status_code == 201, response.text
    return str(response.json()["reference"])


def test_fraud_score_job_stores_the_vendor_score(
    client: TestClient, auth: dict[str, str], session_factory: sessionmaker[Session], worker: Worker
) -> None:
    reference = _submit(client, auth, session_factory, "640.00")
    assert worker.run_pending() == 1
    claim = claim_row(session_factory, reference)
    assert claim.fraud_score is not None and 0 <= claim.fraud_score <= 100
    assert isinstance(claim.fraud_score, int)
    assert uuid.UUID(str(claim.fraud_score_id))
    assert claim.fraud_checked_at is not None
    with session_factory() as session:
        job = session.scalars(select(Job)).one()
        assert (job.status, job.attempts, job.last_error) == ("done", 1, None)
        assert job.finished_at is not None
    assert worker.run_pending() == 0  # nothing left


def test_payment_is_executed_and_claim_paid(
    client: TestClient, auth: dict[str, str], session_factory: sessionmaker[Session], worker: Worker
) -> None:
    reference = _submit(client, auth, session_factory, "1800.00")
    assert (
        client.post(f"/claims/{reference}/triage", json={"priority": "low"}, headers=auth).status_code == 200
    )
    assert client.post(f"/claims/{reference}/approve", json={}, headers=auth).status_code == 200
    assert client.post(f"/claims/{reference}/payment-request", headers=auth).status_code == 201
    assert worker.run_pending() == 2  # fraud_score, then execute_payment

    body = client.get(f"/claims/{reference}", headers=auth).json()
    assert body["status"] == "paid"
    [payment] = body["payments"]
    assert payment["status"] == "executed"
    assert payment["gateway_transaction_id"].startswith("txn_")
    assert payment["executed_at"] is not None
    with session_factory() as session:
        actions = session.scalars(
            select(AuditLog.action).where(AuditLog.actor == "worker").order_by(AuditLog.id)
        ).all()
    assert actions[-2:] == ["claim.fraud_scored", "payment.executed"]
    again = client.post(f"/claims/{reference}/payment-request", headers=auth)
    assert again.status_code == 409 and error_code(again) == "invalid_transition"


def test_failed_payment_is_retried_then_marked_failed(
    client: TestClient,
    auth: dict[str, str],
    settings: Settings,
    session_factory: sessionmaker[Session],
    vendors_url: str,
) -> None:
    reference = _submit(client, auth, session_factory, "300.00")
    client.post(f"/claims/{reference}/triage", json={}, headers=auth)
    client.post(f"/claims/{reference}/approve", json={}, headers=auth)
    assert client.post(f"/claims/{reference}/payment-request", headers=auth).status_code == 201
    # The gateway answers 404 (a wrong base URL after a vendor migration, say).
    broken_settings = make_settings(
        settings.db_url, settings.upload_dir, vendors_url, payment_url=f"{vendors_url}/payments-old"
    )
    broken = Worker(session_factory, broken_settings)
    assert broken.run_pending() == 2
    with session_factory() as session:
        job = session.scalars(select(Job).where(Job.kind == "execute_payment")).one()
        assert (job.status, job.attempts) == ("queued", 1)
        assert job.last_error is not None and "HTTP 404" in job.last_error
        assert job.run_after > utcnow()
    for minutes in (2, 10):
        with time_machine.travel(utcnow() + timedelta(minutes=minutes)):
            assert broken.run_pending() == 1
    with session_factory() as session:
        job = session.scalars(select(Job).where(Job.kind == "execute_payment")).one()
        assert (job.status, job.attempts) == ("failed", 3)
        payment = session.scalars(
            select(Payment).join(Claim, Payment.claim_id == Claim.id).where(Claim.reference == reference)
        ).one()
        assert payment.status == "requested" and payment.gateway_transaction_id is None
    assert claim_row(session_factory, reference).status == "approved"


def test_jobs_run_only_when_due(session_factory: sessionmaker[Session], worker: Worker) -> None:
    with session_factory.begin() as session:
        job = enqueue(session, "sla_sweep", {})
        job.run_after = utcnow() + timedelta(hours=1)
    assert worker.run_pending() == 0
    with time_machine.travel(utcnow() + timedelta(hours=2)):
        assert worker.run_pending() == 1


def test_unknown_job_kind_fails_without_stopping_the_queue(
    session_factory: sessionmaker[Session], worker: Worker
) -> None:
    with session_factory.begin() as session:
        enqueue(session, "reindex_everything", {})
        enqueue(session, "sla_sweep", {})
    assert worker.run_pending() == 2
    with session_factory() as session:
        jobs = {job.kind: job for job in session.scalars(select(Job))}
    assert jobs["reindex_everything"].status == "queued" and "unknown job kind" in str(
        jobs["reindex_everything"].last_error
    )
    assert jobs["sla_sweep"].status == "done"


def test_sla_sweep_escalates_exactly_the_overdue_claims(
    seeded: FixtureSummary, session_factory: sessionmaker[Session], worker: Worker
) -> None:
    worker.enqueue_sla_sweep()
    assert worker.run_pending() == 1
    with session_factory() as session:
        escalated_open = session.scalars(
            select(Claim.reference).where(Claim.status.in_(OPEN_STATUSES), Claim.escalated.is_(True))
        ).all()
        audited = session.scalars(select(AuditLog.detail).where(AuditLog.action == "claim.escalated")).all()
    assert sorted(escalated_open) == seeded.planted["overdue"]
    assert set(seeded.planted["overdue"]) <= {detail.get("reference") for detail in audited}
    worker.enqueue_sla_sweep()
    before = db_snapshot(session_factory)
    assert worker.run_pending() == 1
    after = db_snapshot(session_factory)
    assert after["claims"] == before["claims"]  # nothing new to escalate


def test_sla_escalation_after_the_clock_moves(
    client: TestClient, login: LoginFn, session_factory: sessionmaker[Session], worker: Worker
) -> None:
    reference = _submit(client, login(), session_factory, "410.00")
    worker.run_pending()
    with time_machine.travel(utcnow() + timedelta(days=4, hours=23)):
        worker.enqueue_sla_sweep()
        worker.run_pending()
        assert claim_row(session_factory, reference).escalated is False
    with time_machine.travel(utcnow() + timedelta(days=5, hours=1)):
        worker.enqueue_sla_sweep()
        worker.run_pending()
        claim = claim_row(session_factory, reference)
        assert claim.escalated is True
        assert claim.escalated_at is not None and claim.escalated_at > claim.last_activity_at


def test_activity_resets_the_sla_clock(
    client: TestClient,
    login: LoginFn,
    seeded: FixtureSummary,
    session_factory: sessionmaker[Session],
    worker: Worker,
) -> None:
    reference = seeded.planted["overdue"][0]
    headers = login()
    assert (
        client.post(
            f"/claims/{reference}/notes", json={"body": "Chased the broker."}, headers=headers
        ).status_code
        == 201
    )
    worker.enqueue_sla_sweep()
    worker.run_pending()
    assert claim_row(session_factory, reference).escalated is False
    with session_factory.begin() as session:  # and an old enough touch is overdue again
        session.execute(
            update(Claim)
            .where(Claim.reference == reference)
            .values(last_activity_at=utcnow() - timedelta(days=6))
        )
    worker.enqueue_sla_sweep()
    worker.run_pending()
    assert claim_row(session_factory, reference).escalated is True


def test_run_forever_and_start_in_thread(
    client: TestClient, auth: dict[str, str], settings: Settings, session_factory: sessionmaker[Session]
) -> None:
    reference = _submit(client, auth, session_factory, "512.00")
    fast = make_settings(
        settings.db_url,
        settings.upload_dir,
        settings.fraud_url.removesuffix("/fraud"),
        worker_poll_seconds=0.05,
    )
    running = start_in_thread(session_factory, fast)
    try:
        deadline = time.monotonic() + 20
        while claim_row(session_factory, reference).fraud_score is None:
            assert time.monotonic() < deadline, "worker thread did not score the claim"
            time.sleep(0.05)
    finally:
        running.stop()
    assert not running.thread.is_alive()
    with session_factory() as session:
        sweeps = session.scalars(select(Job.status).where(Job.kind == "sla_sweep")).all()
    assert sweeps and set(sweeps) <= {"done"}  # an SLA sweep is scheduled as soon as it starts
    assert isinstance(running.stop_event, threading.Event) and running.stop_event.is_set()


def test_submit_fails_cleanly_when_the_address_vendor_is_down(
    client: TestClient, auth: dict[str, str], settings: Settings, session_factory: sessionmaker[Session]
) -> None:
    from statekit_examples.apps.claims_app.api import create_app

    down = make_settings(settings.db_url, settings.upload_dir, "http://127.0.0.1:9")  # discard port: refused
    before = db_snapshot(session_factory)
    with TestClient(create_app(down, session_factory=session_factory)) as offline:
        response = offline.post(
            "/claims", json=claim_payload(active_policy_number(session_factory)), headers=auth
        )
    assert response.status_code == 502
    assert error_code(response) == "integration_failed"
    assert db_snapshot(session_factory) == before
