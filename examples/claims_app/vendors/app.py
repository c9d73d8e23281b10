"""One FastAPI app serving the fraud, payment and address vendors under /fraud, /payments, /address.

They behave like the real services as far as the claims app can tell: bearer auth, generated ids,
timestamps in every response, idempotent charges.
"""

import hashlib
import threading
import uuid
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException
from pydantic import BaseModel, Field

MODEL_VERSION = "fraudnet-2024.06"


def require_api_key(authorization: Annotated[str | None, Header()] = None) -> str:
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise HTTPException(status_code=401, detail="missing or malformed API key")
    return key.strip()


def _now() -> str:
    return datetime.now(UTC).isoformat()


class ScoreRequest(BaseModel):
    claim_reference: str
    amount: str
    customer_id: str


class ChargeRequest(BaseModel):
    amount: str
    currency: str = Field(min_length=3, max_length=3)
    reference: str
    idempotency_key: str = Field(min_length=1)


class AddressRequest(BaseModel):
    line1: str
    city: str
    postcode: str
    country: str


def create_vendor_app() -> FastAPI:
    app = FastAPI(title="Vendor stubs")
    authed = [Depends(require_api_key)]
    charges: dict[str, dict[str, Any]] = {}
    charges_lock = threading.Lock()

    fraud = APIRouter(prefix="/fraud/v1", dependencies=authed)
    payments = APIRouter(prefix="/payments/v1", dependencies=authed)
    address = APIRouter(prefix="/address/v1", dependencies=authed)

    @fraud.post("/score")
    def score(body: ScoreRequest) -> dict[str, Any]:
        # The "model": a stable hash of the inputs, so the same claim always scores the same.
        digest = hashlib.sha256(f"{body.claim_reference}|{body.amount}|{body.customer_id}".encode()).digest()
        return {
            "score_id": str(uuid.uuid4()),
            "score": int.from_bytes(digest[:4], "big") % 101,
            "model_version": MODEL_VERSION,
            "scored_at": _now(),
        }

    @payments.post("/charges")
    def charge(body: ChargeRequest) -> dict[str, Any]:
        try:
            amount = Decimal(body.amount)
        except InvalidOperation as exc:
            raise HTTPException(status_code=422, detail="amount must be a decimal string") from exc
        if not amount.is_finite() or amount <= 0:
            raise HTTPException(status_code=422, detail="amount must be positive")
        with charges_lock:
            if body.idempotency_key not in charges:
                charges[body.idempotency_key] = {
                    "transaction_id": f"txn_{uuid.uuid4().hex}",
                    "status": "succeeded",
                    "amount": str(amount),
                    "currency": body.currency.upper(),
                    "reference": body.reference,
                    "processed_at": _now(),
                }
            return charges[body.idempotency_key]

    @address.post("/validate")
    def validate(body: AddressRequest) -> dict[str, Any]:
        valid = bool(body.postcode.strip()) and any(ch.isdigit() for ch in body.line1)
        return {
            "validation_id": str(uuid.uuid4()),
            "valid": valid,
            "normalized": {
                "line1": " ".join(body.line1.split()).title(),
                "city": " ".join(body.city.split()).title(),
                "postcode": body.postcode.strip().upper(),
                "country": body.country.strip().upper(),
            },
            "checked_at": _now(),
        }

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    for router in (fraud, payments, address):
        app.include_router(router)
    return app
