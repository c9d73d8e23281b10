"""The vendor stubs and the app's clients for them."""

from __future__ import annotations

import re
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from statekit_examples.apps.claims_app.config import Settings
from statekit_examples.apps.claims_app.errors import IntegrationError
from statekit_examples.apps.claims_app.integrations import AddressValidator, FraudClient, PaymentGateway
from statekit_examples.apps.claims_app.vendors.app import create_vendor_app

KEY = {"Authorization": "Bearer demo-key"}


@pytest.fixture
def vendors() -> TestClient:
    return TestClient(create_vendor_app())


@pytest.mark.parametrize("path", ["/fraud/v1/score", "/payments/v1/charges", "/address/v1/validate"])
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer"}, {"Authorization": "Token abc"}])
def test_vendors_require_a_bearer_key(vendors: TestClient, path: str, headers: dict[str, str]) -> None:
    assert vendors.post(path, json={}, headers=headers).status_code == 401


def test_fraud_score_is_stable_per_input_but_ids_are_not(vendors: TestClient) -> None:
    body = {"claim_reference": "CLM-000001", "amount": "100.00", "customer_id": "c-1"}
    first = vendors.post("/fraud/v1/score", json=body, headers=KEY).json()
    second = vendors.post("/fraud/v1/score", json=body, headers=KEY).json()
    assert first["score"] == second["score"] and 0 <= first["score"] <= 100
    assert first["score_id"] != second["score_id"]
    assert first["model_version"] and first["scored_at"]


def test_charges_are_idempotent(vendors: TestClient) -> None:
    body = {"amount": "50.00", "currency": "USD", "reference": "CLM-1", "idempotency_key": "k1"}
    first = vendors.post("/payments/v1/charges", json=body, headers=KEY).json()
    again = vendors.post("/payments/v1/charges", json=body, headers=KEY).json()
    other = vendors.post("/payments/v1/charges", json=body | {"idempotency_key": "k2"}, headers=KEY).json()
    assert first == again
    assert first["transaction_id"].startswith("txn_") and first["status"] == "succeeded"
    assert other["transaction_id"] != first["transaction_id"]
    bad = vendors.post("/payments/v1/charges", json=body | {"amount": "-1"}, headers=KEY)
    assert bad.status_code == 422


def test_address_validation(vendors: TestClient) -> None:
    good = {"line1": "12  harbour street", "city": "portsmouth", "postcode": "03801 ", "country": "us"}
    answer = vendors.post("/address/v1/validate", json=good, headers=KEY).json()
    assert answer["valid"] is True
    assert answer["normalized"] == {
        "line1": "12 Harbour Street",
        "city": "Portsmouth",
        "postcode": "03801",
        "country": "US",
    }
    no_number = vendors.post("/address/v1/validate", json=good | {"line1": "Harbour Street"}, headers=KEY)
    assert no_number.json()["valid"] is False
    no_postcode = vendors.post("/address/v1/validate", json=good | {"postcode": " "}, headers=KEY)
    assert no_postcode.json()["valid"] is False


def test_clients_talk_to_the_running_stubs(vendors_url: str) -> None:
    fraud = FraudClient(f"{vendors_url}/fraud", "sk_test").score(
        claim_reference="CLM-000042", amount=Decimal("10.00"), customer_id="c"
    )
    assert 0 <= fraud.score <= 100 and fraud.score_id
    charge = PaymentGateway(f"{vendors_url}/payments/", "sk_test").charge(
        amount=Decimal("10.00"), currency="USD", reference="CLM-000042", idempotency_key="idem-1"
    )
    assert charge.transaction_id.startswith("txn_")
    address = AddressValidator(f"{vendors_url}/address", "sk_test").validate(
        line1="1 Main St", city="Springfield", postcode="12345", country="US"
    )
    assert address.valid and address.normalized["postcode"] == "12345"


def test_client_errors_become_integration_errors(vendors_url: str) -> None:
    with pytest.raises(IntegrationError, match="HTTP 404"):
        FraudClient(f"{vendors_url}/nowhere", "sk_test").score(
            claim_reference="CLM-1", amount=Decimal("1.00"), customer_id="c"
        )
    with pytest.raises(IntegrationError, match="unreachable"):
        AddressValidator("http://127.0.0.1:9", "sk_test").validate(
            line1="1", city="c", postcode="p", country="US"
        )
    with pytest.raises(IntegrationError) as caught:
        PaymentGateway(f"{vendors_url}/payments", "sk_test").charge(
            amount=Decimal("-1"), currency="USD", reference="r", idempotency_key="k"
        )
    assert caught.value.status_code == 502 and caught.value.code == "integration_failed"


ROOT = Path(__file__).resolve().parents[2]
LOOKS_LIVE = re.compile("sk_" + r"(live|test)_[0-9A-Za-z_]{8,}|(?:ghp|xox[bp])_[0-9A-Za-z]{16,}")
"""What secret scanners flag: Stripe-style keys, GitHub and Slack tokens."""


def test_the_default_vendor_key_is_obviously_fake_and_nothing_looks_like_a_live_secret() -> None:
    key = Settings(db_url="sqlite://").vendor_api_key
    assert "not-a-secret" in key and not LOOKS_LIVE.search(key)
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    flagged = [
        name
        for name in tracked.decode().split("\0")
        if name and (ROOT / name).is_file() and LOOKS_LIVE.search((ROOT / name).read_text(errors="replace"))
    ]
    assert flagged == []
