"""Licence names from every source, normalised to SPDX expressions, and each licence's category.

Parsing, aliases and validation are license-expression's (its SPDX licensing carries the SPDX ids
and ScanCode's aliases, e.g. ``GPL-2.0+`` for ``GPL-2.0-or-later``); categories ("Permissive",
"Copyleft", "Commercial", ...) come from the ScanCode LicenseDB index that license-expression ships.
What statekit adds is only what no library maps for us: Debian's DEP-5 short names (``GPL-2+``,
``Expat``) and the trove licence classifiers. A name that maps to nothing is kept, as
``LicenseRef-<source>-<name>``, so the report names it instead of dropping it.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from statekit.errors import ConfigError

PUBLIC_DOMAIN = "LicenseRef-scancode-public-domain"
PROPRIETARY = "LicenseRef-scancode-proprietary-license"

CLASSIFIERS: dict[str, str] = {
    # Trove classifiers that name one licence (PEP 639's appendix: these map to one SPDX id).
    "License :: CC0 1.0 Universal (CC0 1.0) Public Domain Dedication": "CC0-1.0",
    "License :: OSI Approved :: Boost Software License 1.0 (BSL-1.0)": "BSL-1.0",
    "License :: OSI Approved :: Eclipse Public License 1.0 (EPL-1.0)": "EPL-1.0",
    "License :: OSI Approved :: Eclipse Public License 2.0 (EPL-2.0)": "EPL-2.0",
    "License :: OSI Approved :: European Union Public Licence 1.2 (EUPL 1.2)": "EUPL-1.2",
    "License :: OSI Approved :: GNU Affero General Public License v3 or later (AGPLv3+)": "AGPL-3.0-or-later",
    "License :: OSI Approved :: GNU General Public License v2 or later (GPLv2+)": "GPL-2.0-or-later",
    "License :: OSI Approved :: GNU General Public License v3 or later (GPLv3+)": "GPL-3.0-or-later",
    "License :: OSI Approved :: GNU Lesser General Public License v2 or later (LGPLv2+)": "LGPL-2.0-or-later",
    "License :: OSI Approved :: GNU Lesser General Public License v3 or later (LGPLv3+)": "LGPL-3.0-or-later",
    "License :: OSI Approved :: Historical Permission Notice and Disclaimer (HPND)": "HPND",
    "License :: OSI Approved :: ISC License (ISCL)": "ISC",
    "License :: OSI Approved :: MIT License": "MIT",
    "License :: OSI Approved :: MIT No Attribution License (MIT-0)": "MIT-0",
    "License :: OSI Approved :: Mozilla Public License 1.1 (MPL 1.1)": "MPL-1.1",
    "License :: OSI Approved :: Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
    "License :: OSI Approved :: PostgreSQL License": "PostgreSQL",
    "License :: OSI Approved :: Python Software Foundation License": "PSF-2.0",
    "License :: OSI Approved :: The Unlicense (Unlicense)": "Unlicense",
    "License :: OSI Approved :: Universal Permissive License (UPL)": "UPL-1.0",
    "License :: OSI Approved :: zlib/libpng License": "Zlib",
    "License :: Other/Proprietary License": PROPRIETARY,
    "License :: Public Domain": PUBLIC_DOMAIN,
}

FAMILIES: dict[str, tuple[str, str]] = {
    # Classifiers that name a family, not a licence: PEP 639 forbids inferring the member, so the
    # symbol says what the classifier says; its category is its family's (every member shares it).
    "License :: OSI Approved :: Academic Free License (AFL)": ("LicenseRef-classifier-AFL", "AFL-3.0"),
    "License :: OSI Approved :: Apache Software License": ("LicenseRef-classifier-Apache", "Apache-2.0"),
    "License :: OSI Approved :: Artistic License": ("LicenseRef-classifier-Artistic", "Artistic-2.0"),
    "License :: OSI Approved :: BSD License": ("LicenseRef-classifier-BSD", "BSD-3-Clause"),
    "License :: OSI Approved :: GNU Affero General Public License v3": (
        "LicenseRef-classifier-AGPLv3",
        "AGPL-3.0-only",
    ),
    "License :: OSI Approved :: GNU General Public License (GPL)": (
        "LicenseRef-classifier-GPL",
        "GPL-2.0-only",
    ),
    "License :: OSI Approved :: GNU General Public License v2 (GPLv2)": (
        "LicenseRef-classifier-GPLv2",
        "GPL-2.0-only",
    ),
    "License :: OSI Approved :: GNU General Public License v3 (GPLv3)": (
        "LicenseRef-classifier-GPLv3",
        "GPL-3.0-only",
    ),
    "License :: OSI Approved :: GNU Lesser General Public License v2 (LGPLv2)": (
        "LicenseRef-classifier-LGPLv2",
        "LGPL-2.0-only",
    ),
    "License :: OSI Approved :: GNU Lesser General Public License v3 (LGPLv3)": (
        "LicenseRef-classifier-LGPLv3",
        "LGPL-3.0-only",
    ),
    "License :: OSI Approved :: GNU Library or Lesser General Public License (LGPL)": (
        "LicenseRef-classifier-LGPL",
        "LGPL-2.1-only",
    ),
    "License :: OSI Approved :: Mozilla Public License 1.0 (MPL)": ("LicenseRef-classifier-MPL", "MPL-1.0"),
}

DEBIAN_ALIASES = {
    # DEP-5 short names that are not SPDX ids under another spelling (the spec's own table).
    "expat": "MIT",
    "public-domain": PUBLIC_DOMAIN,
    "perl": "Artistic-1.0-Perl OR GPL-1.0-or-later",
    "artistic": "Artistic-1.0-Perl",  # /usr/share/common-licenses/Artistic is Perl's Artistic 1.0
    "lgpl": "LGPL-2.0-or-later",  # unversioned: any version (license-expression reads GPL the same way)
    "gfdl": "GFDL-1.1-or-later",
}
GNU_FAMILIES = ("GPL", "LGPL", "AGPL", "GFDL")
"""Debian writes ``GPL-2``/``GPL-2+``; SPDX writes ``GPL-2.0-only``/``GPL-2.0-or-later``."""
_VERSIONED = re.compile(
    r"(?P<family>[A-Za-z][\w.]*?(?:-[A-Za-z]\w*)*)-(?P<major>\d+)(?:\.(?P<minor>\d+))?(?P<plus>\+)?"
)
_EXCEPTION = re.compile(r"\s+with\s+.+?\s+exception$", re.IGNORECASE)
_COMMA_OP = re.compile(r",\s*(and|or)\s+", re.IGNORECASE)
_OP = re.compile(r"\s+(and/or|and|or)\s+", re.IGNORECASE)
_KEY_TEXT = re.compile(r"[\w.:+() -]+")
"""What a licence key may hold; license-expression's validate fails outright on anything else."""


