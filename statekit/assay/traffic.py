"""Whose responses are in the cassettes: every recorded host needs a provenance entry.

``PROVENANCE.toml`` lives beside the cassettes it describes, one table per host::

    format = 1
    [hosts."api.vendor.example"]
    api = "Vendor Inc.'s fraud-scoring API"      # whose API
    terms = "Vendor API terms of service, 2024"   # under which terms it was recorded
    redistributable = false                       # may its recorded responses ship?

A host with no entry is unknown (nobody has answered the question); ``redistributable = false`` is
no. Hosts are read from the cassettes with vcrpy's own loader; requests to the application itself
driven in-process (Starlette's ``testserver``) are not outside traffic.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statekit.assay.report import Finding
from statekit.determinism.replay import IN_PROCESS_HOSTS
from statekit.errors import ConfigError

PROVENANCE = "PROVENANCE.toml"
FORMAT = 1
_FIELDS = {"api": str, "terms": str, "redistributable": bool}


@dataclass(frozen=True)
class Interaction:
    """One recorded request and its response, as vcrpy reads them."""

    host: str
    method: str
    uri: str
    request_headers: dict[str, Any]
    response_headers: dict[str, Any]


@dataclass(frozen=True)
class Provenance:
    api: str
    terms: str
    redistributable: bool


def label(path: Path) -> str:
    """A cassette's name in reports: its folder and file, never an absolute path."""
    return f"{path.parent.name}/{path.name}"


def read_cassette(path: Path) -> list[Interaction]:
    from vcr.serialize import deserialize
    from vcr.serializers import yamlserializer

    try:
        loaded = deserialize(path.read_text(), yamlserializer)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cassette {path} cannot be read as a vcrpy cassette: {exc}") from exc
    requests, responses = loaded[0], loaded[1]
    return [
        Interaction(
            host=str(request.host),
            method=str(request.method),
            uri=str(request.uri),
            request_headers=dict(request.headers),
            response_headers=dict(response.get("headers") or {}),
        )
        for request, response in zip(requests, responses, strict=True)
    ]


def load_provenance(directory: Path) -> dict[str, Provenance] | None:
    """The provenance entries kept beside the cassettes in ``directory`` (None: no file there)."""
    path = directory / PROVENANCE
    if not path.exists():
        return None
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    if data.get("format") != FORMAT:
        raise ConfigError(f"{path}: expected format = {FORMAT}, got {data.get('format')!r}")
    hosts = data.get("hosts", {})
    if not isinstance(hosts, dict) or set(data) - {"format", "hosts"}:
        raise ConfigError(f'{path}: expected `format` and [hosts."NAME"] tables only')
    found = {}
    for host, entry in hosts.items():
        if (
            not isinstance(entry, dict)
            or set(entry) != set(_FIELDS)
            or not all(isinstance(entry[k], t) for k, t in _FIELDS.items())
        ):
            raise ConfigError(
                f"{path}: [hosts.{host!r}] needs exactly api (text), terms (text) and "
                f"redistributable (true/false); got {entry!r}"
            )
        found[host.lower()] = Provenance(entry["api"], entry["terms"], entry["redistributable"])
    return found


def assess(
    cassettes: list[Path],
    recorded: dict[Path, list[Interaction]],
    adapter: str,
    replay_control: str | None,
) -> tuple[list[dict[str, Any]], list[Finding]]:
    """(one row per recorded host with its provenance and verdict, the findings). ``replay_control``
    is the adapter's control that replays outbound traffic, if any (``capabilities.replay_control``)."""
    if not cassettes:
        if replay_control:
            reason = (
                f"adapter {adapter!r} replays outbound traffic (control {replay_control!r}) but lists no "
                "cassettes: give it the AssayHooks capability (cassettes())"
            )
            return [], [Finding("traffic", adapter, "unknown", reason)]
        return [], []
    seen: dict[tuple[Path, str], list[str]] = {}
    for path in cassettes:
        for interaction in recorded[path]:
            if interaction.host not in IN_PROCESS_HOSTS:
                seen.setdefault((path.parent, interaction.host.lower()), []).append(label(path))
    rows, findings = [], []
    provenance = {directory: load_provenance(directory) for directory in {p.parent for p in cassettes}}
    for (directory, host), where in sorted(seen.items()):
        entries = provenance[directory]
        entry = entries.get(host) if entries is not None else None
        row: dict[str, Any] = {"host": host, "cassettes": len(set(where)), "api": "", "terms": ""}
        if entry is None:
            missing = (
                f"no entry in {directory.name}/{PROVENANCE}"
                if entries is not None
                else (f"no {PROVENANCE} beside the cassettes in {directory.name}/")
            )
            reason = (
                f"recorded in {len(set(where))} cassette(s) with {missing}: "
                "say whose API, under which terms, redistributable or not"
            )
            row.update(redistributable=None, verdict="unknown", reason=reason)
            findings.append(Finding("traffic", host, "unknown", reason))
        elif not entry.redistributable:
            reason = (
                f"{entry.api}: recorded under {entry.terms}, which do not allow redistributing its responses"
            )
            row.update(api=entry.api, terms=entry.terms, redistributable=False, verdict="no", reason=reason)
            findings.append(Finding("traffic", host, "no", reason))
        else:
            row.update(
                api=entry.api,
                terms=entry.terms,
                redistributable=True,
                verdict="yes",
                reason="redistributable",
            )
        rows.append(row)
    return rows, findings
