"""Use cases of the claims desk. Each runs inside the caller's transaction and leaves an audit trail."""

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Integer, and_, cast, func, or_, select
from sqlalchemy.orm import Session

from . import rules, views
from .clock import today, utcnow
from .config import Settings
from .errors import Conflict, Forbidden, NotFound, PayloadTooLarge, RuleViolation, Unauthorized
from .integrations import AddressValidator
from .models import (
    Adjuster,
    AuditLog,
    AuthSession,
    Claim,
    ClaimNote,
    Customer,
    Document,
    Job,
    Payment,
    Policy,
    claim_reference_seq,
)
from .schemas import SubmitClaimRequest
from .security import new_token, verify_password

# Which statuses each action may start from; anything else is an invalid transition.
ALLOWED_FROM = {
    "triage": ("submitted",),
    "approve": ("triaged",),
    "deny": ("submitted", "triaged"),
    "request_payment": ("approved",),
}
PAYOUT_CURRENCY = "USD"


@dataclass(frozen=True)
class Actor:
    """The logged-in adjuster a request acts for."""

    id: uuid.UUID
    username: str


def _jsonable(value: object) -> object:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def audit(
    session: Session, actor: str, action: str, entity: str, entity_id: object, **detail: object
) -> None:
    """Record who did what; the compliance team reads this table."""
    session.add(
        AuditLog(
            actor=actor,
            action=action,
            entity=entity,
            entity_id=str(entity_id),
            detail={key: _jsonable(value) for key, value in detail.items()},
        )
    )


def enqueue(session: Session, kind: str, payload: dict[str, Any]) -> Job:
    job = Job(kind=kind, payload=payload, status="queued", run_after=utcnow(), attempts=0)
    session.add(job)
    return job


# --- authentication -------------------------------------------------------------------------------


def login(session: Session, settings: Settings, username: str, password: str) -> dict[str, Any]:
    adjuster = session.scalars(select(Adjuster).where(Adjuster.username == username)).one_or_none()
    if adjuster is None or not verify_password(password, adjuster.password_hash):
        raise Unauthorized("wrong username or password", code="invalid_credentials")
    expires_at = utcnow() + timedelta(hours=settings.token_ttl_hours)
    auth = AuthSession(token=new_token(), adjuster_id=adjuster.id, expires_at=expires_at)
    session.add(auth)
    audit(session, adjuster.username, "auth.login", "adjuster", adjuster.id)
    return {
        "token": auth.token,
        "expires_at": views.iso(expires_at),
        "adjuster": views.adjuster_view(adjuster),
    }


def authenticate(session: Session, token: str) -> Actor:
    if not token or "\x00" in token:
        raise Unauthorized("missing or invalid bearer token")
    row = session.execute(
        select(Adjuster.id, Adjuster.username)
        .join(AuthSession, AuthSession.adjuster_id == Adjuster.id)
        .where(AuthSession.token == token, AuthSession.expires_at > utcnow())
    ).one_or_none()
    if row is None:
        raise Unauthorized("missing, invalid or expired bearer token")
    return Actor(id=row.id, username=row.username)


# --- reading --------------------------------------------------------------------------------------


