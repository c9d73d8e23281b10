"""The claims environment's assay reads what really ships, and a team's policy changes the verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from statekit.assay.policy import Policy
from statekit.assay.render import to_json
from statekit.assay.run import assay
from statekit.cli import main
from tests.assay.helpers import cli_assay

PINS = Path(__file__).resolve().parents[2] / "images" / "claims-requirements.txt"


def test_template_assay_reads_the_closure_the_environment_runs() -> None:
    report = assay("claims_app")
    assert to_json(report) == to_json(assay("claims_app")), "--json is the same bytes run after run"
    names = {(c.kind, c.name.lower()): c for c in report.components}
    assert names[("application", "statekit")].licence == "Apache-2.0"
    assert names[("python", "psycopg")].licence == "LGPL-3.0-only"
    assert names[("python", "faker")].evidence == "classifiers", "Faker states its licence only by classifier"
    assert ("python", "pytest") not in names, "a dev extra is not what the environment runs"
    assert not any(c.kind == "debian" for c in report.components), "nothing of the host OS ships"
    assert report.hosts == [
        {
            "host": "vendors.statekit.invalid",
            "cassettes": 24,
            "api": "statekit's vendor stubs (examples/claims_app/vendors)",
            "terms": "Apache-2.0 (statekit's own code)",
            "redistributable": True,
            "verdict": "yes",
            "reason": "redistributable",
        }
    ]


def test_a_policy_that_rejects_a_licence_names_what_carries_it(tmp_path: Path) -> None:
    policy = tmp_path / "team.toml"
    policy.write_text('[licences]\nreject = ["LGPL-3.0-only"]\n')
    report = assay("claims_app", policy=Policy.load(policy))
    assert report.verdict == "no"
    assert sorted(f.subject.split()[0] for f in report.findings) == [
        "python:psycopg",
        "python:psycopg-binary",
    ]
    assert all("the policy rejects LGPL-3.0-only" in f.reason for f in report.findings)


def test_a_policy_with_an_unknown_key_is_refused_with_the_keys_it_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "team.toml"
    policy.write_text('[licences]\nrejected = ["GPL-3.0-only"]\n')
    assert main(["assay", "claims_app", "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert "[licences] has no key 'rejected'" in err and "'reject'" in err


@pytest.mark.docker
def test_container_assay_reads_every_debian_package_and_wheel_in_the_image() -> None:
    code, report = cli_assay("claims_app", "container")
    assert code == 0
    debian = {c["name"]: c for c in report["components"] if c["kind"] == "debian"}
    wheels = {canonicalize_name(c["name"]): c for c in report["components"] if c["kind"] == "python"}
    assert len(debian) > 100 and {"postgresql-15", "python3", "libc6", "bash"} <= set(debian)
    assert (
        debian["postgresql-15"]["evidence"] == "DEP-5" and "PostgreSQL" in debian["postgresql-15"]["licence"]
    )
    orphans = [name for name, c in debian.items() if c["evidence"] == "no copyright file"]
    assert orphans == [], "a package whose doc dir is gone reads its source sibling's copyright file"
    pinned = {
        canonicalize_name(line.split("==")[0]) for line in PINS.read_text().splitlines() if "==" in line
    }
    assert pinned <= set(wheels), f"wheels pinned but not found in the image: {sorted(pinned - set(wheels))}"
    assert report["images"] and report["images"][0].startswith("sha256:")
