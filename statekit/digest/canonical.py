"""Canonical values: the same state always serialises to the same bytes, and different states never do.

A column's canonicaliser is named in the spec (``canonical = { amount = "number" }``) or chosen by its
type (json and jsonb columns use ``json``, every other ``auto``). Every name is a registered
``Canonicaliser``: the spec validator accepts exactly the names in ``CANONICALISERS``, so a name that
is accepted is always implemented.

- ``auto``: by value type. Text, integers and booleans as they are; decimals as plain strings with
  their scale (2.50 is not 2.5); floats exactly (``repr``, which round-trips every double, including
  ``-0.0``, ``nan`` and ``inf``); timestamps as ISO-8601 UTC; times with a zone with their offset,
  always in one form; dates and times ISO; UUIDs as text; bytes as hex; intervals as days, seconds and
  microseconds; arrays element by element; a JSON document as ``json`` does.
- ``number``: any number by value: 25, 25.0, 25.00 and the float 25.0 are all ``"25"``.
- ``decimal``: a number with its scale (the string PostgreSQL would print for ``numeric``).
- ``timestamp``, ``date``: a moment as ISO-8601 UTC, or its UTC date.
- ``json``: a JSON document as canonical JSON text: sorted keys, no whitespace, numbers by value,
  and types kept (the number 2.5 and the string "2.5" differ).
- ``sorted``: an array as a multiset (its elements in canonical order).
- ``text``: a string as it is (and nothing else is accepted).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from statekit.errors import SpecError

JSON = Any
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
"""Compact, sorted keys: built once (``json.dumps`` builds one per call)."""


@dataclass(frozen=True)
class Canonicaliser:
    """One named way to turn a database value into canonical JSON."""

    name: str
    description: str
    apply: Callable[[Any, str], JSON]
    """``apply(value, where)``; ``where`` names the column for error messages."""


CANONICALISERS: dict[str, Canonicaliser] = {}


def register(canonicaliser: Canonicaliser) -> Canonicaliser:
    """Add a canonicaliser to the registry (the spec validator accepts its name from then on)."""
    CANONICALISERS[canonicaliser.name] = canonicaliser
    return canonicaliser


def _fail(where: str, value: Any, how: str) -> SpecError:
    return SpecError(f"{where}: no {how!r} canonical form for {type(value).__name__} value {value!r}")


def _number_text(value: Decimal) -> str:
    """A number with no trailing zeros and no exponent: 25, 25.0 and 25.00 all become "25"."""
    if not value.is_finite():
        return str(value).lower()
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "") else text


def _as_decimal(value: Any, where: str, how: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise _fail(where, value, how)
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def _timestamp(value: datetime) -> str:
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _time(value: time) -> str:
    """A time, with its zone's offset when it has one (PostgreSQL's timetz keeps the zone)."""
    text = value.replace(tzinfo=None).isoformat(timespec="microseconds")
    offset = value.utcoffset()
    if offset is None:
        return text
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    return f"{text}{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def _decimal_text(value: Decimal) -> str:
    """A decimal with its scale, as PostgreSQL prints ``numeric`` (2.50 stays 2.50)."""
    return format(value, "f") if value.is_finite() else str(value).lower()


def _interval(value: timedelta) -> str:
    return f"{value.days}d{value.seconds}s{value.microseconds}us"


_EXACT_INT = 10**27
"""Integers below this keep every digit through ``_number_text`` (28-digit decimal context), so the
C encoder's text for them is the same."""


def _plain(node: Any) -> bool:
    """Whether the C encoder writes ``node`` exactly as ``_json_text``'s walk would: only strings,
    small integers, booleans, None, lists and string-keyed objects (no number that needs its value
    normalised, no float or Decimal)."""
    kind = type(node)
    if kind is str or kind is bool or node is None:
        return True
    if kind is int:
        return -_EXACT_INT < node < _EXACT_INT
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in node.items())
    if kind is list or kind is tuple:
        return all(_plain(v) for v in node)
    return False


def _json_text(value: Any, where: str) -> str:
    """Canonical JSON text of a document whose numbers may be Decimal, int or float. A document
    of strings and integers (most are) goes through the C encoder in one call; the walk below is
    the definition, and gives the same bytes for those (tested)."""
    if _plain(value):
        return _ENCODER.encode(value)
    return _json_walk(value, where)


