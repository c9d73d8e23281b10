"""An assay report for people (rich tables) and for machines (stable JSON)."""

from __future__ import annotations

import json
from collections import Counter

from rich.console import Console
from rich.table import Table

from statekit.assay import spdx
from statekit.assay.report import AssayReport

COLOURS = {"yes": "green", "no": "red", "unknown": "yellow"}
TOP_LICENCES = 4


def to_json(report: AssayReport) -> str:
    """Sorted keys and a format version: the same environment gives the same bytes."""
    return json.dumps(report.as_dict(), sort_keys=True, ensure_ascii=False, indent=1)


def _table(title: str, *headers: str) -> Table:
    """A table whose long words (paths, hosts) fold onto the next line instead of being cut."""
    table = Table(title=title)
    for header in headers:
        table.add_column(header, overflow="fold")
    return table


def _mark(verdict: str) -> str:
    return f"[{COLOURS[verdict]}]{verdict}[/]"


def _licences(report: AssayReport, kind: str) -> str:
    counts: Counter[str] = Counter()
    for c in report.components:
        if c.kind == kind and c.licence:
            parsed = spdx.parse(c.licence)
            keys = spdx.symbols(parsed) if parsed is not None else [c.licence]
            counts.update(k for k in keys if not k.startswith("LicenseRef-debian-"))
    shown = ", ".join(f"{k} {n}" for k, n in counts.most_common(TOP_LICENCES))
    rest = len(counts) - TOP_LICENCES
    return shown + (f", {rest} more" if rest > 0 else "")


def render(report: AssayReport, console: Console) -> None:
    console.rule(
        f"[bold]statekit assay {report.adapter}[/] (strategy {report.strategy}, policy {report.policy})"
    )
    if report.images:
        console.print("image: " + ", ".join(i[:19] for i in report.images))
    shipped = _table(
        "what ships", "kind", "components", "yes", "no", "unknown", "most common licences", "notes"
    )
    for kind in sorted({c.kind for c in report.components}):
        mine = [c for c in report.components if c.kind == kind]
        verdicts = Counter(c.verdict for c in mine)
        notes = []
        dfsg = sum("Debian main" in c.reason for c in mine)
        if dfsg:
            notes.append(f"{dfsg} on DFSG grounds (Debian main)")
        copyleft = sum(any(cat.startswith("Copyleft") for cat in c.categories) for c in mine)
        if copyleft:
            notes.append(f"{copyleft} copyleft")
        shipped.add_row(
            kind,
            str(len(mine)),
            str(verdicts["yes"]),
            str(verdicts["no"]),
            str(verdicts["unknown"]),
            _licences(report, kind),
            "; ".join(notes),
        )
    console.print(shipped)

    sources = _table("fixtures", "source", "origin", "synthetic", "terms", "verdict")
    for row in report.fixtures:
        synthetic = "yes" if row["synthetic"] else "no"
        if row["production_data"]:
            synthetic += " (production data)"
        sources.add_row(row["name"], row["origin"], synthetic, row["terms"] or "-", _mark(row["verdict"]))
    if report.fixtures:
        console.print(sources)

    hosts = _table("recorded traffic", "host", "whose API", "terms", "may ship", "cassettes", "verdict")
    hosts.columns[0].no_wrap = True
    for row in report.hosts:
        redistributable = {True: "yes", False: "no", None: "?"}[row["redistributable"]]
        hosts.add_row(
            row["host"],
            row["api"] or "-",
            row["terms"] or "-",
            redistributable,
            str(row["cassettes"]),
            _mark(row["verdict"]),
        )
    if report.hosts:
        console.print(hosts)

    if report.findings:
        findings = _table("findings", "area", "subject", "verdict", "reason")
        for f in sorted(report.findings, key=lambda f: (f.area, f.subject)):
            findings.add_row(f.area, f.subject, _mark(f.verdict), f.reason)
        console.print(findings)
    colour = COLOURS[report.verdict]
    console.print(f"redistributable: [bold {colour}]{report.verdict.upper()}[/]")
    for line in report.reasons():
        console.print(f"  - {line}")
