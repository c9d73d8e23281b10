"""Small helpers shared by the claims app tests: snapshots of the database and sample payloads."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from statekit_examples.apps.claims_app.clock import today
from statekit_examples.apps.claims_app.fixtures import FixtureSummary
from statekit_examples.apps.claims_app.models import Adjuster, Base, Claim, Policy


def db_snapshot(factory: sessionmaker[Session]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, ordered by primary key: equal snapshots mean nothing changed."""
    snapshot: dict[str, list[tuple[Any, ...]]] = {}
    with factory() as session:
        for table in Base.metadata.sorted_tables:
            rows = session.execute(select(table).order_by(*table.primary_key.columns)).all()
            snapshot[table.name] = [tuple(row) for row in rows]
    return snapshot


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) if root.exists() else []


def active_policy_number(factory: sessionmaker[Session], on: date | None = None) -> str:
    """A policy in force on ``on`` (default: a few days ago), for submitting new claims."""
    day = on or today() - timedelta(days=3)
    with factory() as session:
        number = session.scalar(
            select(Policy.policy_number)
            .where(Policy.effective_date <= day, Policy.expiry_date >= day)
            .order_by(Policy.policy_number)
            .limit(1)
        )
    assert number is not None
    return number


def inactive_policy_number(factory: sessionmaker[Session], on: date) -> str:
    with factory() as session:
        number = session.scalar(
            select(Policy.policy_number)
            .where((Policy.effective_date > on) | (Policy.expiry_date < on))
            .order_by(Policy.policy_number)
            .limit(1)
        )
    assert number is not None
    return number


def claim_payload(policy_number: str, **overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "policy_number": policy_number,
        "incident_date": (today() - timedelta(days=3)).isoformat(),
        "amount": "1234.56",
        "description": "Kitchen flooded after the dishwasher hose split overnight.",
        "loss_line1": "12 Harbour Street",
        "loss_city": "Portsmouth",
        "loss_postcode": "03801",
        "loss_country": "US",
    }
    payload.update(overrides)
    return payload


def clean_claims(
    factory: sessionmaker[Session], summary: FixtureSummary, *, username: str, status: str, mine: bool = True
) -> list[str]:
    """References of regular (not planted) claims in ``status``, assigned (or not) to ``username``."""
    special = {ref for refs in summary.planted.values() for ref in refs} | set(summary.duplicate_of.values())
    with factory() as session:
        adjuster_id = session.scalar(select(Adjuster.id).where(Adjuster.username == username))
        assigned = (
            Claim.assigned_adjuster_id == adjuster_id if mine else Claim.assigned_adjuster_id != adjuster_id
        )
        refs = session.scalars(
            select(Claim.reference).where(Claim.status == status, assigned).order_by(Claim.reference)
        ).all()
    return [ref for ref in refs if ref not in special]


def claim_row(factory: sessionmaker[Session], reference: str) -> Claim:
    with factory() as session:
        claim = session.scalars(select(Claim).where(Claim.reference == reference)).one()
        session.expunge(claim)
    return claim


def error_code(response: Any) -> str:
    body = response.json()
    assert set(body) == {"error"}, body
    assert isinstance(body["error"].get("message"), str) and body["error"]["message"], body
    return str(body["error"]["code"])
