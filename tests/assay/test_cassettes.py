"""Recorded traffic: provenance beside the cassettes, and what a cassette must not carry."""

from __future__ import annotations

from pathlib import Path

import pytest

from statekit.assay import leaks, traffic
from statekit.assay.policy import Policy
from statekit.errors import ConfigError
from tests.assay.builder import CASSETTE


def cassette(directory: Path, name: str, body: str, host: str = "api.partner.example") -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(CASSETTE.format(host=host, path="x", body=body))
    return path


def findings(path: Path) -> list[tuple[str, str]]:
    recorded = {path: traffic.read_cassette(path)}
    return [(f.verdict, f.reason) for f in leaks.scan(recorded, Policy.load())]


def test_addresses_at_reserved_domains_belong_to_nobody(tmp_path: Path) -> None:
    path = cassette(tmp_path / "c", "a.yaml", '{"to":"jane@example.com","cc":"ops@mail.test"}')
    assert findings(path) == []


def test_a_real_looking_email_and_phone_number_are_for_a_person_to_confirm(tmp_path: Path) -> None:
    path = cassette(tmp_path / "c", "a.yaml", '{"to":"jane.doe@gmail.com","phone":"+44 20 7946 0958"}')
    [(verdict, reason)] = findings(path)
    assert verdict == "unknown"
    assert "e-mail address at gmail.com (line 11)" in reason and "phone number (GB) (line 11)" in reason
    assert "jane.doe" not in reason, "the value itself is never printed"


def test_a_recorded_credential_header_is_a_no(tmp_path: Path) -> None:
    path = cassette(tmp_path / "c", "a.yaml", '{"ok":true}')
    text = path.read_text().replace(
        "      content-type:\n      - application/json\n    method",
        "      cookie:\n      - session=1\n    method",
        1,
    )
    path.write_text(text)
    [(verdict, reason)] = findings(path)
    assert verdict == "no" and "cookie header in request 1 (POST http://api.partner.example/v1/x)" in reason


def test_a_clean_vendor_cassette_has_no_finding() -> None:
    claims = Path(__file__).resolve().parents[2] / "replay_cassettes" / "claims_app" / "seed-7.yaml"
    assert findings(claims) == []


def test_hosts_are_judged_by_the_provenance_beside_them(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    paths = [
        cassette(directory, "a.yaml", "{}", host="api.partner.example"),
        cassette(directory, "b.yaml", "{}", host="paid.vendor.example"),
    ]
    (directory / traffic.PROVENANCE).write_text(
        'format = 1\n[hosts."api.partner.example"]\napi = "Partner"\nterms = "ours"\nredistributable = true\n'
        '[hosts."paid.vendor.example"]\napi = "Vendor"\nterms = "paid API ToS"\nredistributable = false\n'
    )
    recorded = {p: traffic.read_cassette(p) for p in paths}
    rows, found = traffic.assess(paths, recorded, "x", replay_control="outbound")
    assert [(r["host"], r["verdict"]) for r in rows] == [
        ("api.partner.example", "yes"),
        ("paid.vendor.example", "no"),
    ]
    assert [(f.subject, f.verdict) for f in found] == [("paid.vendor.example", "no")]


def test_a_missing_provenance_file_leaves_every_host_unknown(tmp_path: Path) -> None:
    path = cassette(tmp_path / "c", "a.yaml", "{}")
    _, found = traffic.assess([path], {path: traffic.read_cassette(path)}, "x", replay_control="outbound")
    assert [(f.subject, f.verdict) for f in found] == [("api.partner.example", "unknown")]
    assert "no PROVENANCE.toml beside the cassettes in c/" in found[0].reason


def test_an_adapter_that_replays_traffic_must_list_its_cassettes() -> None:
    _, found = traffic.assess([], {}, "x", replay_control="outbound")
    [finding] = found
    assert finding.verdict == "unknown"
    assert "replays outbound traffic (control 'outbound') but lists no cassettes" in finding.reason
    assert traffic.assess([], {}, "x", replay_control=None) == ([], [])


def test_a_malformed_provenance_entry_says_what_it_needs(tmp_path: Path) -> None:
    (tmp_path / traffic.PROVENANCE).write_text(
        'format = 1\n[hosts."a.example"]\napi = "A"\nredistributable = "yes"\n'
    )
    with pytest.raises(ConfigError, match=r"needs exactly api \(text\), terms \(text\) and redistributable"):
        traffic.load_provenance(tmp_path)


def test_a_file_that_is_not_a_cassette_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("just: text\n")
    with pytest.raises(ConfigError, match="cannot be read as a vcrpy cassette"):
        traffic.read_cassette(path)
