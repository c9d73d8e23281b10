"""What an assay found: the software that ships, the data sources, the recorded hosts, the findings.

Every judgement is ``yes``, ``no`` or ``unknown``. The verdict is ``no`` if anything is no,
``unknown`` if anything is unknown, and ``yes`` only when everything is; ``statekit assay`` exits 0
only for ``yes``. ``as_dict`` is the ``--json`` document: sorted keys, no paths or times, and a
format version, so two runs over the same environment give the same bytes.
"""

from __future__ import annotations

from collections import Counter
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
        """One line per area: what was checked and what it came to."""
        lines = []
        kinds = Counter(c.kind for c in self.components)
        for kind in sorted(kinds):
            mine = [c for c in self.components if c.kind == kind]
            bad = [c for c in mine if c.verdict != "yes"]
            copyleft = [c.name for c in mine if any(cat.startswith("Copyleft") for cat in c.categories)]
            line = f"{kind}: {len(mine)} component(s), {len(mine) - len(bad)} under accepted licences"
            if copyleft:
                line += f"; {len(copyleft)} copyleft (shipping them obliges you to offer their source)"
            lines.append(line)
        if not self.components:
            lines.append("licences: nothing found to ship")
        lines.append(f"fixtures: {len(self.fixtures)} declared source(s)")
        lines.append(f"traffic: {len(self.hosts)} host(s) in {len(self.cassettes)} cassette(s)")
        for area in AREAS:
            hits = [f for f in self.findings if f.area == area]
            if hits:
                lines.append(f"{area}: {len(hits)} finding(s)")
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
