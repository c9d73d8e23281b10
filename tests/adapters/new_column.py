"""A claims adapter whose application gained a column the digest spec does not know (for tests).

Importing this module adds ``claims.risk_band`` to the app's model, as an app upgrade would.
"""

from __future__ import annotations

from sqlalchemy import Column, String

from statekit_examples.adapters.claims_app import ClaimsAdapter
from statekit_examples.apps.claims_app.models import Claim

Claim.__table__.append_column(Column("risk_band", String(8), nullable=True))


class ClaimsWithRiskBand(ClaimsAdapter):
    def fingerprint(self) -> dict[str, str]:
        return {**super().fingerprint(), "model": "risk_band"}
