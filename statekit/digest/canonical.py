"""Canonical values: the same state always serialises to the same bytes.

Sorted keys, no floats (a float in state is an error: its text form is not stable across
platforms and rounding), timestamps as ISO-8601 UTC, decimals as plain strings, UUIDs as text.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

from statekit.errors import SpecError


def canonical_value(value: Any, how: str = "auto", *, where: str = "") -> Any:
    """Map a database value to a JSON-safe canonical form."""
    if value is None:
        return None
    if how == "sorted" and isinstance(value, list | tuple | set | frozenset):
        items = [canonical_value(v, where=where) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    if how == "number" and isinstance(value, Decimal | int) and not isinstance(value, bool):
        return _number(Decimal(value))
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        raise SpecError(f"{where}: float value {value!r} in digested state; store it as Decimal or integer")
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): canonical_value(v, where=where) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [canonical_value(v, where=where) for v in value]
    raise SpecError(f"{where}: no canonical form for {type(value).__name__} value")


def _number(value: Decimal) -> str:
    """A numeric value with no trailing zeros: 25, 25.0 and 25.00 all become "25"."""
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "") else text


def canonical_json(obj: Any) -> str:
    """Compact JSON with sorted keys; the one serialisation every digest is computed from."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
