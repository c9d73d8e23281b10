"""HTTP clients for the three vendors: fraud scoring, the payment gateway and address validation."""

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx

from .config import Settings
from .errors import IntegrationError

TIMEOUT_SECONDS = 5


class _VendorClient:
    """Shared plumbing: bearer auth, a short timeout, and every failure mapped to IntegrationError."""

    vendor = "vendor"

    def __init__(self, base_url: str, api_key: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.api_key}"}
        try:
            with httpx.Client(timeout=TIMEOUT_SECONDS, headers=headers) as client:
                response = client.post(f"{self.base_url}{path}", json=body)
                response.raise_for_status()
                data = response.json()
        except httpx.HTTPStatusError as exc:
            raise IntegrationError(f"{self.vendor} answered HTTP {exc.response.status_code}") from exc
        except (httpx.HTTPError, ValueError) as exc:
            raise IntegrationError(f"{self.vendor} unreachable: {exc}") from exc
        if not isinstance(data, dict):
            raise IntegrationError(f"{self.vendor} sent an unexpected response")
        return data


def _require(data: dict[str, Any], key: str, vendor: str) -> Any:
    if key not in data:
        raise IntegrationError(f"{vendor} response lacks {key!r}")
    return data[key]


@dataclass(frozen=True)
class FraudResult:
    score_id: str
    score: int
    model_version: str


@dataclass(frozen=True)
class ChargeResult:
    transaction_id: str
    status: str


@dataclass(frozen=True)
class AddressResult:
    validation_id: str
    valid: bool
    normalized: dict[str, Any]


class FraudClient(_VendorClient):
    vendor = "fraud service"

    @classmethod
    def from_settings(cls, settings: Settings) -> "FraudClient":
        return cls(settings.fraud_url, settings.vendor_api_key)

    def score(self, *, claim_reference: str, amount: Decimal, customer_id: str) -> FraudResult:
        data = self._post(
            "/v1/score",
            {"claim_reference": claim_reference, "amount": str(amount), "customer_id": customer_id},
        )
        score = _require(data, "score", self.vendor)
        if not isinstance(score, int) or isinstance(score, bool) or not 0 <= score <= 100:
            raise IntegrationError(f"{self.vendor} returned an invalid score")
        return FraudResult(
            score_id=str(_require(data, "score_id", self.vendor)),
            score=score,
            model_version=str(data.get("model_version", "")),
        )


class PaymentGateway(_VendorClient):
    vendor = "payment gateway"

    @classmethod
    def from_settings(cls, settings: Settings) -> "PaymentGateway":
        return cls(settings.payment_url, settings.vendor_api_key)

    def charge(self, *, amount: Decimal, currency: str, reference: str, idempotency_key: str) -> ChargeResult:
        data = self._post(
            "/v1/charges",
            {
                "amount": str(amount),
                "currency": currency,
                "reference": reference,
                "idempotency_key": idempotency_key,
            },
        )
        status = str(_require(data, "status", self.vendor))
        if status != "succeeded":
            raise IntegrationError(f"{self.vendor} declined the payout (status {status})")
        return ChargeResult(transaction_id=str(_require(data, "transaction_id", self.vendor)), status=status)


class AddressValidator(_VendorClient):
    vendor = "address validator"

    @classmethod
    def from_settings(cls, settings: Settings) -> "AddressValidator":
        return cls(settings.address_url, settings.vendor_api_key)

    def validate(self, *, line1: str, city: str, postcode: str, country: str) -> AddressResult:
        data = self._post(
            "/v1/validate", {"line1": line1, "city": city, "postcode": postcode, "country": country}
        )
        normalized = data.get("normalized") or {}
        return AddressResult(
            validation_id=str(_require(data, "validation_id", self.vendor)),
            valid=bool(_require(data, "valid", self.vendor)),
            normalized=normalized if isinstance(normalized, dict) else {},
        )
