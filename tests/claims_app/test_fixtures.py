"""The seed script: sizes, the planted problem cases, and that everything else is clean."""

from __future__ import annotations

import hashlib
from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from statekit_examples.apps.claims_app import services
from statekit_examples.apps.claims_app.config import Settings
from statekit_examples.apps.claims_app.fixtures import (
    PLANTED_PER_UNIT,
    PRIMARY_USERNAME,
    FixtureSummary,
    generate,
)
from statekit_examples.apps.claims_app.models import OPEN_STATUSES, Adjuster, Base, Claim, Document


def _violations(checks: dict[str, object]) -> set[str]:
    found = set()
    if not checks["filed_within_window"]:
        found.add("filed_late")
    if not checks["policy_active_on_incident"]:
        found.add("policy_inactive")
    if not checks["within_coverage"]:
        found.add("over_coverage")
    if checks["duplicate_of"]:
        found.add("duplicate")
    if checks["overdue"]:
        found.add("overdue")
    return found


def test_summary_matches_the_database(seeded: FixtureSummary, session_factory: sessionmaker[Session]) -> None:
    assert seeded.adjusters[0] == PRIMARY_USERNAME and len(seeded.adjusters) == 4
    assert {kind: len(refs) for kind, refs in seeded.planted.items()} == PLANTED_PER_UNIT
    with session_factory() as session:
        for table in Base.metadata.sorted_tables:
            if table.name in seeded.counts:
                assert session.scalar(select(func.count()).select_from(table)) == seeded.counts[table.name]
        assert session.scalar(select(func.count()).select_from(Claim)) == 150
        statuses = set(session.scalars(select(Claim.status).distinct()))
        assert statuses == {"submitted", "triaged", "approved", "denied", "paid"}
        amounts = session.scalars(select(Claim.amount)).all()
        assert all(isinstance(a, Decimal) and a.as_tuple().exponent == -2 for a in amounts)
        scores = session.scalars(select(Claim.fraud_score)).all()
        assert all(isinstance(s, int) and 0 <= s <= 100 for s in scores)


def test_each_planted_case_breaks_exactly_its_rule_and_nothing_else_is_broken(
    seeded: FixtureSummary, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    planted = {ref: kind for kind, refs in seeded.planted.items() for ref in refs}
    originals = set(seeded.duplicate_of.values())
    with session_factory() as session:
        open_refs = session.scalars(select(Claim.reference).where(Claim.status.in_(OPEN_STATUSES))).all()
        primary_id = session.scalar(select(Adjuster.id).where(Adjuster.username == PRIMARY_USERNAME))
        for reference in open_refs:
            claim = services.get_claim(session, settings, reference)
            found = _violations(claim["checks"])
            if reference in planted:
                assert found == {planted[reference]}, (reference, found)
                assert claim["assigned_to"] == PRIMARY_USERNAME
            elif reference in originals:
                assert found == {"duplicate"}, (reference, found)
            else:
                assert found == set(), (reference, found)
        for duplicate, original in seeded.duplicate_of.items():
            assert services.get_claim(session, settings, duplicate)["checks"]["duplicate_of"] == [original]
        assert primary_id is not None


def test_documents_are_written_with_matching_hashes(
    seeded: FixtureSummary, session_factory: sessionmaker[Session], settings: Settings
) -> None:
    with session_factory() as session:
        documents = session.scalars(select(Document)).all()
    assert len(documents) == seeded.counts["documents"] > 0
    for document in documents:
        content = (settings.upload_dir / document.storage_path).read_bytes()
        assert hashlib.sha256(content).hexdigest() == document.sha256
        assert len(content) == document.size_bytes


def test_scale_multiplies_everything(session_factory: sessionmaker[Session]) -> None:
    with session_factory.begin() as session:
        summary = generate(session, seed=3, scale=2)
    assert summary.counts["claims"] == 300 and summary.counts["policies"] == 120
    assert len(summary.adjusters) == len(set(summary.adjusters)) == 8
    assert {kind: len(refs) for kind, refs in summary.planted.items()} == {
        kind: 2 * count for kind, count in PLANTED_PER_UNIT.items()
    }
    with session_factory() as session:
        references = session.scalars(select(Claim.reference).order_by(Claim.reference)).all()
    assert references == [f"CLM-{n:06d}" for n in range(1, 301)]
