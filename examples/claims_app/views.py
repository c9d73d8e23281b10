"""JSON shapes the API returns. Money is a decimal string, times are ISO 8601 in UTC."""

from datetime import date, datetime
from decimal import Decimal
from typing import Any

from .clock import as_utc
from .models import Adjuster, Claim, ClaimNote, Customer, Document, Payment, Policy


def money(value: Decimal | None) -> str | None:
    return None if value is None else f"{value:.2f}"


def iso(value: datetime | date | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return as_utc(value).isoformat()
    return value.isoformat()


def claim_summary(
    claim: Claim, policy_number: str, customer_name: str, assigned_to: str | None
) -> dict[str, Any]:
    return {
        "id": str(claim.id),
        "reference": claim.reference,
        "status": claim.status,
        "priority": claim.priority,
        "policy_number": policy_number,
        "customer_name": customer_name,
        "incident_date": iso(claim.incident_date),
        "submitted_at": iso(claim.submitted_at),
        "amount": money(claim.amount),
        "approved_amount": money(claim.approved_amount),
        "assigned_to": assigned_to,
        "escalated": claim.escalated,
        "fraud_score": claim.fraud_score,
        "last_activity_at": iso(claim.last_activity_at),
    }


def policy_view(policy: Policy, customer: Customer) -> dict[str, Any]:
    return {
        "policy_number": policy.policy_number,
        "product": policy.product,
        "customer_id": str(customer.id),
        "customer_name": customer.full_name,
        "coverage_limit": money(policy.coverage_limit),
        "deductible": money(policy.deductible),
        "effective_date": iso(policy.effective_date),
        "expiry_date": iso(policy.expiry_date),
    }


def note_view(note: ClaimNote, author: str) -> dict[str, Any]:
    return {"id": str(note.id), "author": author, "body": note.body, "created_at": iso(note.created_at)}


def document_view(document: Document, uploaded_by: str) -> dict[str, Any]:
    return {
        "id": str(document.id),
        "filename": document.filename,
        "content_type": document.content_type,
        "size_bytes": document.size_bytes,
        "sha256": document.sha256,
        "uploaded_by": uploaded_by,
        "created_at": iso(document.created_at),
    }


def payment_view(payment: Payment, requested_by: str) -> dict[str, Any]:
    return {
        "id": str(payment.id),
        "amount": money(payment.amount),
        "status": payment.status,
        "gateway_transaction_id": payment.gateway_transaction_id,
        "requested_at": iso(payment.requested_at),
        "executed_at": iso(payment.executed_at),
        "requested_by": requested_by,
    }


def adjuster_view(adjuster: Adjuster) -> dict[str, Any]:
    return {"username": adjuster.username, "full_name": adjuster.full_name}
