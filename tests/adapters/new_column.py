"""A claims adapter whose application gained a column the digest spec does not know (for tests).

Its worlds get ``claims.risk_band`` from a migration run after the build, as an app upgrade would.
The application's model is left alone: it is shared by every claims adapter in the process, and a
column appended to it would go into the plain claims worlds built afterwards too (under the plain
adapter's fingerprint).
"""

from __future__ import annotations

from sqlalchemy import text

from statekit.world import World
from statekit_examples.adapters.claims_app import ClaimsAdapter
from statekit_examples.apps.claims_app.db import make_engine


class ClaimsWithRiskBand(ClaimsAdapter):
    def fingerprint(self) -> dict[str, str]:
        return {**super().fingerprint(), "model": "risk_band"}

    def build_world(self, world: World, seed: int) -> None:
        super().build_world(world, seed)
        engine = make_engine(self.database_url(world))
        try:
            with engine.begin() as conn:
                conn.execute(text("ALTER TABLE claims ADD COLUMN risk_band varchar(8)"))
        finally:
            engine.dispose()
