"""What the trainer-integration tests share: the ledger world, served on loopback, and its reference
actions (the smallest complete statekit environment: episodes in milliseconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import statekit
from statekit.harness import HarnessConfig, create_app
from statekit.servers import ThreadedServer

LEDGER = "statekit.testing.ledger:LedgerAdapter"


@pytest.fixture(scope="module")
def served_ledger() -> Iterator[str]:
    """``statekit serve`` of the ledger world, in this process: its URL."""
    with ThreadedServer(create_app(HarnessConfig.of(LEDGER, workers=0))) as server:
        yield server.url


def reference(seed: int) -> list[dict[str, Any]]:
    """The ledger task's solving actions for ``seed``."""
    with statekit.make(LEDGER) as env:
        env.reset(seed=seed)
        return env.adapter.reference_actions(env.task)
