"""Business rules of the claims desk. Pure functions; the clock is read only where a rule needs "now"."""

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from .clock import as_utc, utcnow
from .models import OPEN_STATUSES

CENTS = Decimal("0.01")


def filed_within_window(incident_date: date, submitted_at: datetime, window_days: int) -> bool:
    """A claim must reach us within ``window_days`` of the incident (policy wording, section 4.2)."""
    return (as_utc(submitted_at).date() - incident_date).days <= window_days


def policy_active_on(effective_date: date, expiry_date: date, day: date) -> bool:
    """Cover applies from the effective date up to and including the expiry date."""
    return effective_date <= day <= expiry_date


def within_coverage(amount: Decimal, coverage_limit: Decimal) -> bool:
    return amount <= coverage_limit


def payout(amount: Decimal, coverage_limit: Decimal, deductible: Decimal) -> Decimal:
    """What we pay: the claimed amount capped at the limit, minus the deductible, never negative."""
    gross = min(amount, coverage_limit) - deductible
    return max(gross, Decimal("0")).quantize(CENTS)


def sla_deadline(last_activity_at: datetime, sla_days: int) -> datetime:
    return as_utc(last_activity_at) + timedelta(days=sla_days)


def is_overdue(
    status: str, last_activity_at: datetime, sla_days: int, *, now: datetime | None = None
) -> bool:
    """An open claim nobody has touched for ``sla_days`` breaches the service level."""
    current = now or utcnow()
    return status in OPEN_STATUSES and sla_deadline(last_activity_at, sla_days) <= current


@dataclass(frozen=True)
class ClaimKey:
    """What makes two claims "the same loss" for duplicate detection."""

    policy_id: object
    incident_date: date
    amount: Decimal
    status: str


def is_duplicate(candidate: ClaimKey, other: ClaimKey) -> bool:
    """Same policy, same incident date and same amount as another claim that was not denied."""
    return (
        other.status != "denied"
        and candidate.policy_id == other.policy_id
        and candidate.incident_date == other.incident_date
        and Decimal(candidate.amount) == Decimal(other.amount)
    )
