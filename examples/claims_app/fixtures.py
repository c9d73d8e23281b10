"""Seed script: a believable claims desk for demos, tests and local development.

Names and amounts come from a seeded Faker / ``random.Random``; ids and timestamps are real
(``uuid.uuid4()``, relative to the current clock), as in any company's seed script. A handful of
problem cases are planted on purpose and listed in the returned summary.
"""

import hashlib
import random
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from faker import Faker
from sqlalchemy import insert, text
from sqlalchemy.orm import Session

from . import rules
from .clock import utcnow
from .config import Settings
from .models import Adjuster, AuditLog, Claim, ClaimNote, Customer, Document, Payment, Policy
from .security import hash_password

FIXTURE_PASSWORD = "claims-demo-password"
PRIMARY_USERNAME = "adjuster"

SLA_DAYS = Settings.sla_days
WINDOW_DAYS = Settings.filing_window_days

# Per unit of scale.
ADJUSTERS, CUSTOMERS, POLICIES, CLAIMS = 4, 40, 60, 150
PLANTED_PER_UNIT = {"filed_late": 3, "duplicate": 3, "overdue": 4, "policy_inactive": 3, "over_coverage": 2}

STATUS_WEIGHTS = {"submitted": 25, "triaged": 20, "approved": 15, "denied": 15, "paid": 25}
PRODUCTS = ("home", "motor", "travel", "contents")
COVERAGE_LIMITS = (5_000, 10_000, 25_000, 50_000, 100_000)
DEDUCTIBLES = (0, 100, 250, 500, 1_000)
LOSS_TYPES = (
    "Water damage",
    "Burst pipe",
    "Storm damage",
    "Theft",
    "Fire",
    "Rear-end collision",
    "Windscreen damage",
    "Lost luggage",
    "Accidental damage",
    "Vandalism",
)
DENIAL_REASONS = (
    "Loss not covered by the policy wording (exclusion 7b).",
    "Insufficient evidence of loss after two requests for documents.",
    "Damage pre-dates the policy; confirmed by inspection report.",
    "Claimant withdrew the claim by phone.",
    "Wear and tear is excluded under general exclusions.",
)
DOCUMENT_NAMES = (
    "police_report.txt",
    "repair_estimate.txt",
    "photo_description.txt",
    "witness_statement.txt",
    "invoice.txt",
)


@dataclass
class FixtureSummary:
    """What was generated, so tests and task generators can find the interesting claims."""

    seed: int
    scale: int
    password: str
    adjusters: list[str]
    counts: dict[str, int]
    planted: dict[str, list[str]]
    duplicate_of: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "scale": self.scale,
            "password": self.password,
            "adjusters": self.adjusters,
            "counts": self.counts,
            "planted": self.planted,
            "duplicate_of": self.duplicate_of,
        }


def _money(cents: int) -> Decimal:
    return Decimal(cents).scaleb(-2)


