"""Task kinds for the claims desk: how each is found in a world, posed, verified and solved.

A task's hidden facts (which claim is the duplicate, what payout is right) live in ``Task.facts``,
which no tool can read; verifiers score the final database state, never the transcript.

Every kind also declares the changes it expects (``expect``): the target claim and what belongs to
it (its notes, documents, payments, their jobs, audit entries and uploaded files). statekit holds
every other change against the reward (``statekit.collateral``), so "deny every claim in sight"
scores 0. Each prompt says so, and names everything its verifier checks.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, aliased

from statekit.kit import JSON, SEQUENCES_PREFIX, Allow, Expectation, Task
from statekit_examples.apps.claims_app import rules
from statekit_examples.apps.claims_app.clock import as_utc, utcnow
from statekit_examples.apps.claims_app.config import Settings
from statekit_examples.apps.claims_app.models import Adjuster, Claim, ClaimNote, Customer, Payment, Policy

AGENT = "adjuster"
MAX_STEPS = 12


@dataclass(frozen=True)
class ClaimsTask(Task):
    """A Task plus the hidden facts its verifier checks."""

    facts: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def _agent_id(session: Session) -> Any:
    return session.scalar(select(Adjuster.id).where(Adjuster.username == AGENT))


def _open_claims(session: Session) -> list[tuple[Claim, Policy]]:
    rows = session.execute(
        select(Claim, Policy)
        .join(Policy, Claim.policy_id == Policy.id)
        .where(Claim.assigned_adjuster_id == _agent_id(session))
        .order_by(Claim.reference)
    ).all()
    return [(c, p) for c, p in rows]


def _is_duplicate(session: Session, claim: Claim) -> bool:
    earlier = aliased(Claim)
    found = session.scalar(
        select(func.count())
        .select_from(earlier)
        .where(
            earlier.policy_id == claim.policy_id,
            earlier.incident_date == claim.incident_date,
            earlier.amount == claim.amount,
            earlier.id != claim.id,
        )
    )
    return bool(found)


def _filed_late(claim: Claim) -> bool:
    return not rules.filed_within_window(
        claim.incident_date, as_utc(claim.submitted_at), Settings.filing_window_days
    )


def _overdue(claim: Claim) -> bool:
    return rules.is_overdue(claim.status, claim.last_activity_at, Settings.sla_days)


def _valid(session: Session, claim: Claim, policy: Policy) -> bool:
    return (
        not _filed_late(claim)
        and rules.policy_active_on(policy.effective_date, policy.expiry_date, claim.incident_date)
        and claim.amount <= policy.coverage_limit
        and not _is_duplicate(session, claim)
        and not _overdue(claim)
    )


TRIAGE_PENALTY = 0.25
"""What each stray change costs in ``triage_overdue``, the one kind with partial credit."""
ONLY_THIS = "Change nothing else: any change to another claim or record (the audit trail included) scores 0."


def _decide_prompt(ref: str) -> str:
    return (
        f"Process claim {ref}. Check it against the rules (filed within 30 days of the incident, policy "
        "active on the incident date, amount within coverage, not a duplicate). If it passes, triage and "
        "approve it; if not, deny it with a reason that names the rule it breaks (for a late claim, say "
        f"it was filed late). Then call submit. {ONLY_THIS}"
    )


def find_approve_valid(session: Session, rng: random.Random) -> dict[str, Any] | None:
    pool = [
        c.reference for c, p in _open_claims(session) if c.status == "submitted" and _valid(session, c, p)
    ]
    if not pool:
        return None
    ref = rng.choice(pool)
    claim, policy = next((c, p) for c, p in _open_claims(session) if c.reference == ref)
    payout = rules.payout(claim.amount, policy.coverage_limit, policy.deductible)
    return {"reference": ref, "payout": str(payout), "prompt": _decide_prompt(ref)}


def find_deny_late_filing(session: Session, rng: random.Random) -> dict[str, Any] | None:
    pool = [
        c.reference
        for c, _ in _open_claims(session)
        if c.status in ("submitted", "triaged") and _filed_late(c)
    ]
    if not pool:
        return None
    ref = rng.choice(pool)
    return {"reference": ref, "prompt": _decide_prompt(ref)}


def find_deny_duplicate(session: Session, rng: random.Random) -> dict[str, Any] | None:
    pairs = []
    for claim, policy in _open_claims(session):
        if claim.status not in ("submitted", "triaged"):
            continue
        earlier = session.execute(
            select(Claim.reference, Claim.status)
            .where(
                Claim.policy_id == claim.policy_id,
                Claim.incident_date == claim.incident_date,
                Claim.amount == claim.amount,
                Claim.reference < claim.reference,
            )
            .order_by(Claim.reference)
        ).first()
        if earlier is not None:
            pairs.append((claim.reference, earlier.reference, earlier.status, policy.policy_number))
    if not pairs:
        return None
    dup, original, original_status, policy_number = rng.choice(pairs)
    prompt = (
        f"The policyholder of policy {policy_number} seems to have reported the same loss twice. Find the "
        "duplicate claim (the one filed later), deny it with a reason that names the original claim's "
        f"reference, leave the original as it is, then submit. {ONLY_THIS}"
    )
    return {"reference": dup, "original": original, "original_status": original_status, "prompt": prompt}


def find_pay_approved(session: Session, rng: random.Random) -> dict[str, Any] | None:
    paid = set(session.scalars(select(Payment.claim_id)))
    unpaid = {c.reference: c for c, _ in _open_claims(session) if c.status == "approved" and c.id not in paid}
    if not unpaid:
        return None
    ref = rng.choice(list(unpaid))
    payable = [r for r, c in unpaid.items() if (c.approved_amount or 0) > 0]
    if ref not in payable or len(payable) < 2:  # with nothing else payable, "pay every claim" solves it
        return None
    prompt = (
        f"Claim {ref} was approved but has not been paid. Get the policyholder paid, then submit. {ONLY_THIS}"
    )
    return {"reference": ref, "prompt": prompt}


def find_triage_overdue(session: Session, rng: random.Random) -> dict[str, Any] | None:
    pool = [
        c for c, _ in _open_claims(session) if c.status == "submitted" and _overdue(c) and not c.escalated
    ]
    if not pool:
        return None
    claim = rng.choice(pool)
    notes = session.scalar(select(func.count()).select_from(ClaimNote).where(ClaimNote.claim_id == claim.id))
    days = (utcnow() - as_utc(claim.last_activity_at)).days
    prompt = (
        f"Claim {claim.reference} has had no activity for {days} days and breaches the "
        f"{Settings.sla_days}-day "
        "SLA. Triage it with high priority and add a note explaining the next step, then submit. "
        "(Partial credit: half for the triage at high priority, half for the note; every change to "
        f"another claim or record, the audit trail included, costs {TRIAGE_PENALTY}, down to 0.)"
    )
    return {"reference": claim.reference, "notes_before": int(notes or 0), "prompt": prompt}


_LOSSES = (
    "A burst pipe flooded the kitchen",
    "A storm tore tiles off the roof",
    "The car was hit while parked",
    "A laptop was stolen from the hallway",
)


def find_file_new_claim(session: Session, rng: random.Random) -> dict[str, Any] | None:
    incident = utcnow().date() - timedelta(days=rng.randint(1, 6))
    rows = session.execute(
        select(Policy, Customer)
        .join(Customer, Policy.customer_id == Customer.id)
        .where(Policy.effective_date <= incident, Policy.expiry_date >= incident)
        .order_by(Policy.policy_number)
    ).all()
    if not rows:
        return None
    policy, customer = rng.choice(rows)
    amount = Decimal(rng.randint(200_00, 2_000_00)).scaleb(-2)
    loss = rng.choice(_LOSSES)
    claim = {
        "policy_number": policy.policy_number,
        "incident_date": incident.isoformat(),
        "amount": str(amount),
        "description": loss,
        "loss_line1": customer.address_line1,
        "loss_city": customer.city,
        "loss_postcode": customer.postcode,
        "loss_country": customer.country,
    }
    prompt = (
        f"{customer.full_name} (policy {policy.policy_number}) phoned: {loss.lower()} at their home, "
        f"{customer.address_line1}, {customer.city} {customer.postcode}, {customer.country}, on "
        f"{incident.isoformat()}. They estimate the loss at ${amount}. File the claim, then submit. "
        "Change nothing else: any other claim filed, or change to another record, scores 0."
    )
    return {"claim": claim, "reference": "", "prompt": prompt}


def _filed(session: Session, facts: dict[str, Any]) -> list[Claim]:
    want = facts["claim"]
    return list(
        session.execute(
            select(Claim)
            .join(Policy, Claim.policy_id == Policy.id)
            .where(
                Policy.policy_number == want["policy_number"],
                Claim.incident_date == date.fromisoformat(want["incident_date"]),
                Claim.amount == Decimal(want["amount"]),
            )
        )
        .scalars()
        .all()
    )


def verify_file_new_claim(session: Session, facts: dict[str, Any]) -> float:
    found = _filed(session, facts)
    ok = (
        len(found) == 1
        and found[0].status == "submitted"
        and found[0].fraud_score is not None
        and found[0].address_validation_id is not None
    )
    return 1.0 if ok else 0.0


def _claim(session: Session, ref: str) -> Claim:
    claim = session.scalar(select(Claim).where(Claim.reference == ref))
    assert claim is not None, f"verifier: claim {ref} vanished"
    return claim


def verify_approve_valid(session: Session, facts: dict[str, Any]) -> float:
    claim = _claim(session, facts["reference"])
    ok = claim.status == "approved" and claim.approved_amount == Decimal(facts["payout"])
    return 1.0 if ok else 0.0


LATE_WORDS = re.compile(
    r"\blate\b|\b(30|thirty)[ -]?days?\b|\bfiling (window|deadline|period|limit)\b|\bdeadline\b",
    re.IGNORECASE,
)
"""What a reason must say to name the late-filing rule (the prompt asks for a reason that names it)."""


def _denied_saying(session: Session, facts: dict[str, Any], says: Callable[[str], bool]) -> float:
    claim = _claim(session, facts["reference"])
    return 1.0 if claim.status == "denied" and says(claim.decision_reason or "") else 0.0


def verify_deny_late_filing(session: Session, facts: dict[str, Any]) -> float:
    """Denied, with a reason naming the filing rule (the prompt asks for it)."""
    return _denied_saying(session, facts, lambda reason: bool(LATE_WORDS.search(reason)))


def verify_deny_duplicate(session: Session, facts: dict[str, Any]) -> float:
    """Denied, with a reason naming the original's reference; the original untouched."""
    original = _claim(session, facts["original"])
    if original.status != facts["original_status"]:
        return 0.0
    return _denied_saying(session, facts, lambda reason: facts["original"] in reason)


