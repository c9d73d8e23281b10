"""The one place the application reads the wall clock, so every timestamp is UTC and aware."""

from datetime import UTC, date, datetime


def utcnow() -> datetime:
    """Current time in UTC (timezone-aware)."""
    return datetime.now(UTC)


def today() -> date:
    """Today's date in UTC; business days are reckoned in UTC, not the server's local zone."""
    return utcnow().date()


def as_utc(value: datetime) -> datetime:
    """Make a datetime read back from the database aware (SQLite drops the zone; it is stored as UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