class _Generator:
    def __init__(self, seed: int, upload_dir: Path | None) -> None:
        self.fake = Faker()
        self.fake.seed_instance(seed)
        self.rng = random.Random(seed)
        self.upload_dir = upload_dir
        self.now = utcnow()
        self.today = self.now.date()
        self.password_hash = hash_password(FIXTURE_PASSWORD)  # one hash: scrypt is slow on purpose
        self.rows: dict[str, list[dict[str, Any]]] = {
            name: []
            for name in (
                "adjusters",
                "customers",
                "policies",
                "claims",
                "notes",
                "documents",
                "payments",
                "audit",
            )
        }
        self.planted: dict[str, list[uuid.UUID]] = {kind: [] for kind in PLANTED_PER_UNIT}
        self.duplicate_of: dict[uuid.UUID, uuid.UUID] = {}
        self.claim_keys: set[tuple[uuid.UUID, date, Decimal]] = set()
        self.files: list[tuple[str, bytes]] = []
        self.audit_claims: list[tuple[dict[str, Any], dict[str, Any]]] = []

    # --- helpers ------------------------------------------------------------------------------

    def _ago(self, min_days: float, max_days: float) -> datetime:
        return self.now - timedelta(seconds=self.rng.uniform(min_days * 86400, max_days * 86400))

    def _between(self, start: datetime, end: datetime) -> datetime:
        if end <= start:
            return start
        return start + timedelta(seconds=self.rng.uniform(0, (end - start).total_seconds()))

    def _audit(
        self,
        claim: dict[str, Any],
        actor: str,
        action: str,
        entity: str,
        entity_id: object,
        at: datetime,
        **detail: Any,
    ) -> None:
        row = {
            "actor": actor,
            "action": action,
            "entity": entity,
            "entity_id": str(entity_id),
            "detail": {k: str(v) if isinstance(v, Decimal | uuid.UUID) else v for k, v in detail.items()},
            "created_at": at,
        }
        self.rows["audit"].append(row)
        self.audit_claims.append((row, claim))  # the claim reference is filled in once numbered

    # --- people and policies --------------------------------------------------------------------

    def adjusters(self, unit: int) -> list[dict[str, Any]]:
        made = []
        for i in range(ADJUSTERS):
            if unit == 0 and i == 0:
                username = PRIMARY_USERNAME
            else:
                username = self.fake.unique.user_name()
                while username == PRIMARY_USERNAME:
                    username = self.fake.unique.user_name()
            row = {
                "id": uuid.uuid4(),
                "username": username,
                "full_name": self.fake.name(),
                "password_hash": self.password_hash,
                "created_at": self._ago(400, 1500),
            }
            made.append(row)
        self.rows["adjusters"].extend(made)
        return made

    def customers(self) -> list[dict[str, Any]]:
        made = []
        for _ in range(CUSTOMERS):
            made.append(
                {
                    "id": uuid.uuid4(),
                    "full_name": self.fake.name(),
                    "email": self.fake.email(),
                    "phone": self.fake.phone_number()[:40],
                    "address_line1": self.fake.street_address(),
                    "city": self.fake.city(),
                    "postcode": self.fake.postcode(),
                    "country": "US",
                    "created_at": self._ago(300, 2000),
                }
            )
        self.rows["customers"].extend(made)
        return made

    def policies(self, customers: list[dict[str, Any]]) -> list[dict[str, Any]]:
        owners = customers + [self.rng.choice(customers) for _ in range(POLICIES - len(customers))]
        made = []
        for owner in owners:
            roll = self.rng.random()
            if roll < 0.7:  # in force today
                effective = self.today - timedelta(days=self.rng.randint(60, 330))
            elif roll < 0.9:  # lapsed
                effective = self.today - timedelta(days=self.rng.randint(400, 900))
            else:  # bought, cover starts later
                effective = self.today + timedelta(days=self.rng.randint(5, 60))
            made.append(
                {
                    "id": uuid.uuid4(),
                    "policy_number": self.fake.unique.bothify("POL-########"),
                    "customer_id": owner["id"],
                    "product": self.rng.choice(PRODUCTS),
                    "coverage_limit": _money(self.rng.choice(COVERAGE_LIMITS) * 100),
                    "deductible": _money(self.rng.choice(DEDUCTIBLES) * 100),
                    "effective_date": effective,
                    "expiry_date": effective + timedelta(days=364),
                    "created_at": datetime.combine(
                        effective - timedelta(days=self.rng.randint(1, 30)),
                        datetime.min.time(),
                        self.now.tzinfo,
                    ),
                }
            )
        self.rows["policies"].extend(made)
        return made

    # --- claims -------------------------------------------------------------------------------

    def _policy_for(
        self, policies: list[dict[str, Any]], incident: date, *, active: bool
    ) -> dict[str, Any] | None:
        pool = [
            p
            for p in policies
            if rules.policy_active_on(p["effective_date"], p["expiry_date"], incident) == active
        ]
        return self.rng.choice(pool) if pool else None

    def _amount(self, policy: dict[str, Any]) -> Decimal:
        limit_cents = int(policy["coverage_limit"] * 100)
        return _money(self.rng.randint(150_00, max(150_01, int(limit_cents * 0.8))))

    def _claim(
        self,
        *,
        policy: dict[str, Any],
        adjuster: dict[str, Any],
        status: str,
        incident: date,
        submitted_at: datetime,
        last_activity_at: datetime,
        amount: Decimal | None = None,
        duplicate_ok: bool = False,
    ) -> dict[str, Any]:
        if amount is None:
            amount = self._amount(policy)
        while not duplicate_ok and (policy["id"], incident, amount) in self.claim_keys:
            amount += Decimal("0.01")  # keep accidental duplicates out; planted ones are deliberate
        self.claim_keys.add((policy["id"], incident, amount))
        if self.rng.random() < 0.95:
            line1 = self.fake.street_address()
        else:
            line1 = f"Farm track off {self.fake.street_name()}"
        postcode = self.fake.postcode()
        scored_at = min(submitted_at + timedelta(minutes=self.rng.randint(1, 30)), self.now)
        decided = status in ("approved", "paid", "denied")
        approved_amount = None
        if status in ("approved", "paid"):
            approved_amount = rules.payout(amount, policy["coverage_limit"], policy["deductible"])
        loss_type = self.rng.choice(LOSS_TYPES)
        claim = {
            "id": uuid.uuid4(),
            "reference": "",
            "policy_id": policy["id"],
            "assigned_adjuster_id": adjuster["id"],
            "incident_date": incident,
            "submitted_at": submitted_at,
            "amount": amount,
            "approved_amount": approved_amount,
            "description": f"{loss_type}. {self.fake.paragraph(nb_sentences=self.rng.randint(4, 10))}",
            "loss_line1": line1,
            "loss_city": self.fake.city(),
            "loss_postcode": postcode,
            "loss_country": "US",
            "status": status,
            "priority": None
            if status == "submitted"
            else self.rng.choice(("low", "normal", "normal", "high")),
            "decision_reason": self.rng.choice(DENIAL_REASONS) if status == "denied" else None,
            "fraud_score": self.rng.randint(0, 100),
            "fraud_score_id": str(uuid.uuid4()),
            "fraud_checked_at": scored_at,
            "address_validation_id": str(uuid.uuid4()),
            "address_valid": bool(postcode.strip()) and any(ch.isdigit() for ch in line1),
            "escalated": decided and self.rng.random() < 0.1,
            "escalated_at": None,
            "last_activity_at": last_activity_at,
            "created_at": submitted_at,
            "updated_at": last_activity_at,
        }
        if claim["escalated"]:
            claim["escalated_at"] = self._between(submitted_at, last_activity_at)
        self.rows["claims"].append(claim)
        self._history(claim, adjuster, policy)
        return claim

    def _history(self, claim: dict[str, Any], adjuster: dict[str, Any], policy: dict[str, Any]) -> None:
        """Notes, documents, payments and the audit trail that would have accumulated."""
        start, end = claim["submitted_at"], claim["last_activity_at"]
        user = adjuster["username"]
        self._audit(
            claim,
            user,
            "claim.submitted",
            "claim",
            claim["id"],
            start,
            amount=claim["amount"],
            policy_number=policy["policy_number"],
            incident_date=claim["incident_date"].isoformat(),
            description=claim["description"],
            loss_address={
                "line1": claim["loss_line1"],
                "city": claim["loss_city"],
                "postcode": claim["loss_postcode"],
                "country": claim["loss_country"],
            },
        )
        self._audit(
            claim,
            "worker",
            "claim.fraud_scored",
            "claim",
            claim["id"],
            claim["fraud_checked_at"],
            score=claim["fraud_score"],
            score_id=claim["fraud_score_id"],
        )
        note_times = sorted(self._between(start, end) for _ in range(self.rng.randint(1, 4)))
        note_times[-1] = end
        for at in note_times:
            note_id = uuid.uuid4()
            body = self.fake.paragraph(nb_sentences=self.rng.randint(2, 6))
            self.rows["notes"].append(
                {
                    "id": note_id,
                    "claim_id": claim["id"],
                    "author_id": adjuster["id"],
                    "body": body,
                    "created_at": at,
                }
            )
            self._audit(claim, user, "claim.note_added", "claim", claim["id"], at, note_id=note_id, body=body)
        if self.rng.random() < 0.3:
            for _ in range(self.rng.randint(1, 2)):
                self._document(claim, adjuster, self._between(start, end))
        status = claim["status"]
        if status != "submitted":
            triaged_at = self._between(start, end)
            self._audit(
                claim, user, "claim.triaged", "claim", claim["id"], triaged_at, priority=claim["priority"]
            )
        if status == "denied":
            self._audit(
                claim, user, "claim.denied", "claim", claim["id"], end, reason=claim["decision_reason"]
            )
        if status in ("approved", "paid"):
            self._audit(
                claim,
                user,
                "claim.approved",
                "claim",
                claim["id"],
                end,
                approved_amount=claim["approved_amount"],
            )
        if status == "paid":
            self._payment(claim, adjuster, end)
        if claim["escalated"]:
            self._audit(claim, "worker", "claim.escalated", "claim", claim["id"], claim["escalated_at"])

    def _document(self, claim: dict[str, Any], adjuster: dict[str, Any], at: datetime) -> None:
        name = self.rng.choice(DOCUMENT_NAMES)
        content = (
            f"{name.removesuffix('.txt').replace('_', ' ').title()}\n\n{self.fake.paragraph()}\n".encode()
        )
        document_id = uuid.uuid4()
        self.rows["documents"].append(
            {
                "id": document_id,
                "claim_id": claim["id"],
                "uploaded_by": adjuster["id"],
                "filename": name,
                "content_type": "text/plain",
                "size_bytes": len(content),
                "sha256": hashlib.sha256(content).hexdigest(),
                "storage_path": name,  # prefixed with the claim reference once references are assigned
                "created_at": at,
            }
        )
        self.files.append((str(document_id), content))
        self._audit(
            claim,
            adjuster["username"],
            "claim.document_uploaded",
            "claim",
            claim["id"],
            at,
            document_id=document_id,
        )

    def _payment(self, claim: dict[str, Any], adjuster: dict[str, Any], approved_at: datetime) -> None:
        requested_at = approved_at + timedelta(minutes=self.rng.randint(5, 600))
        executed_at = requested_at + timedelta(seconds=self.rng.randint(2, 90))
        if self.rng.random() < 0.1:  # an earlier attempt the gateway rejected
            self.rows["payments"].append(
                {
                    "id": uuid.uuid4(),
                    "claim_id": claim["id"],
                    "amount": claim["approved_amount"],
                    "status": "failed",
                    "gateway_transaction_id": None,
                    "requested_at": requested_at - timedelta(hours=1),
                    "executed_at": None,
                    "requested_by": adjuster["id"],
                }
            )
        payment_id = uuid.uuid4()
        self.rows["payments"].append(
            {
                "id": payment_id,
                "claim_id": claim["id"],
                "amount": claim["approved_amount"],
                "status": "executed",
                "gateway_transaction_id": f"txn_{uuid.uuid4().hex}",
                "requested_at": requested_at,
                "executed_at": executed_at,
                "requested_by": adjuster["id"],
            }
        )
        amount = claim["approved_amount"]
        self._audit(
            claim,
            adjuster["username"],
            "payment.requested",
            "payment",
            payment_id,
            requested_at,
            amount=amount,
        )
        self._audit(claim, "worker", "payment.executed", "payment", payment_id, executed_at, amount=amount)

    def regular_claim(
        self, policies: list[dict[str, Any]], adjusters: list[dict[str, Any]]
    ) -> dict[str, Any]:
        status = self.rng.choices(list(STATUS_WEIGHTS), weights=list(STATUS_WEIGHTS.values()))[0]
        while True:
            if status in ("submitted", "triaged"):
                # Open and being worked on: touched within the SLA, filed well inside the window.
                last_activity = self._ago(0.05, SLA_DAYS - 1)
                submitted_at = last_activity - timedelta(days=self.rng.uniform(0, 8))
            else:
                submitted_at = self._ago(SLA_DAYS + 3, 400)
                last_activity = min(submitted_at + timedelta(days=self.rng.uniform(1, 25)), self._ago(0.5, 1))
            incident = submitted_at.date() - timedelta(days=self.rng.randint(0, WINDOW_DAYS - 5))
            policy = self._policy_for(policies, incident, active=True)
            if policy is not None:
                break
        return self._claim(
            policy=policy,
            adjuster=self.rng.choice(adjusters),
            status=status,
            incident=incident,
            submitted_at=submitted_at,
            last_activity_at=last_activity,
        )

    def planted_claim(
        self,
        kind: str,
        policies: list[dict[str, Any]],
        owner: dict[str, Any],
        unit_claims: list[dict[str, Any]],
    ) -> dict[str, Any]:
        status = self.rng.choice(("submitted", "triaged"))
        last_activity = self._ago(0.05, SLA_DAYS - 1)
        submitted_at = last_activity - timedelta(days=self.rng.uniform(0, 2))
        amount: Decimal | None = None
        active = True
        if kind == "overdue":
            last_activity = self._ago(SLA_DAYS + 1, SLA_DAYS + 10)
            submitted_at = last_activity - timedelta(days=self.rng.uniform(0, 2))
        if kind == "duplicate":
            recent = [
                c
                for c in unit_claims
                if c["status"] != "denied"
                and c["incident_date"] >= submitted_at.date() - timedelta(days=20)
                and c["id"] not in self.duplicate_of.values()  # one duplicate per original
            ]
            original = self.rng.choice(recent)
            policy = next(p for p in policies if p["id"] == original["policy_id"])
            earliest = max(original["submitted_at"], self.now - timedelta(days=SLA_DAYS - 1))
            submitted_at = self._between(earliest, self.now - timedelta(hours=1))
            claim = self._claim(  # the very same loss, filed a second time
                policy=policy,
                adjuster=owner,
                status=status,
                incident=original["incident_date"],
                submitted_at=submitted_at,
                last_activity_at=self._between(submitted_at, self.now - timedelta(minutes=10)),
                amount=original["amount"],
                duplicate_ok=True,
            )
            self.duplicate_of[claim["id"]] = original["id"]
            return claim
        if kind == "filed_late":  # came in on paper through the legacy channel
            incident = submitted_at.date() - timedelta(days=WINDOW_DAYS + self.rng.randint(5, 60))
        else:
            incident = submitted_at.date() - timedelta(days=self.rng.randint(0, 15))
        if kind == "policy_inactive":
            active = False
        chosen = self._policy_for(policies, incident, active=active)
        while chosen is None:  # no suitable policy for that date: try an earlier incident
            incident -= timedelta(days=1)
            chosen = self._policy_for(policies, incident, active=active)
        if kind == "over_coverage":
            amount = chosen["coverage_limit"] + _money(self.rng.randint(100_00, 20_000_00))
        return self._claim(
            policy=chosen,
            adjuster=owner,
            status=status,
            incident=incident,
            submitted_at=submitted_at,
            last_activity_at=last_activity,
            amount=amount,
        )

    # --- all together -------------------------------------------------------------------------

    def build(self, scale: int) -> None:
        for unit in range(scale):
            adjusters = self.adjusters(unit)
            policies = self.policies(self.customers())
            unit_claims = []
            regular = CLAIMS - sum(PLANTED_PER_UNIT.values())
            for _ in range(regular):
                unit_claims.append(self.regular_claim(policies, adjusters))
            for kind, count in PLANTED_PER_UNIT.items():
                for _ in range(count):
                    claim = self.planted_claim(kind, policies, adjusters[0], unit_claims)
                    self.planted[kind].append(claim["id"])
        # Reference numbers follow submission order, as the sequence would have issued them.
        ordered = sorted(self.rows["claims"], key=lambda c: c["submitted_at"])
        for number, claim in enumerate(ordered, start=1):
            claim["reference"] = f"CLM-{number:06d}"
        for row, claim in self.audit_claims:
            row["detail"]["reference"] = claim["reference"]
        references = {c["id"]: c["reference"] for c in self.rows["claims"]}
        for doc in self.rows["documents"]:
            doc["storage_path"] = f"{references[doc['claim_id']]}/{doc['id']}-{doc['storage_path']}"