@cache
def licensing() -> Any:
    """license-expression's SPDX licensing (built once: the index has ~2,500 licences)."""
    try:
        from license_expression import get_spdx_licensing
    except ImportError as exc:
        raise ConfigError("statekit assay needs its extra: pip install 'statekit[assay]'") from exc
    return get_spdx_licensing()


@cache
def _categories() -> dict[str, str]:
    from license_expression import get_license_index

    found: dict[str, str] = {}
    for entry in get_license_index():
        for key in [entry.get("spdx_license_key"), *(entry.get("other_spdx_license_keys") or [])]:
            if key:
                found.setdefault(key.lower(), entry["category"])
    for ref, representative in FAMILIES.values():
        found[ref.lower()] = found[representative.lower()]
    return found


def category(key: str) -> str | None:
    """ScanCode's category of one licence key ("Permissive", "Copyleft", ...), or None if unknown."""
    return _categories().get(key.lower())


def parse(expression: str) -> Any:
    """A license-expression object (unknown names kept as symbols), or None when it does not parse."""
    from license_expression import ExpressionError

    try:
        return licensing().parse(expression, validate=False, simple=False)
    except (ExpressionError, ValueError, TypeError):
        return None


def spdx(text: str) -> str | None:
    """``text`` as a normalised SPDX expression if every licence in it is known, else None."""
    text = text.strip()
    if len(text) > 200 or not _KEY_TEXT.fullmatch(text):
        return None  # e.g. a whole licence text pasted into a metadata field: not an expression
    info = licensing().validate(text)
    return str(info.normalized_expression) if info.normalized_expression else None


