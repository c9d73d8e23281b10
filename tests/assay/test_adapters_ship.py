"""Every environment statekit ships must pass its own assay (CI runs this).

Add an adapter here when it lands: ``(name, strategy)``; ``None`` is the adapter's default strategy.
"""

from __future__ import annotations

import pytest

from tests.assay.helpers import cli_assay

SHIPPED = [
    pytest.param("claims_app", None, id="claims_app"),
    pytest.param("claims_app", "container", id="claims_app-container", marks=pytest.mark.docker),
    pytest.param("code_env", None, id="code_env"),
    pytest.param("code_env", "container", id="code_env-container", marks=pytest.mark.docker),
]


@pytest.mark.parametrize(("adapter", "strategy"), SHIPPED)
def test_assay_says_it_may_ship(adapter: str, strategy: str | None) -> None:
    code, report = cli_assay(adapter, strategy)
    assert report["findings"] == [], report["findings"]
    assert (code, report["verdict"]) == (0, "yes")
    assert report["fixtures"], "the adapter declares where its seeded data comes from"
    assert all(h["verdict"] == "yes" for h in report["hosts"])