TABLES = (
    ("adjusters", Adjuster),
    ("customers", Customer),
    ("policies", Policy),
    ("claims", Claim),
    ("notes", ClaimNote),
    ("documents", Document),
    ("payments", Payment),
    ("audit", AuditLog),
)
BATCH = 2_000


def generate(
    session: Session, *, seed: int, scale: int = 1, upload_dir: Path | None = None
) -> FixtureSummary:
    """Fill an empty database (schema already created) and return what was planted where.

    The caller owns the transaction. Document files are written under ``upload_dir`` if given.
    """
    if scale < 1:
        raise ValueError("scale must be at least 1")
    gen = _Generator(seed, upload_dir)
    gen.build(scale)
    for name, model in TABLES:
        rows = gen.rows[name]
        for start in range(0, len(rows), BATCH):
            session.execute(insert(model), rows[start : start + BATCH])
    if session.get_bind().dialect.name == "postgresql" and gen.rows["claims"]:
        # The sequence must continue after the references issued above.
        session.execute(text("SELECT setval('claim_reference_seq', :n)"), {"n": len(gen.rows["claims"])})
    if upload_dir is not None:
        contents = dict(gen.files)
        for doc in gen.rows["documents"]:
            target = upload_dir / doc["storage_path"]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(contents[str(doc["id"])])
    references = {c["id"]: c["reference"] for c in gen.rows["claims"]}
    return FixtureSummary(
        seed=seed,
        scale=scale,
        password=FIXTURE_PASSWORD,
        adjusters=[a["username"] for a in gen.rows["adjusters"]],
        counts={model.__tablename__: len(gen.rows[name]) for name, model in TABLES},
        planted={kind: sorted(references[i] for i in ids) for kind, ids in gen.planted.items()},
        duplicate_of={references[dup]: references[orig] for dup, orig in gen.duplicate_of.items()},
    )
