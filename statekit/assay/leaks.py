"""What a recorded interaction must not carry: credentials and personal data.

Credentials are detect-secrets' job (its plugins for AWS, Stripe, GitHub, Slack, JWT, private keys,
``password=``-style keywords and high-entropy strings, with its false-positive filters), plus any
header statekit scrubs when recording (``Authorization``, ``Cookie``, ...) that is still in a
cassette. A credential is a ``no``: a cassette that holds one must not ship.

Personal data is a judgement call, so it is ``unknown`` (a person must look), never ``no``:
- e-mail addresses, except at domains reserved so that they belong to nobody (RFC 2606 and 6761:
  ``example.com/.net/.org``, ``*.example``, ``*.test``, ``*.invalid``, ``*.localhost``);
- phone numbers the phonenumbers library (Google's libphonenumber) judges valid: in international
  form anywhere, in national form for the policy's ``phone_regions``.
Street addresses and names are not looked for: without a model of the data, every city name would
be a finding. The fixture declaration is what answers for them.
Findings show where (line) and what kind, never the value itself.
"""

from __future__ import annotations

import re
from pathlib import Path

from statekit.assay.policy import Policy
from statekit.assay.report import Finding
from statekit.assay.traffic import Interaction, label
from statekit.determinism.replay import SECRET_HEADERS
from statekit.errors import ConfigError

EMAIL = re.compile(r"(?<![\w.+-])[\w.+-]+@((?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,})(?![\w-])")
RESERVED_DOMAINS = ("example.com", "example.net", "example.org")
RESERVED_SUFFIXES = (".example", ".test", ".invalid", ".localhost")


def _is_reserved(domain: str) -> bool:
    domain = domain.lower()
    return any(domain == d or domain.endswith("." + d) for d in RESERVED_DOMAINS) or any(
        domain.endswith(s) or domain == s[1:] for s in RESERVED_SUFFIXES
    )


def credentials(recorded: dict[Path, list[Interaction]]) -> dict[Path, list[str]]:
    """Per cassette, where it holds something credential-like: detector and line, or header and request."""
    try:
        from detect_secrets.core.scan import scan_file
        from detect_secrets.settings import default_settings
    except ImportError as exc:
        raise ConfigError("statekit assay needs its extra: pip install 'statekit[assay]'") from exc
    found: dict[Path, dict[tuple[int, str], set[str]]] = {}
    with default_settings():  # every plugin and false-positive filter detect-secrets ships, as its CLI
        for path in recorded:
            for secret in scan_file(str(path)):
                key = (secret.line_number, secret.secret_hash)
                found.setdefault(path, {}).setdefault(key, set()).add(secret.type)
    places: dict[Path, list[str]] = {}
    for path, interactions in recorded.items():
        hits = found.get(path, {})
        mine = [f"{', '.join(sorted(types))} (line {line})" for (line, _), types in sorted(hits.items())]
        for number, interaction in enumerate(interactions, 1):
            for side, headers in (
                ("request", interaction.request_headers),
                ("response", interaction.response_headers),
            ):
                for name in headers:
                    if name.lower() in SECRET_HEADERS:
                        mine.append(
                            f"{name} header in {side} {number} ({interaction.method} {interaction.uri})"
                        )
        places[path] = mine
    return places


def personal_data(path: Path, regions: tuple[str, ...]) -> list[str]:
    """Where ``path`` holds an e-mail address or phone number that could be someone's."""
    import phonenumbers

    places = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for match in EMAIL.finditer(line):
            if not _is_reserved(match.group(1)):
                places.append(f"e-mail address at {match.group(1)} (line {number})")
        seen: set[str] = set()
        for region in (None, *regions):
            for hit in phonenumbers.PhoneNumberMatcher(line, region, leniency=phonenumbers.Leniency.VALID):
                key = phonenumbers.format_number(hit.number, phonenumbers.PhoneNumberFormat.E164)
                if key not in seen:
                    seen.add(key)
                    code = phonenumbers.region_code_for_number(hit.number)
                    places.append(f"phone number ({code}) (line {number})")
    return places


def scan(recorded: dict[Path, list[Interaction]], policy: Policy) -> list[Finding]:
    """One finding per cassette and kind of leak."""
    findings = []
    found = credentials(recorded)
    for path in sorted(recorded):
        secrets = found[path]
        if secrets:
            reason = "credential-looking values, which must not ship: " + "; ".join(secrets)
            findings.append(Finding("leaks", label(path), "no", reason + ". Scrub them and re-record."))
        people = personal_data(path, policy.phone_regions)
        if people:
            reason = "possible personal data: " + "; ".join(people)
            findings.append(
                Finding("leaks", label(path), "unknown", reason + ". Confirm it is synthetic, or scrub it.")
            )
    return findings