def _like_pattern(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def list_claims(
    session: Session,
    actor: Actor,
    *,
    status: str | None = None,
    q: str | None = None,
    assigned_to_me: bool = False,
    limit: int = 50,
    offset: int = 0,
) -> dict[str, Any]:
    stmt = (
        select(Claim, Policy.policy_number, Customer.full_name, Adjuster.username)
        .join(Policy, Claim.policy_id == Policy.id)
        .join(Customer, Policy.customer_id == Customer.id)
        .outerjoin(Adjuster, Claim.assigned_adjuster_id == Adjuster.id)
    )
    if status:
        stmt = stmt.where(Claim.status == status)
    if q:
        pattern = _like_pattern(q)
        stmt = stmt.where(
            or_(
                Claim.reference.ilike(pattern, escape="\\"),
                Claim.description.ilike(pattern, escape="\\"),
                Customer.full_name.ilike(pattern, escape="\\"),
            )
        )
    if assigned_to_me:
        stmt = stmt.where(Claim.assigned_adjuster_id == actor.id)
    total = session.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    rows = session.execute(
        stmt.order_by(Claim.submitted_at.desc(), Claim.reference.desc()).limit(limit).offset(offset)
    ).all()
    items = [views.claim_summary(claim, number, name, username) for claim, number, name, username in rows]
    return {"items": items, "total": total, "limit": limit, "offset": offset}


def _get_claim(session: Session, reference: str, *, for_update: bool = False) -> Claim:
    if "\x00" in reference:  # not a reference we could have issued, and PostgreSQL rejects NUL
        raise NotFound(f"claim {reference!r} does not exist", code="claim_not_found")
    stmt = select(Claim).where(Claim.reference == reference)
    if for_update:
        stmt = stmt.with_for_update()
    claim = session.scalars(stmt).one_or_none()
    if claim is None:
        raise NotFound(f"claim {reference} does not exist", code="claim_not_found")
    return claim


def find_duplicates(session: Session, claim: Claim) -> list[str]:
    """References of other non-denied claims for the same loss (policy, incident date, amount)."""
    candidates = session.scalars(
        select(Claim).where(
            Claim.policy_id == claim.policy_id,
            Claim.incident_date == claim.incident_date,
            Claim.id != claim.id,
        )
    ).all()
    key = _key(claim)
    return sorted(other.reference for other in candidates if rules.is_duplicate(key, _key(other)))


def _key(claim: Claim) -> rules.ClaimKey:
    return rules.ClaimKey(claim.policy_id, claim.incident_date, claim.amount, claim.status)


def adjuster_usernames(session: Session) -> dict[uuid.UUID, str]:
    return {row.id: row.username for row in session.execute(select(Adjuster.id, Adjuster.username))}


def get_claim(session: Session, settings: Settings, reference: str) -> dict[str, Any]:
    claim = _get_claim(session, reference)
    policy = session.get_one(Policy, claim.policy_id)
    customer = session.get_one(Customer, policy.customer_id)
    usernames = adjuster_usernames(session)
    assigned = usernames.get(claim.assigned_adjuster_id) if claim.assigned_adjuster_id else None

    notes = session.scalars(
        select(ClaimNote).where(ClaimNote.claim_id == claim.id).order_by(ClaimNote.created_at, ClaimNote.id)
    ).all()
    documents = session.scalars(
        select(Document).where(Document.claim_id == claim.id).order_by(Document.created_at, Document.id)
    ).all()
    payments = session.scalars(
        select(Payment).where(Payment.claim_id == claim.id).order_by(Payment.requested_at, Payment.id)
    ).all()

    data = views.claim_summary(claim, policy.policy_number, customer.full_name, assigned)
    data.update(
        {
            "description": claim.description,
            "loss_address": {
                "line1": claim.loss_line1,
                "city": claim.loss_city,
                "postcode": claim.loss_postcode,
                "country": claim.loss_country,
            },
            "address_valid": claim.address_valid,
            "address_validation_id": claim.address_validation_id,
            "fraud_score_id": claim.fraud_score_id,
            "fraud_checked_at": views.iso(claim.fraud_checked_at),
            "decision_reason": claim.decision_reason,
            "escalated_at": views.iso(claim.escalated_at),
            "created_at": views.iso(claim.created_at),
            "updated_at": views.iso(claim.updated_at),
            "policy": views.policy_view(policy, customer),
            "notes": [views.note_view(n, usernames.get(n.author_id, "?")) for n in notes],
            "documents": [views.document_view(d, usernames.get(d.uploaded_by, "?")) for d in documents],
            "payments": [views.payment_view(p, usernames.get(p.requested_by, "?")) for p in payments],
            "checks": {
                "filed_within_window": rules.filed_within_window(
                    claim.incident_date, claim.submitted_at, settings.filing_window_days
                ),
                "policy_active_on_incident": rules.policy_active_on(
                    policy.effective_date, policy.expiry_date, claim.incident_date
                ),
                "within_coverage": rules.within_coverage(claim.amount, policy.coverage_limit),
                "duplicate_of": find_duplicates(session, claim),
                "sla_deadline": views.iso(rules.sla_deadline(claim.last_activity_at, settings.sla_days)),
                "overdue": rules.is_overdue(claim.status, claim.last_activity_at, settings.sla_days),
                "expected_payout": views.money(
                    rules.payout(claim.amount, policy.coverage_limit, policy.deductible)
                ),
            },
        }
    )
    return data


# --- changing claims ------------------------------------------------------------------------------


def _claim_to_act_on(session: Session, actor: Actor, reference: str, action: str | None = None) -> Claim:
    """Load and lock a claim the actor may change; enforces assignment and the status machine."""
    claim = _get_claim(session, reference, for_update=True)
    if claim.assigned_adjuster_id != actor.id:
        raise Forbidden(f"claim {reference} is not assigned to you", code="not_assigned")
    if action is not None and claim.status not in ALLOWED_FROM[action]:
        raise Conflict(
            f"cannot {action.replace('_', ' ')} a claim that is {claim.status}", code="invalid_transition"
        )
    return claim


def _touch(claim: Claim) -> None:
    now = utcnow()
    claim.last_activity_at = now
    claim.updated_at = now


def next_reference(session: Session) -> str:
    """CLM-000123: from a sequence on PostgreSQL, max+1 elsewhere."""
    if session.get_bind().dialect.name == "postgresql":
        number = session.execute(select(claim_reference_seq.next_value())).scalar_one()
    else:
        current = session.scalar(select(func.max(cast(func.substr(Claim.reference, 5), Integer))))
        number = (current or 0) + 1
    return f"CLM-{number:06d}"


def submit_claim(
    session: Session,
    settings: Settings,
    actor: Actor,
    request: SubmitClaimRequest,
    *,
    address_validator: AddressValidator | None = None,
) -> dict[str, Any]:
    policy = session.scalars(
        select(Policy).where(Policy.policy_number == request.policy_number)
    ).one_or_none()
    if policy is None:
        raise RuleViolation(f"no policy numbered {request.policy_number}", code="unknown_policy")
    now = utcnow()
    if request.incident_date > today():
        raise RuleViolation("the incident date is in the future", code="incident_in_future")
    if not rules.policy_active_on(policy.effective_date, policy.expiry_date, request.incident_date):
        raise RuleViolation("the policy was not in force on the incident date", code="policy_inactive")
    if not rules.filed_within_window(request.incident_date, now, settings.filing_window_days):
        raise RuleViolation(
            f"claims must be filed within {settings.filing_window_days} days of the incident",
            code="filed_late",
        )
    existing = session.scalars(
        select(Claim).where(
            and_(
                Claim.policy_id == policy.id,
                Claim.incident_date == request.incident_date,
                Claim.amount == request.amount,
                Claim.status != "denied",
            )
        )
    ).first()
    if existing is not None:
        raise Conflict(f"this loss is already claimed as {existing.reference}", code="duplicate_claim")

    validator = address_validator or AddressValidator.from_settings(settings)
    address = validator.validate(
        line1=request.loss_line1,
        city=request.loss_city,
        postcode=request.loss_postcode,
        country=request.loss_country.upper(),
    )
    claim = Claim(
        reference=next_reference(session),
        policy_id=policy.id,
        assigned_adjuster_id=actor.id,
        incident_date=request.incident_date,
        submitted_at=now,
        amount=request.amount,
        description=request.description,
        loss_line1=request.loss_line1,
        loss_city=request.loss_city,
        loss_postcode=request.loss_postcode,
        loss_country=request.loss_country.upper(),
        status="submitted",
        address_validation_id=address.validation_id,
        address_valid=address.valid,
        escalated=False,
        last_activity_at=now,
        created_at=now,
        updated_at=now,
    )
    session.add(claim)
    session.flush()
    enqueue(session, "fraud_score", {"claim_id": str(claim.id)})
    audit(
        session,
        actor.username,
        "claim.submitted",
        "claim",
        claim.id,
        reference=claim.reference,
        amount=claim.amount,
        policy_number=policy.policy_number,
        incident_date=claim.incident_date,
        description=claim.description,
        loss_address={
            "line1": claim.loss_line1,
            "city": claim.loss_city,
            "postcode": claim.loss_postcode,
            "country": claim.loss_country,
        },
    )
    return get_claim(session, settings, claim.reference)


def add_note(session: Session, actor: Actor, reference: str, body: str) -> dict[str, Any]:
    claim = _claim_to_act_on(session, actor, reference)
    note = ClaimNote(claim_id=claim.id, author_id=actor.id, body=body, created_at=utcnow())
    session.add(note)
    _touch(claim)
    session.flush()
    audit(
        session,
        actor.username,
        "claim.note_added",
        "claim",
        claim.id,
        reference=reference,
        note_id=note.id,
        body=body,
    )
    return views.note_view(note, actor.username)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_PRINTABLE = re.compile(r"[^\x20-\x7e]")


def safe_filename(name: str) -> str:
    """Keep letters, digits, dot, dash and underscore; never a path, never hidden, at most 100 chars."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", base).strip("._")[:100]
    return cleaned or "upload"


def upload_document(
    session: Session,
    settings: Settings,
    actor: Actor,
    reference: str,
    *,
    filename: str,
    content_type: str,
    content: bytes,
) -> dict[str, Any]:
    claim = _claim_to_act_on(session, actor, reference)
    if len(content) > settings.max_upload_bytes:
        raise PayloadTooLarge(
            f"documents are limited to {settings.max_upload_bytes} bytes", code="file_too_large"
        )
    if not content:
        raise RuleViolation("the uploaded file is empty", code="empty_file")
    document_id = uuid.uuid4()
    clean_name = safe_filename(filename)
    relative = f"{claim.reference}/{document_id}-{clean_name}"
    document = Document(
        id=document_id,
        claim_id=claim.id,
        uploaded_by=actor.id,
        filename=clean_name,
        content_type=_PRINTABLE.sub("", content_type)[:100] or "application/octet-stream",
        size_bytes=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        storage_path=relative,
        created_at=utcnow(),
    )
    session.add(document)
    _touch(claim)
    audit(
        session,
        actor.username,
        "claim.document_uploaded",
        "claim",
        claim.id,
        reference=reference,
        document_id=document_id,
        filename=clean_name,
        size_bytes=len(content),
    )
    session.flush()
    target = settings.upload_dir / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    return views.document_view(document, actor.username)


def triage(
    session: Session, settings: Settings, actor: Actor, reference: str, priority: str | None
) -> dict[str, Any]:
    claim = _claim_to_act_on(session, actor, reference, "triage")
    claim.status = "triaged"
    claim.priority = priority or "normal"
    _touch(claim)
    audit(
        session,
        actor.username,
        "claim.triaged",
        "claim",
        claim.id,
        reference=reference,
        priority=claim.priority,
    )
    return get_claim(session, settings, reference)


def approve(
    session: Session, settings: Settings, actor: Actor, reference: str, reason: str | None
) -> dict[str, Any]:
    claim = _claim_to_act_on(session, actor, reference, "approve")
    policy = session.get_one(Policy, claim.policy_id)
    if not rules.filed_within_window(claim.incident_date, claim.submitted_at, settings.filing_window_days):
        raise RuleViolation("the claim was filed outside the filing window", code="filed_late")
    if not rules.policy_active_on(policy.effective_date, policy.expiry_date, claim.incident_date):
        raise RuleViolation("the policy was not in force on the incident date", code="policy_inactive")
    if not rules.within_coverage(claim.amount, policy.coverage_limit):
        raise RuleViolation("the claimed amount exceeds the coverage limit", code="over_coverage_limit")
    duplicates = find_duplicates(session, claim)
    if duplicates:
        raise Conflict(f"this loss is also claimed as {', '.join(duplicates)}", code="duplicate_claim")
    claim.status = "approved"
    claim.approved_amount = rules.payout(claim.amount, policy.coverage_limit, policy.deductible)
    claim.decision_reason = reason
    _touch(claim)
    audit(
        session,
        actor.username,
        "claim.approved",
        "claim",
        claim.id,
        reference=reference,
        approved_amount=claim.approved_amount,
        reason=reason,
    )
    return get_claim(session, settings, reference)


def deny(session: Session, settings: Settings, actor: Actor, reference: str, reason: str) -> dict[str, Any]:
    claim = _claim_to_act_on(session, actor, reference, "deny")
    claim.status = "denied"
    claim.decision_reason = reason
    _touch(claim)
    audit(session, actor.username, "claim.denied", "claim", claim.id, reference=reference, reason=reason)
    return get_claim(session, settings, reference)


def request_payment(session: Session, actor: Actor, reference: str) -> dict[str, Any]:
    claim = _claim_to_act_on(session, actor, reference, "request_payment")
    open_payment = session.scalars(
        select(Payment).where(Payment.claim_id == claim.id, Payment.status.in_(("requested", "executed")))
    ).first()
    if open_payment is not None:
        raise Conflict("a payment for this claim is already requested", code="payment_already_requested")
    amount = claim.approved_amount or Decimal("0")
    if amount <= 0:
        raise RuleViolation("the approved amount is zero; there is nothing to pay", code="nothing_to_pay")
    payment = Payment(
        claim_id=claim.id, amount=amount, status="requested", requested_at=utcnow(), requested_by=actor.id
    )
    session.add(payment)
    session.flush()
    enqueue(session, "execute_payment", {"payment_id": str(payment.id)})
    _touch(claim)
    audit(
        session,
        actor.username,
        "payment.requested",
        "payment",
        payment.id,
        reference=reference,
        amount=amount,
    )
    return views.payment_view(payment, actor.username)
