"""Fuzz the HTTP API from its own OpenAPI document: no request, valid or not, gets a 5xx.

Schemathesis generates both conforming and non-conforming requests for every operation; the
stateful run follows the document's links (a reset's ``session_id`` into step, state, snapshot,
close; a snapshot's id into restore), so it reaches live sessions, not just unknown ids. Bounded for
CI, and run on the in-memory ledger adapter so hundreds of sessions cost nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from statekit.harness import HarnessConfig, create_app
from statekit.servers import ThreadedServer

from .helpers import LEDGER

FUZZ = HarnessConfig(LEDGER, max_sessions=100_000, idle_timeout=0)
SCHEMA = schemathesis.openapi.from_dict(create_app(FUZZ).openapi())
BOUNDED = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@pytest.fixture(scope="module")
def fuzz_url() -> Iterator[str]:
    with ThreadedServer(create_app(FUZZ)) as server:
        yield server.url


def _check(response: Any, case: Any) -> None:
    where = f"{case.method} {case.formatted_path} body={str(case.body)[:200]!r} query={case.query!r}"
    assert response.status_code < 500, f"{where} -> {response.status_code}: {response.text[:500]}"
    if response.status_code >= 400:
        error = response.json()["error"]
        assert set(error) == {"code", "message"} and error["message"], where


@SCHEMA.parametrize()
@BOUNDED
def test_no_request_gets_a_server_error(case: Any, fuzz_url: str) -> None:
    _check(case.call(base_url=fuzz_url), case)


def test_no_sequence_of_requests_gets_a_server_error(fuzz_url: str) -> None:
    class Sequences(SCHEMA.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": fuzz_url}

        def validate_response(self, response: Any, case: Any, *args: Any, **kwargs: Any) -> None:
            _check(response, case)

    Sequences.run(settings=settings(BOUNDED, stateful_step_count=10))
