"""Licences of Python distributions: the closure an environment runs, or the wheels inside an image.

A distribution's licence is read from its core metadata, best evidence first: ``License-Expression``
(PEP 639: an SPDX expression, authoritative), then ``License`` when it is a valid SPDX expression,
then the trove licence classifiers, and last ``License`` as free text (named, never guessed at).
The closure follows ``Requires-Dist`` from importlib.metadata (markers evaluated for this
interpreter; an extra only where a requirement asks for it), so it is what ``pip install`` of the
adapter's distribution would have put there, not everything in the virtualenv.
"""

from __future__ import annotations

import email.parser
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import metadata
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from statekit.assay import spdx
from statekit.assay.report import Shipped


def licence_of(meta: Any) -> tuple[str | None, str]:
    """(licence expression, evidence) from core metadata (importlib's or a parsed METADATA file)."""
    declared = (meta.get("License-Expression") or "").strip()
    if declared:
        found = spdx.spdx(declared)
        return (found, "License-Expression") if found else (_named(declared), "License-Expression (not SPDX)")
    text = (meta.get("License") or "").strip()
    if text and text.upper() != "UNKNOWN":
        found = spdx.spdx(text)
        if found:
            return found, "License"
    classified = spdx.from_classifiers(list(meta.get_all("Classifier") or []))
    if classified:
        return classified, "classifiers"
    if text and text.upper() != "UNKNOWN":
        return _named(text), "License (free text)"
    return None, "no licence metadata"


def _named(text: str) -> str:
    """Free text kept as a name the report can show (first line, as a LicenseRef)."""
    first = text.strip().splitlines()[0][:60]
    return spdx.ref("metadata", first)


def shipped(meta: Any, kind: str) -> Shipped:
    licence, evidence = licence_of(meta)
    return Shipped(kind, str(meta["Name"]), str(meta["Version"]), licence, evidence)


def distribution_of(module: str) -> list[str]:
    """The installed distributions that provide the top-level package of ``module``."""
    top = module.split(".")[0]
    return sorted({canonicalize_name(d) for d in _packages().get(top, [])})


@cache
def _packages() -> Mapping[str, list[str]]:
    """importlib's map of top-level packages to distributions (it reads every RECORD: slow, so once)."""
    return metadata.packages_distributions()


def closure(roots: Iterable[str]) -> tuple[list[Shipped], list[Shipped]]:
    """(the roots, everything they require at run time), each distribution once.

    A requirement that is not installed is reported with no licence: the assay cannot read it.
    """
    pending: list[tuple[str, frozenset[str], str]] = [(canonicalize_name(r), frozenset(), "") for r in roots]
    seen_extras: dict[str, set[str]] = {}
    found: dict[str, Shipped] = {}
    root_names = {name for name, _, _ in pending}
    while pending:
        name, extras, wanted_by = pending.pop()
        known = seen_extras.setdefault(name, set())
        if name in found and extras <= known:
            continue
        known.update(extras)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            found[name] = Shipped("python", name, "", None, f"required by {wanted_by} but not installed")
            continue
        kind = "application" if name in root_names else "python"
        found[name] = shipped(dist.metadata, kind)
        for text in dist.requires or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue  # metadata pip itself would refuse; nothing of it was installed
            environments = [{"extra": e} for e in sorted(extras | {""})]
            if req.marker is None or any(req.marker.evaluate(env) for env in environments):
                pending.append((canonicalize_name(req.name), frozenset(req.extras), name))
    roots_found = [s for n, s in sorted(found.items()) if n in root_names]
    deps = [s for n, s in sorted(found.items()) if n not in root_names]
    return roots_found, deps


def from_metadata_files(files: dict[str, bytes]) -> list[Shipped]:
    """Distributions from ``*.dist-info/METADATA`` files read out of an image."""
    parser = email.parser.BytesHeaderParser()
    found: dict[str, Shipped] = {}
    for path in sorted(files):
        meta = parser.parsebytes(files[path])
        if meta.get("Name"):
            item = shipped(meta, "python")
            found.setdefault(canonicalize_name(item.name), item)
    return list(found.values())
