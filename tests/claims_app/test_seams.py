"""The app's sources of nondeterminism stay conventional: stdlib clock, ``uuid.uuid4``, env settings."""

from __future__ import annotations

import os
import re
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import time_machine
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

import statekit_examples.apps.claims_app as app_pkg
from statekit_examples.apps.claims_app.config import Settings
from statekit_examples.apps.claims_app.models import AuditLog, Job

from .helpers import active_policy_number, claim_payload, claim_row

APP_DIR = Path(app_pkg.__file__).parent


def test_source_uses_the_conventional_seams() -> None:
    for path in APP_DIR.rglob("*.py"):
        source = path.read_text()
        assert "statekit" not in source.lower(), path
        assert not re.search(r"from uuid import", source), path
        assert "uuid4()" not in source or "uuid.uuid4()" in source, path


def test_patched_entropy_and_frozen_clock_reach_the_database(
    client: TestClient,
    auth: dict[str, str],
    session_factory: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = active_policy_number(session_factory)
    now = datetime.now(UTC).replace(microsecond=0)
    # ids are bound as column defaults (``default=uuid.uuid4``), as apps usually write them: the seam
    # is the entropy beneath uuid4, which is what statekit's ids control seeds
    monkeypatch.setattr(os, "urandom", lambda n: bytes(n))
    with time_machine.travel(now, tick=False):
        response = client.post("/claims", json=claim_payload(policy), headers=auth)
    assert response.status_code == 201, response.text
    claim = claim_row(session_factory, response.json()["reference"])
    assert claim.id == uuid.UUID(bytes=bytes(16), version=4)  # came from the patched entropy
    assert claim.submitted_at == now == claim.last_activity_at == claim.created_at
    with session_factory() as session:
        audit = session.scalars(select(AuditLog).where(AuditLog.entity_id == str(claim.id))).one()
        job_payload = session.scalars(select(Job.payload).where(Job.kind == "fraud_score")).one()
    assert audit.action == "claim.submitted"
    assert job_payload == {"claim_id": str(claim.id)}


def test_settings_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLAIMS_DB_URL", "postgresql+psycopg://u@h/claims")
    monkeypatch.setenv("CLAIMS_UPLOAD_DIR", str(tmp_path))
    monkeypatch.setenv("CLAIMS_SLA_DAYS", "3")
    monkeypatch.setenv("CLAIMS_WORKER_POLL_SECONDS", "0.5")
    settings = Settings.from_env(fraud_url="http://fraud.internal", payment_url=None)
    assert settings.db_url == "postgresql+psycopg://u@h/claims"
    assert settings.upload_dir == tmp_path
    assert settings.sla_days == 3 and settings.worker_poll_seconds == 0.5
    assert settings.fraud_url == "http://fraud.internal"
    assert settings.payment_url == Settings.payment_url  # None means "not overridden"
    assert settings.filing_window_days == 30 and settings.max_upload_bytes == 5 * 1024 * 1024
    with pytest.raises(AttributeError):
        settings.sla_days = 9  # type: ignore[misc]