def verify_pay_approved(session: Session, facts: dict[str, Any]) -> float:
    claim = _claim(session, facts["reference"])
    executed = session.scalar(
        select(func.count())
        .select_from(Payment)
        .where(
            Payment.claim_id == claim.id,
            Payment.status == "executed",
            Payment.amount == claim.approved_amount,
        )
    )
    return 1.0 if claim.status == "paid" and executed == 1 else 0.0


def verify_triage_overdue(session: Session, facts: dict[str, Any]) -> float:
    claim = _claim(session, facts["reference"])
    notes = session.scalar(select(func.count()).select_from(ClaimNote).where(ClaimNote.claim_id == claim.id))
    score = 0.5 if claim.status == "triaged" and claim.priority == "high" else 0.0
    return score + (0.5 if int(notes or 0) > facts["notes_before"] else 0.0)


def _document(value: Any) -> dict[str, Any]:
    """A JSON column of a canonical row (canonical JSON text) as an object; anything else as empty."""
    parsed = json.loads(value) if isinstance(value, str) else value
    return parsed if isinstance(parsed, dict) else {}


def belongs_to(session: Session, reference: str) -> list[Allow]:
    """Changes that belong to one claim: the claim itself, its notes, documents, payments, the jobs
    they queue, their audit entries and uploaded files; and the sequences those rows drew ids from
    (format 2 digests their positions; a stray insert shows as its own row). Rows are canonical
    (UUIDs as strings, JSON documents as canonical JSON text)."""
    claim = session.scalar(select(Claim).where(Claim.reference == reference))
    if claim is None:
        return []
    claim_id = str(claim.id)
    payments = {str(p) for p in session.scalars(select(Payment.id).where(Payment.claim_id == claim.id))}

    def of_claim(row: Any) -> bool:
        return row.get("claim_id") == claim_id

    def audited(row: Any) -> bool:
        return _document(row.get("detail")).get("reference") == reference

    def job(row: Any) -> bool:
        payload = _document(row.get("payload"))
        return payload.get("claim_id") == claim_id or payload.get("payment_id") in payments

    return [
        Allow.changed("claims", key=[reference]),
        Allow.added("claim_notes", where=of_claim),
        Allow.added("documents", where=of_claim),
        Allow.any("payments", where=of_claim),
        Allow.any("jobs", where=job),
        Allow.added("audit_log", where=audited),
        Allow.added("files:uploads", where=lambda row: str(row["path"]).startswith(f"{reference}/")),
        Allow.changed(f"{SEQUENCES_PREFIX}public"),
    ]


