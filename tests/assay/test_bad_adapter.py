"""The issue's bar: a deliberately bad adapter gets exactly one finding per defect and exits non-zero.

Each run is ``statekit assay`` in a fresh interpreter with the adapter's real distribution on
``PYTHONPATH``, as a user would run it; the clean variant of the same adapter proves every finding
comes from its defect, not from the assay.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.assay.builder import DEFECTS, build, fake_token


def run_assay(tmp_path: Path, defects: frozenset[str], *extra: str) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir()
    target = build(site, defects)
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "statekit.cli", "assay", target, *extra],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_every_defect_gets_exactly_one_finding_and_the_verdict_is_no(tmp_path: Path) -> None:
    done = run_assay(tmp_path, frozenset(DEFECTS), "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] == "no"
    findings = {(f["area"], f["subject"]): f for f in report["findings"]}
    assert sorted(findings) == [
        ("fixtures", "ledger accounts"),
        ("leaks", "cassettes/charge.yaml"),
        ("licence", "python:ledgerlib 2.0"),
        ("traffic", "api.unrecorded.example"),
    ], report["findings"]
    assert findings[("licence", "python:ledgerlib 2.0")]["verdict"] == "no"
    assert (
        "LicenseRef-scancode-proprietary-license (Commercial)"
        in findings[("licence", "python:ledgerlib 2.0")]["reason"]
    )
    assert findings[("fixtures", "ledger accounts")]["verdict"] == "no"
    assert "production data" in findings[("fixtures", "ledger accounts")]["reason"]
    assert findings[("traffic", "api.unrecorded.example")]["verdict"] == "unknown"
    assert (
        "no entry in cassettes/PROVENANCE.toml" in findings[("traffic", "api.unrecorded.example")]["reason"]
    )
    leak = findings[("leaks", "cassettes/charge.yaml")]
    assert leak["verdict"] == "no" and "GitHub Token (line 11)" in leak["reason"], leak
    assert fake_token() not in done.stdout, "a finding names where the secret is, never the secret"
    hosts = {h["host"]: h["verdict"] for h in report["hosts"]}
    assert hosts == {"api.partner.example": "yes", "api.unrecorded.example": "unknown"}


def test_the_same_adapter_without_defects_ships(tmp_path: Path) -> None:
    done = run_assay(tmp_path, frozenset(), "--json")
    report = json.loads(done.stdout)
    assert report["findings"] == [] and report["verdict"] == "yes", report["findings"]
    assert done.returncode == 0
    names = {(c["kind"], c["name"]): c for c in report["components"]}
    assert names[("application", "tested_adapter")]["licence"] == "MIT"
    assert names[("python", "ledgerlib")]["licence"] == "BSD-3-Clause"
    assert ("application", "statekit") in names, "statekit runs the environment, so it ships too"


def test_the_table_names_each_problem(tmp_path: Path) -> None:
    done = run_assay(tmp_path, frozenset(DEFECTS))
    assert done.returncode == 1, done.stderr
    for text in ("python:ledgerlib 2.0", "api.unrecorded.example", "ledger accounts", "charge.yaml", "NO"):
        assert text in done.stdout, text
