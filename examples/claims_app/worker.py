"""Background jobs: fraud scoring, payout execution and the SLA sweep.

Jobs live in the ``jobs`` table so they survive restarts; ``run_forever`` is what the server's
worker thread runs, ``run_pending`` does one pass and is handy from scripts.
"""

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from . import rules
from .clock import utcnow
from .config import Settings
from .integrations import FraudClient, PaymentGateway
from .models import OPEN_STATUSES, Claim, Job, Payment, Policy
from .services import PAYOUT_CURRENCY, audit, enqueue

log = logging.getLogger(__name__)

ACTOR = "worker"
MAX_ATTEMPTS = 3
RETRY_BACKOFF = timedelta(minutes=1)


class Worker:
    def __init__(self, session_factory: sessionmaker[Session], settings: Settings) -> None:
        self.session_factory = session_factory
        self.settings = settings
        self.handlers: dict[str, Callable[[Session, dict[str, Any]], None]] = {
            "fraud_score": self._fraud_score,
            "execute_payment": self._execute_payment,
            "sla_sweep": self._sla_sweep,
        }

    # --- scheduling ---------------------------------------------------------------------------

    def enqueue_sla_sweep(self) -> None:
        with self.session_factory.begin() as session:
            enqueue(session, "sla_sweep", {})

    def run_pending(self) -> int:
        """Run every job due now, oldest ``run_after`` first (ties by id); return how many ran."""
        now = utcnow()
        ran = 0
        while (job_id := self._take_next(now)) is not None:
            self._run(job_id)
            ran += 1
        return ran

    def run_forever(self, stop: threading.Event) -> None:
        """Poll for jobs until ``stop`` is set, scheduling an SLA sweep every ``sla_sweep_seconds``."""
        next_sweep = time.monotonic()
        while not stop.is_set():
            try:
                if time.monotonic() >= next_sweep:
                    self.enqueue_sla_sweep()
                    next_sweep = time.monotonic() + self.settings.sla_sweep_seconds
                self.run_pending()
            except Exception:
                log.exception("worker pass failed; retrying after the poll interval")
            stop.wait(self.settings.worker_poll_seconds)

    # --- execution ----------------------------------------------------------------------------

    def _take_next(self, now: Any) -> int | None:
        """Mark the next due job running (row-locked, so two workers never take the same job)."""
        with self.session_factory.begin() as session:
            job = session.scalars(
                select(Job)
                .where(Job.status == "queued", Job.run_after <= now)
                .order_by(Job.run_after, Job.id)
                .limit(1)
                .with_for_update(skip_locked=True)
            ).first()
            if job is None:
                return None
            job.status = "running"
            job.attempts += 1
            return job.id

    def _run(self, job_id: int) -> None:
        try:
            with self.session_factory.begin() as session:
                job = session.get_one(Job, job_id)
                handler = self.handlers.get(job.kind)
                if handler is None:
                    raise ValueError(f"unknown job kind {job.kind!r}")
                handler(session, job.payload)
                job.status = "done"
                job.finished_at = utcnow()
                job.last_error = None
        except Exception as exc:
            log.warning("job %s failed: %s", job_id, exc)
            self._record_failure(job_id, exc)

    def _record_failure(self, job_id: int, exc: Exception) -> None:
        with self.session_factory.begin() as session:
            job = session.get_one(Job, job_id)
            job.last_error = f"{type(exc).__name__}: {exc}"[:2000]
            if job.attempts < MAX_ATTEMPTS:
                job.status = "queued"
                job.run_after = utcnow() + RETRY_BACKOFF * job.attempts
            else:
                job.status = "failed"
                job.finished_at = utcnow()

    # --- job kinds ----------------------------------------------------------------------------

    def _fraud_score(self, session: Session, payload: dict[str, Any]) -> None:
        claim = session.get_one(Claim, uuid.UUID(payload["claim_id"]))
        policy = session.get_one(Policy, claim.policy_id)
        result = FraudClient.from_settings(self.settings).score(
            claim_reference=claim.reference, amount=claim.amount, customer_id=str(policy.customer_id)
        )
        now = utcnow()
        claim.fraud_score = result.score
        claim.fraud_score_id = result.score_id
        claim.fraud_checked_at = now
        claim.updated_at = now
        audit(
            session,
            ACTOR,
            "claim.fraud_scored",
            "claim",
            claim.id,
            reference=claim.reference,
            score=result.score,
            score_id=result.score_id,
        )

    def _execute_payment(self, session: Session, payload: dict[str, Any]) -> None:
        payment = session.get_one(Payment, uuid.UUID(payload["payment_id"]), with_for_update=True)
        if payment.status != "requested":
            return  # already handled (e.g. a retried job after a crash)
        claim = session.get_one(Claim, payment.claim_id, with_for_update=True)
        if claim.status != "approved":
            raise ValueError(f"claim {claim.reference} is {claim.status}, not approved")
        result = PaymentGateway.from_settings(self.settings).charge(
            amount=payment.amount,
            currency=PAYOUT_CURRENCY,
            reference=claim.reference,
            idempotency_key=str(payment.id),
        )
        now = utcnow()
        payment.status = "executed"
        payment.gateway_transaction_id = result.transaction_id
        payment.executed_at = now
        claim.status = "paid"
        claim.updated_at = now
        audit(
            session,
            ACTOR,
            "payment.executed",
            "payment",
            payment.id,
            reference=claim.reference,
            amount=payment.amount,
            transaction_id=result.transaction_id,
        )

    def _sla_sweep(self, session: Session, payload: dict[str, Any]) -> None:
        now = utcnow()
        cutoff = now - timedelta(days=self.settings.sla_days)
        overdue = session.scalars(
            select(Claim)
            .where(
                Claim.status.in_(OPEN_STATUSES), Claim.escalated.is_(False), Claim.last_activity_at <= cutoff
            )
            .order_by(Claim.reference)
            .with_for_update()
        ).all()
        for claim in overdue:
            if not rules.is_overdue(claim.status, claim.last_activity_at, self.settings.sla_days, now=now):
                continue
            claim.escalated = True
            claim.escalated_at = now
            claim.updated_at = now
            audit(
                session,
                ACTOR,
                "claim.escalated",
                "claim",
                claim.id,
                reference=claim.reference,
                last_activity_at=claim.last_activity_at,
            )


@dataclass
class RunningWorker:
    """Handle on a worker thread started by :func:`start_in_thread`."""

    thread: threading.Thread
    stop_event: threading.Event

    def stop(self, timeout: float = 10.0) -> None:
        self.stop_event.set()
        self.thread.join(timeout)


def start_in_thread(session_factory: sessionmaker[Session], settings: Settings) -> RunningWorker:
    """Start ``Worker.run_forever`` on a daemon thread (used by ``serve``)."""
    stop = threading.Event()
    worker = Worker(session_factory, settings)
    thread = threading.Thread(target=worker.run_forever, args=(stop,), name="claims-worker", daemon=True)
    thread.start()
    return RunningWorker(thread=thread, stop_event=stop)