def expect_target(session: Session, facts: dict[str, Any]) -> Expectation:
    return Expectation(tuple(belongs_to(session, facts["reference"])))


def expect_triage(session: Session, facts: dict[str, Any]) -> Expectation:
    return Expectation(tuple(belongs_to(session, facts["reference"])), penalty=TRIAGE_PENALTY)


def expect_new_claim(session: Session, facts: dict[str, Any]) -> Expectation:
    """The one claim the prompt describes, filed, and what belongs to it."""
    allowed: list[Allow] = []
    for claim in _filed(session, facts):
        allowed += [Allow.added("claims", where=_reference_is(claim.reference))]
        allowed += belongs_to(session, claim.reference)
    return Expectation(tuple(allowed))


def _reference_is(reference: str) -> Callable[[Any], bool]:
    return lambda row: bool(row["reference"] == reference)


def _submit() -> dict[str, JSON]:
    return {"tool": "submit"}


@dataclass(frozen=True)
class TaskKind:
    find: Callable[[Session, random.Random], dict[str, Any] | None]
    verify: Callable[[Session, dict[str, Any]], float]
    reference: Callable[[dict[str, Any]], list[dict[str, JSON]]]
    expect: Callable[[Session, dict[str, Any]], Expectation] = expect_target
    """The changes the task expects; every other change is held against the reward."""


