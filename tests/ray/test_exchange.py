"""The golden exchange's build leases: one builder per key, and a dead builder's lease lapses."""

from __future__ import annotations

from statekit.ray.exchange import GoldenExchange


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_node_builds_the_others_wait_and_a_silent_builder_loses_its_lease() -> None:
    clock = Clock()
    exchange = GoldenExchange(lease_timeout=10, clock=clock)
    assert exchange.claim("k", "node-a") == ("build", None)
    assert exchange.claim("k", "node-b") == ("wait", None)
    clock.now += 8
    assert exchange.renew("k", "node-a"), "the builder is alive: its lease goes on"
    clock.now += 8
    assert exchange.claim("k", "node-b") == ("wait", None)
    clock.now += 11  # node-a died: no renewal
    assert exchange.claim("k", "node-b") == ("build", None)
    assert not exchange.renew("k", "node-a"), "the old holder learns it lost the lease"


def test_a_key_nobody_can_export_is_built_by_every_node() -> None:
    exchange = GoldenExchange(clock=Clock())
    assert exchange.claim("k", "node-a") == ("build", None)
    exchange.abandon("k")
    assert exchange.claim("k", "node-b") == ("build", None)
    assert exchange.stats()["keys"] == 0
