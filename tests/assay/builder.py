"""Build a real adapter distribution on disk for the assay to judge, with chosen defects.

The adapter is the in-memory ledger with its declarations overridden; it is installed the way pip
leaves a distribution (a package directory beside ``NAME-VERSION.dist-info`` with ``METADATA`` and
``top_level.txt``), in a directory that goes on ``PYTHONPATH``. Its dependency is a second real
distribution whose metadata carries the licence under test.
"""

from __future__ import annotations

import random
import string
from pathlib import Path

DEFECTS = ("proprietary_dependency", "host_without_provenance", "production_fixtures", "token_in_cassette")

ADAPTER = """
from pathlib import Path

from statekit.kit import AssayHooks, FixtureSource
from statekit.testing.ledger import LedgerAdapter

HERE = Path(__file__).parent


class TestedAdapter(LedgerAdapter, AssayHooks):
    name = "tested"

    def fixture_sources(self):
        return [
            FixtureSource(
                name="ledger accounts",
                origin={origin!r},
                synthetic={synthetic!r},
                production_data={production!r},
            )
        ]

    def cassettes(self):
        return sorted((HERE / "cassettes").glob("*.yaml"))
"""

CASSETTE = """interactions:
- request:
    body: '{{"account":"acc-1"}}'
    headers:
      content-type:
      - application/json
    method: POST
    uri: http://{host}/v1/{path}
  response:
    body:
      string: '{body}'
    headers:
      content-type:
      - application/json
    status:
      code: 200
      message: OK
version: 1
"""

PROVENANCE = """format = 1

[hosts."api.partner.example"]
api = "Partner Ltd's ledger API"
terms = "Partner API agreement 2025, clause 4: recorded responses may be redistributed"
redistributable = true
"""


def fake_token() -> str:
    """A GitHub-token-shaped string, made here so no token literal sits in the source."""
    rng = random.Random(16)
    return "ghp" + "_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))


def _dist_info(site: Path, name: str, version: str, headers: list[str], top_level: str | None) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    lines = ["Metadata-Version: 2.4", f"Name: {name}", f"Version: {version}", *headers]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    (info / "INSTALLER").write_text("statekit-tests\n")
    if top_level:
        (info / "top_level.txt").write_text(top_level + "\n")


def build(site: Path, defects: frozenset[str]) -> str:
    """Install the tested adapter into ``site``; return its ``module:attribute`` path."""
    unknown = defects - set(DEFECTS)
    assert not unknown, f"no such defect: {sorted(unknown)}"
    package = site / "tested_adapter"
    cassettes = package / "cassettes"
    cassettes.mkdir(parents=True)
    production = "production_fixtures" in defects
    (package / "__init__.py").write_text(
        ADAPTER.format(
            origin="replica of the production ledger" if production else "random.Random(seed) account names",
            synthetic=not production,
            production=production,
        )
    )
    body = '{"charge":"ch_1","status":"ok"}'
    if "token_in_cassette" in defects:
        body = '{"charge":"ch_1","status":"ok","access_token":"' + fake_token() + '"}'
    (cassettes / "charge.yaml").write_text(
        CASSETTE.format(host="api.partner.example", path="charges", body=body)
    )
    (cassettes / "PROVENANCE.toml").write_text(PROVENANCE)
    if "host_without_provenance" in defects:
        (cassettes / "lookup.yaml").write_text(
            CASSETTE.format(host="api.unrecorded.example", path="lookup", body='{"found":true}')
        )
    _dist_info(
        site,
        "tested_adapter",
        "0.1",
        ["License-Expression: MIT", "Requires-Dist: statekit", "Requires-Dist: ledgerlib>=1"],
        "tested_adapter",
    )
    if "proprietary_dependency" in defects:
        licence = ["License: Proprietary", "Classifier: License :: Other/Proprietary License"]
    else:
        licence = ["License-Expression: BSD-3-Clause"]
    _dist_info(site, "ledgerlib", "2.0", licence, None)
    return "tested_adapter:TestedAdapter"