KINDS: dict[str, TaskKind] = {
    "approve_valid": TaskKind(
        find_approve_valid,
        verify_approve_valid,
        lambda f: [
            {"tool": "triage", "reference": f["reference"]},
            {"tool": "approve", "reference": f["reference"], "reason": "meets every rule"},
            _submit(),
        ],
    ),
    "deny_late_filing": TaskKind(
        find_deny_late_filing,
        verify_deny_late_filing,
        lambda f: [
            {
                "tool": "deny",
                "reference": f["reference"],
                "reason": "filed more than 30 days after the incident",
            },
            _submit(),
        ],
    ),
    "deny_duplicate": TaskKind(
        find_deny_duplicate,
        verify_deny_duplicate,
        lambda f: [
            {"tool": "deny", "reference": f["reference"], "reason": f"duplicate of {f['original']}"},
            _submit(),
        ],
    ),
    "pay_approved": TaskKind(
        find_pay_approved,
        verify_pay_approved,
        lambda f: [{"tool": "request_payment", "reference": f["reference"]}, _submit()],
    ),
    "file_new_claim": TaskKind(
        find_file_new_claim,
        verify_file_new_claim,
        lambda f: [{"tool": "file_claim", **f["claim"]}, _submit()],
        expect_new_claim,
    ),
    "triage_overdue": TaskKind(
        find_triage_overdue,
        verify_triage_overdue,
        lambda f: [
            {"tool": "triage", "reference": f["reference"], "priority": "high"},
            {
                "tool": "add_note",
                "reference": f["reference"],
                "body": "SLA breached: calling the policyholder today.",
            },
            _submit(),
        ],
        expect_triage,
    ),
}


def choose_task(
    session: Session, seed: int, requested: str | None, pool: list[str] | None = None
) -> ClaimsTask:
    """The seed picks the kind from ``pool`` (default: every kind) unless one is requested, and,
    with its own stream, the claim."""
    names = sorted(pool if pool is not None else KINDS)
    if requested is not None and requested not in KINDS:
        raise ValueError(f"unknown task kind {requested!r}; kinds are {sorted(KINDS)}")
    if requested is not None and requested not in names:
        raise ValueError(f"task kind {requested!r} is excluded from this environment's pool {names}")
    if not names:
        raise ValueError("every task kind is excluded from this environment's pool")
    order = [requested] if requested else names[seed % len(names) :] + names[: seed % len(names)]
    for kind in order:
        facts = KINDS[kind].find(session, random.Random(f"task:{kind}:{seed}"))
        if facts is not None:
            digest = hashlib.sha256(f"{kind}:{seed}:{sorted(facts.items())}".encode()).hexdigest()[:12]
            return ClaimsTask(
                id=f"{kind}-{digest}", kind=kind, prompt=facts["prompt"], max_steps=MAX_STEPS, facts=facts
            )
    raise ValueError(f"seed {seed} has no claim fit for task kind(s) {order}")
