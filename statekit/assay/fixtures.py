"""Whose data is in the fixtures: the adapter's declared sources, judged against the policy.

Production data is always a finding (document 000, the engine brief: it carries every obligation the
production data carries). Synthetic sources hold nobody's data. A named source is accepted when the
policy lists it by name, or when its terms are an SPDX expression the policy accepts; otherwise it is
unknown until a person reads the terms. An adapter that declares nothing is unknown: the question is
unanswered.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from statekit.assay import spdx
from statekit.assay.policy import Policy
from statekit.assay.report import Finding, Verdict
from statekit.contract import FixtureSource


def judge(source: FixtureSource, policy: Policy) -> tuple[Verdict, str]:
    if source.production_data:
        return "no", "drawn from production data: it carries every obligation the production data carries"
    if source.synthetic:
        if policy.accept_synthetic:
            return "yes", f"synthetic ({source.origin})"
        return "unknown", "synthetic, but the policy does not accept synthetic sources unreviewed"
    if policy.accepts_source(source.name):
        return "yes", f"named source accepted by the policy; terms: {source.terms or 'not stated'}"
    parsed = spdx.parse(source.terms) if source.terms and spdx.spdx(source.terms) else None
    if parsed is not None:
        verdict = policy.evaluate(parsed)
        if verdict is not None:
            return (
                ("yes", f"terms {source.terms} accepted")
                if verdict
                else ("no", f"the policy rejects {source.terms}")
            )
    what = f"terms {source.terms!r}" if source.terms else "no terms stated"
    return (
        "unknown",
        f"named source with {what}; read its terms and list it in the policy's fixtures.accept_sources",
    )


def assess(
    sources: list[FixtureSource], adapter: str, policy: Policy
) -> tuple[list[dict[str, Any]], list[Finding]]:
    """(the declared sources with their verdicts, the findings)."""
    if not sources:
        reason = (
            f"adapter {adapter!r} does not declare where its seeded data comes from: "
            "give it the AssayHooks capability (fixture_sources())"
        )
        return [], [Finding("fixtures", adapter, "unknown", reason)]
    rows, findings = [], []
    for source in sources:
        verdict, reason = judge(source, policy)
        rows.append({**asdict(source), "verdict": verdict, "reason": reason})
        if verdict != "yes":
            findings.append(Finding("fixtures", source.name, verdict, reason))
    return rows, findings
