"""Database schema (SQLAlchemy 2 declarative). PostgreSQL in production, SQLite for quick local runs."""

import uuid
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    MetaData,
    Numeric,
    Sequence,
    String,
    Text,
    Uuid,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from .clock import utcnow

CLAIM_STATUSES = ("submitted", "triaged", "approved", "denied", "paid")
OPEN_STATUSES = ("submitted", "triaged")
PRIORITIES = ("low", "normal", "high")
PAYMENT_STATUSES = ("requested", "executed", "failed")
JOB_STATUSES = ("queued", "running", "done", "failed")

Money = Numeric(12, 2)
Timestamp = DateTime(timezone=True)
# BIGINT identity on PostgreSQL; SQLite only autoincrements a plain INTEGER primary key.
BigId = BigInteger().with_variant(Integer, "sqlite")
JsonDoc = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(
        naming_convention={
            "ix": "ix_%(column_0_label)s",
            "uq": "uq_%(table_name)s_%(column_0_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


# Human-readable claim numbers (CLM-000123) come from this sequence on PostgreSQL.
claim_reference_seq = Sequence("claim_reference_seq", metadata=Base.metadata)


class Customer(Base):
    __tablename__ = "customers"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    full_name: Mapped[str] = mapped_column(String(200), index=True)
    email: Mapped[str] = mapped_column(String(254))
    phone: Mapped[str] = mapped_column(String(40))
    address_line1: Mapped[str] = mapped_column(String(200))
    city: Mapped[str] = mapped_column(String(100))
    postcode: Mapped[str] = mapped_column(String(20))
    country: Mapped[str] = mapped_column(String(2))
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class Policy(Base):
    __tablename__ = "policies"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    policy_number: Mapped[str] = mapped_column(String(32), unique=True)
    customer_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("customers.id"), index=True)
    product: Mapped[str] = mapped_column(String(20))
    coverage_limit: Mapped[Decimal] = mapped_column(Money)
    deductible: Mapped[Decimal] = mapped_column(Money)
    effective_date: Mapped[date] = mapped_column(Date)
    expiry_date: Mapped[date] = mapped_column(Date)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class Adjuster(Base):
    __tablename__ = "adjusters"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    full_name: Mapped[str] = mapped_column(String(200))
    password_hash: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class Claim(Base):
    __tablename__ = "claims"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    reference: Mapped[str] = mapped_column(String(20), unique=True)
    policy_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("policies.id"), index=True)
    assigned_adjuster_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("adjusters.id"), index=True, nullable=True
    )
    incident_date: Mapped[date] = mapped_column(Date)
    submitted_at: Mapped[datetime] = mapped_column(Timestamp)
    amount: Mapped[Decimal] = mapped_column(Money)
    approved_amount: Mapped[Decimal | None] = mapped_column(Money, nullable=True)
    description: Mapped[str] = mapped_column(Text)
    loss_line1: Mapped[str] = mapped_column(String(200))
    loss_city: Mapped[str] = mapped_column(String(100))
    loss_postcode: Mapped[str] = mapped_column(String(20))
    loss_country: Mapped[str] = mapped_column(String(2))
    status: Mapped[str] = mapped_column(String(20), index=True, default="submitted")
    priority: Mapped[str | None] = mapped_column(String(10), nullable=True)
    decision_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    fraud_score: Mapped[int | None] = mapped_column(Integer, nullable=True)
    fraud_score_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    fraud_checked_at: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
    address_validation_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    address_valid: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    escalated: Mapped[bool] = mapped_column(Boolean, default=False)
    escalated_at: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
    last_activity_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)

    __table_args__ = (Index("ix_claims_policy_incident", "policy_id", "incident_date"),)


class ClaimNote(Base):
    __tablename__ = "claim_notes"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    claim_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("claims.id"), index=True)
    author_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("adjusters.id"))
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class Document(Base):
    __tablename__ = "documents"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    claim_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("claims.id"), index=True)
    uploaded_by: Mapped[uuid.UUID] = mapped_column(ForeignKey("adjusters.id"))
    filename: Mapped[str] = mapped_column(String(255))
    content_type: Mapped[str] = mapped_column(String(100))
    size_bytes: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    storage_path: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class Payment(Base):
    __tablename__ = "payments"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    claim_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("claims.id"), index=True)
    amount: Mapped[Decimal] = mapped_column(Money)
    status: Mapped[str] = mapped_column(String(20), default="requested")
    gateway_transaction_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    requested_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    executed_at: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)
    requested_by: Mapped[uuid.UUID] = mapped_column(ForeignKey("adjusters.id"))


class AuthSession(Base):
    """A login session; the bearer token is the primary key."""

    __tablename__ = "sessions"

    token: Mapped[str] = mapped_column(String(64), primary_key=True)
    adjuster_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("adjusters.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(Timestamp, server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(Timestamp)


class AuditLog(Base):
    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(BigId, Identity(), primary_key=True)
    actor: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    entity: Mapped[str] = mapped_column(String(32))
    entity_id: Mapped[str] = mapped_column(String(64), index=True)
    detail: Mapped[dict[str, Any]] = mapped_column(JsonDoc, default=dict)
    created_at: Mapped[datetime] = mapped_column(Timestamp, server_default=func.now())


class Job(Base):
    """A unit of background work, picked up by the worker once ``run_after`` has passed."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(BigId, Identity(), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    payload: Mapped[dict[str, Any]] = mapped_column(JsonDoc, default=dict)
    status: Mapped[str] = mapped_column(String(20), default="queued")
    run_after: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp, nullable=True)

    __table_args__ = (Index("ix_jobs_due", "status", "run_after"),)