def symbols(expression: Any) -> list[str]:
    """The licence keys in a parsed expression (an exception's base licence, not the exception)."""
    found = licensing().license_symbols(expression, decompose=False)
    return sorted({getattr(s, "license_symbol", s).key for s in found})


def ref(source: str, name: str) -> str:
    """A name no SPDX id matches, kept as ``LicenseRef-<source>-<name>`` (its category: unknown)."""
    name = name.replace("+", "-or-later")
    return f"LicenseRef-{source}-" + (re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-") or "unnamed")


def from_classifiers(classifiers: list[str]) -> str | None:
    """An AND of the licences the trove classifiers name (None: they name none).

    Several licence classifiers do not say whether the choice is AND or OR: AND is the safe reading.
    A classifier the tables lack is kept as ``LicenseRef-metadata-<its last part>``.
    """
    found: list[str] = []
    for classifier in classifiers:
        if not classifier.startswith("License ::") or classifier in (
            "License :: OSI Approved",
            "License :: DFSG approved",
        ):
            continue
        if classifier in CLASSIFIERS:
            found.append(CLASSIFIERS[classifier])
        elif classifier in FAMILIES:
            found.append(FAMILIES[classifier][0])
        else:
            found.append(ref("metadata", classifier.rsplit("::", 1)[-1]))
    return " AND ".join(dict.fromkeys(found)) or None


def _debian_atom(name: str) -> str:
    """One DEP-5 short name (``GPL-2+``, ``Expat``, ``BSD-3-clause``) as an SPDX expression."""
    base = _EXCEPTION.sub("", name.strip())  # an exception only adds permissions: judge the base licence
    if base.lower() in DEBIAN_ALIASES:
        return DEBIAN_ALIASES[base.lower()]
    direct = spdx(base)
    if direct:
        return direct
    match = _VERSIONED.fullmatch(base)
    if match:
        family, major, minor, plus = match["family"], match["major"], match["minor"] or "0", match["plus"]
        if family.upper() in GNU_FAMILIES:
            candidate = f"{family.upper()}-{major}.{minor}-{'or-later' if plus else 'only'}"
        elif family.upper() == "GFDL-NIV":  # DEP-5's name for the GFDL without invariant sections
            candidate = f"GFDL-{major}.{minor}-no-invariants-{'or-later' if plus else 'only'}"
        else:
            candidate = f"{family}-{major}.{minor}{'+' if plus else ''}"
        found = spdx(candidate)
        if found:
            return found
    return ref("debian", base)


def from_debian(synopsis: str) -> str:
    """A DEP-5 ``License:`` synopsis as an SPDX expression.

    DEP-5 joins names with ``and``/``or`` and uses a comma for looser binding ("A or B, and C" is
    "(A or B) and C"). ``and/or`` is read as AND, the reading that needs every licence to be fine.
    """
    groups: list[str] = []
    pieces = _COMMA_OP.split(synopsis.strip())
    for i in range(0, len(pieces), 2):
        tokens = _OP.split(pieces[i])
        parts = []
        for j, token in enumerate(tokens):
            if j % 2:
                parts.append("OR" if token.lower() == "or" else "AND")
            else:
                parts.append(f"({_debian_atom(token)})")
        groups.append("(" + " ".join(parts) + ")")
        if i + 1 < len(pieces):
            groups.append(pieces[i + 1].upper())
    expression = parse(" ".join(groups))
    return str(expression) if expression is not None else ref("debian", synopsis)


def combine(expressions: list[str]) -> str | None:
    """Every expression must hold: their AND, simplified (duplicates removed)."""
    unique = list(dict.fromkeys(e for e in expressions if e))
    if not unique:
        return None
    if len(unique) == 1:
        return unique[0]
    parsed = parse(" AND ".join(f"({e})" for e in unique))
    return str(parsed.simplify()) if parsed is not None else " AND ".join(unique)