def _json_walk(value: Any, where: str) -> str:
    def walk(node: Any) -> str:
        if node is None or isinstance(node, bool):
            return json.dumps(node)
        if isinstance(node, str):
            return json.dumps(node, ensure_ascii=False)
        if isinstance(node, int | float | Decimal):
            return _number_text(_as_decimal(node, where, "json"))
        if isinstance(node, dict):
            items = sorted((str(k), v) for k, v in node.items())
            return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{walk(v)}" for k, v in items) + "}"
        if isinstance(node, list | tuple):
            return "[" + ",".join(walk(v) for v in node) + "]"
        raise _fail(where, node, "json")

    return walk(value)


def _auto(value: Any, where: str) -> JSON:
    exact = _AUTO_EXACT.get(type(value))  # the common types in one look-up; subclasses below
    if exact is not None:
        return exact(value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return _decimal_text(value)
    if isinstance(value, datetime):
        return _timestamp(value)
    if isinstance(value, time):
        return _time(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return _interval(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return _json_text(value, where)
    if isinstance(value, list | tuple):
        return [_auto(v, where) for v in value]
    raise _fail(where, value, "auto")


AUTO_AS_IS = frozenset({str, int, bool})
"""The types ``auto`` returns unchanged (a caller on a hot path may skip the call for them)."""
_AUTO_EXACT: dict[type, Callable[[Any], JSON]] = {
    **{kind: lambda v: v for kind in AUTO_AS_IS},
    datetime: _timestamp,
    date: lambda v: v.isoformat(),
    uuid.UUID: str,
    Decimal: _decimal_text,
}
"""``_auto`` for values of exactly these types (what a row mostly holds)."""


def _sorted(value: Any, where: str) -> JSON:
    if not isinstance(value, list | tuple | set | frozenset):
        return _auto(value, where)
    items = [_auto(v, where) for v in value]
    return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))


def _date(value: Any, where: str) -> JSON:
    if isinstance(value, datetime):
        return _timestamp(value)[:10]
    if isinstance(value, date):
        return value.isoformat()
    raise _fail(where, value, "date")


def _timestamp_of(value: Any, where: str) -> JSON:
    if isinstance(value, datetime):
        return _timestamp(value)
    raise _fail(where, value, "timestamp")


def _text(value: Any, where: str) -> JSON:
    if isinstance(value, str):
        return value
    raise _fail(where, value, "text")


for _c in (
    Canonicaliser("auto", "by value type (the default)", _auto),
    Canonicaliser(
        "number",
        "a number by value: 25 = 25.0 = 25.00",
        lambda v, w: _number_text(_as_decimal(v, w, "number")),
    ),
    Canonicaliser(
        "decimal",
        "a number with its scale: 2.50 != 2.5",
        lambda v, w: format(_as_decimal(v, w, "decimal"), "f"),
    ),
    Canonicaliser("timestamp", "a moment as ISO-8601 UTC", _timestamp_of),
    Canonicaliser("date", "a date, or a moment's UTC date, as ISO-8601", _date),
    Canonicaliser("json", "a JSON document: sorted keys, numbers by value, types kept", _json_text),
    Canonicaliser("sorted", "an array as a multiset", _sorted),
    Canonicaliser("text", "a string as it is", _text),
):
    register(_c)

TYPE_DEFAULTS = {"json": "json", "jsonb": "json"}
"""A column's canonicaliser when the spec names none, by its SQL type; anything else is ``auto``."""


def canonicaliser_for(named: str | None, data_type: str = "") -> Canonicaliser:
    """The spec's choice for a column, else its type's default."""
    return CANONICALISERS[named or TYPE_DEFAULTS.get(data_type, "auto")]


def canonical_value(value: Any, how: str = "auto", *, where: str = "") -> JSON:
    """Map a database value to its canonical JSON form with the named canonicaliser."""
    if value is None:
        return None
    try:
        canonicaliser = CANONICALISERS[how]
    except KeyError:
        raise SpecError(f"{where}: unknown canonicaliser {how!r}; known: {sorted(CANONICALISERS)}") from None
    return canonicaliser.apply(value, where)


def canonical_json(obj: Any) -> str:
    """Compact JSON with sorted keys; the one serialisation every digest is computed from."""
    return _ENCODER.encode(obj)
