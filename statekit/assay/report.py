"""What an assay found: the software that ships, the data sources, the recorded hosts, the findings.

Every judgement is ``yes``, ``no`` or ``unknown``. The verdict is ``no`` if anything is no,
``unknown`` if anything is unknown, and ``yes`` only when everything is; ``statekit assay`` exits 0
only for ``yes``. ``as_dict`` is the ``--json`` document: sorted keys, no paths or times, and a
format version, so two runs over the same environment give the same bytes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

FORMAT = 1
Verdict = Literal["yes", "no", "unknown"]
AREAS = ("licence", "fixtures", "traffic", "leaks")
"""Finding areas: licences of what ships, fixture sources, recorded hosts, leaks in cassettes."""


@dataclass(frozen=True)
class Shipped:
    """One thing that ships with the environment and the licence its own metadata states."""

    kind: str
    """``application`` (the adapter's distribution), ``python`` (a dependency) or ``debian``."""
    name: str
    version: str
    licence: str | None
    """A normalised SPDX expression (unknown names as ``LicenseRef-…``), or None if none is stated."""
    evidence: str
    """Where the licence was read: ``License-Expression``, ``classifiers``, ``DEP-5``, ..."""
    debian_main: bool = False
    """A Debian package from the main archive area (DFSG-free), not contrib or non-free."""


@dataclass(frozen=True)
class Component:
    """A shipped thing with the policy's judgement of its licence."""

    kind: str
    name: str
    version: str
    licence: str | None
    evidence: str
    verdict: Verdict
    reason: str
    categories: tuple[str, ...] = ()
    """The ScanCode categories of its licences (Permissive, Copyleft, ...), for the summary."""


@dataclass(frozen=True)
class Finding:
    """Something that stops the verdict being yes: what, where, and why."""

    area: str
    subject: str
    verdict: Verdict
    reason: str


@dataclass
class AssayReport:
    adapter: str
    strategy: str
    policy: str
    components: list[Component] = field(default_factory=list)
    fixtures: list[dict[str, Any]] = field(default_factory=list)
    hosts: list[dict[str, Any]] = field(default_factory=list)
    cassettes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    images: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        verdicts = {f.verdict for f in self.findings}
        return "no" if "no" in verdicts else "unknown" if "unknown" in verdicts else "yes"

    @property
    def ok(self) -> bool:
        return self.verdict == "yes"

    def reasons(self) -> list[str]:
        """One line per question: what was checked and what it came to."""
        bad = [c for c in self.components if c.verdict != "yes"]
        dfsg = sum("Debian main" in c.reason for c in self.components if c.verdict == "yes")
        copyleft = sum(any(cat.startswith("Copyleft") for cat in c.categories) for c in self.components)
        line = f"licences: {len(self.components)} component(s) ship, " + (
            f"{len(bad)} not under an accepted licence" if bad else "all under accepted licences"
        )
        if dfsg:
            line += f" ({dfsg} Debian package(s) on DFSG grounds)"
        if copyleft:
            line += f"; {copyleft} copyleft: offer their source with what you ship"
        lines = [line]
        if self.fixtures:
            lines.append("fixtures: " + ", ".join(f"{f['name']} ({_kind_of(f)})" for f in self.fixtures))
        else:
            lines.append("fixtures: no source declared")
        if self.cassettes:
            good = sum(h["verdict"] == "yes" for h in self.hosts)
            lines.append(
                f"traffic: {len(self.hosts)} host(s) in {len(self.cassettes)} cassette(s), "
                f"{good} with provenance that allows redistribution"
            )
            leaky = {f.subject for f in self.findings if f.area == "leaks"}
            lines.append(
                f"leaks: {len(self.cassettes)} cassette(s) scanned, "
                f"{len(leaky)} with credential-looking values or personal data"
            )
        else:
            lines.append("traffic: no recorded traffic")
        return lines

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "adapter": self.adapter,
            "strategy": self.strategy,
            "policy": self.policy,
            "verdict": self.verdict,
            "reasons": self.reasons(),
            "images": sorted(self.images),
            "components": [{**asdict(c), "categories": list(c.categories)} for c in self._components()],
            "fixtures": self.fixtures,
            "hosts": sorted(self.hosts, key=lambda h: str(h["host"])),
            "cassettes": sorted(self.cassettes),
            "findings": [asdict(f) for f in self._findings()],
        }

    def _components(self) -> list[Component]:
        return sorted(self.components, key=lambda c: (c.kind, c.name.lower(), c.version))

    def _findings(self) -> list[Finding]:
        return sorted(self.findings, key=lambda f: (AREAS.index(f.area), f.subject))


def _kind_of(source: dict[str, Any]) -> str:
    if source["production_data"]:
        return "production data"
    return "synthetic" if source["synthetic"] else f"named source, terms: {source['terms'] or 'not stated'}"
