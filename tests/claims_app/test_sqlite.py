"""The app also runs on SQLite for tiny local setups: seed, log in, take a claim all the way to paid."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from statekit_examples.apps.claims_app.api import create_app
from statekit_examples.apps.claims_app.db import create_schema, make_engine, make_session_factory
from statekit_examples.apps.claims_app.fixtures import FIXTURE_PASSWORD, generate
from statekit_examples.apps.claims_app.worker import Worker

from .conftest import make_settings
from .helpers import active_policy_number, claim_payload


@pytest.mark.filterwarnings("ignore:Dialect sqlite.*Decimal")
def test_full_claim_lifecycle_on_sqlite(tmp_path: Path, vendors_url: str) -> None:
    settings = make_settings(f"sqlite:///{tmp_path / 'claims.db'}", tmp_path / "uploads", vendors_url)
    engine = make_engine(settings.db_url)
    try:
        create_schema(engine)
        factory = make_session_factory(engine)
        with factory.begin() as session:
            summary = generate(session, seed=4)
        with TestClient(create_app(settings, session_factory=factory)) as client:
            token = client.post("/auth/login", json={"username": "adjuster", "password": FIXTURE_PASSWORD})
            headers = {"Authorization": f"Bearer {token.json()['token']}"}
            assert client.get("/claims", headers=headers).json()["total"] == summary.counts["claims"]
            created = client.post(
                "/claims", json=claim_payload(active_policy_number(factory)), headers=headers
            )
            assert created.status_code == 201, created.text
            reference = created.json()["reference"]
            assert reference == "CLM-000151"  # max + 1 without a sequence
            for action in ("triage", "approve"):
                assert (
                    client.post(f"/claims/{reference}/{action}", json={}, headers=headers).status_code == 200
                )
            assert client.post(f"/claims/{reference}/payment-request", headers=headers).status_code == 201
            upload = client.post(
                f"/claims/{reference}/documents", files={"file": ("a.txt", b"hello")}, headers=headers
            )
            assert upload.status_code == 201
            assert Worker(factory, settings).run_pending() == 2
            claim = client.get(f"/claims/{reference}", headers=headers).json()
            assert claim["status"] == "paid" and claim["fraud_score"] is not None
            assert claim["payments"][0]["status"] == "executed"
    finally:
        engine.dispose()
