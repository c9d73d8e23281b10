"""Runtime settings, read once from ``CLAIMS_*`` environment variables (or built directly in code)."""

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_VENDOR_BASE = "http://127.0.0.1:8100"


@dataclass(frozen=True)
class Settings:
    db_url: str
    upload_dir: Path = Path("uploads")
    fraud_url: str = f"{DEFAULT_VENDOR_BASE}/fraud"
    payment_url: str = f"{DEFAULT_VENDOR_BASE}/payments"
    address_url: str = f"{DEFAULT_VENDOR_BASE}/address"
    vendor_api_key: str = "demo-vendor-key-not-a-secret"  # set CLAIMS_VENDOR_API_KEY for real vendors
    sla_days: int = 5
    filing_window_days: int = 30
    max_upload_bytes: int = 5 * 1024 * 1024
    token_ttl_hours: int = 8
    worker_poll_seconds: float = 1.0
    sla_sweep_seconds: float = 60.0

    @classmethod
    def from_env(cls, **overrides: object) -> "Settings":
        """Build settings from ``CLAIMS_*`` variables; explicit ``overrides`` (if not None) win."""
        env = os.environ
        values: dict[str, object] = {
            "db_url": env.get("CLAIMS_DB_URL", "sqlite:///claims.db"),
            "upload_dir": Path(env.get("CLAIMS_UPLOAD_DIR", "uploads")),
            "fraud_url": env.get("CLAIMS_FRAUD_URL", cls.fraud_url),
            "payment_url": env.get("CLAIMS_PAYMENT_URL", cls.payment_url),
            "address_url": env.get("CLAIMS_ADDRESS_URL", cls.address_url),
            "vendor_api_key": env.get("CLAIMS_VENDOR_API_KEY", cls.vendor_api_key),
            "sla_days": int(env.get("CLAIMS_SLA_DAYS", cls.sla_days)),
            "filing_window_days": int(env.get("CLAIMS_FILING_WINDOW_DAYS", cls.filing_window_days)),
            "max_upload_bytes": int(env.get("CLAIMS_MAX_UPLOAD_BYTES", cls.max_upload_bytes)),
            "token_ttl_hours": int(env.get("CLAIMS_TOKEN_TTL_HOURS", cls.token_ttl_hours)),
            "worker_poll_seconds": float(env.get("CLAIMS_WORKER_POLL_SECONDS", cls.worker_poll_seconds)),
            "sla_sweep_seconds": float(env.get("CLAIMS_SLA_SWEEP_SECONDS", cls.sla_sweep_seconds)),
        }
        values.update({key: value for key, value in overrides.items() if value is not None})
        if not isinstance(values["upload_dir"], Path):
            values["upload_dir"] = Path(str(values["upload_dir"]))
        return cls(**values)  # type: ignore[arg-type]
