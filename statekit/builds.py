"""How a seed's golden is built: once per key across processes (a build lock), under the seed's
controls, and on top of the adapter's schema stage when it has one.

An adapter with ``SchemaStage`` splits its build: ``build_schema`` (what every seed shares:
migrations, ``create_all``) runs once per fingerprint into a golden of its own, under
``schema_key``; each seed's build restores a copy of that golden, runs ``build_world`` on it (the
seed's data) and captures the copy as the seed's golden. A Django project's migrations, 70 % of its
build, then run once instead of once per seed.
"""

from __future__ import annotations

import fcntl
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from statekit.adapter import Adapter
from statekit.capabilities import SchemaStage, capability, has
from statekit.determinism.clock import BASE_EPOCH, epoch_for
from statekit.determinism.controls import Controls
from statekit.determinism.egress import EgressScope
from statekit.errors import ResetError
from statekit.settings import statekit_home
from statekit.strategies.base import ResetStrategy, World

SCHEMA_SEED = 0
SCHEMA_START = BASE_EPOCH - timedelta(days=1)
"""The schema stage runs under controls of its own (purpose ``schema``: id and random streams no seed's
build shares) with its clock a day before every seed's epoch, so what it stamps is history to all."""

BUILD_LOCK_STRIPES = 256
"""Build locks are striped by key: two keys share a lock file (and wait on each other) 1 time in 256,
and the lock directory holds at most this many files however many worlds are built."""


@contextmanager
def build_lock(key: str) -> Iterator[None]:
    """Hold ``key``'s build lock (an ``flock`` under ``$STATEKIT_HOME/cache/builds``) for the block.

    Sessions and worker processes of one home share goldens, so two of them may miss the same key at
    once. Built concurrently, a world of several parts (a database plus directories) is published
    part by part by both: one builder can see the other's half-published golden, take it for a crash's
    remnant and drop it, and the database part of a build whose directory part lost the race was
    published empty. One builder at a time per key, and a re-check under the lock, rule that out.
    """
    folder = statekit_home() / "cache" / "builds"
    folder.mkdir(parents=True, exist_ok=True)
    stripe = int(hashlib.sha256(key.encode()).hexdigest(), 16) % BUILD_LOCK_STRIPES
    with open(folder / f"{stripe:03d}.lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or its holder dies
        yield


Fill = Callable[[World], None]


def _under_controls(controls: Controls, fill: Fill) -> Fill:
    """``fill`` on a world under ``controls`` (a build that reaches out fails)."""

    def build(world: World) -> None:
        controls.bind(world)
        with controls.active():
            fill(world)

    return build


def build_golden(
    adapter: Adapter,
    strategy: ResetStrategy,
    seed: int,
    key: str,
    *,
    schema_key: str,
    egress: EgressScope | None,
) -> bool:
    """Build ``seed``'s golden under ``key`` unless it exists (checked again under the key's lock).
    The schema stage's golden first, under its own lock (never while holding the seed's: two keys may
    share a lock stripe). True when the adapter builds on the schema stage (``schema_key``'s golden)."""
    staged = has(adapter, SchemaStage) and not adapter.out_of_process
    if staged and not strategy.has(key):
        with build_lock(schema_key):
            if not strategy.has(schema_key):
                schema = capability(adapter, SchemaStage).build_schema
                start = SCHEMA_START - epoch_for(SCHEMA_SEED)
                stage = Controls(SCHEMA_SEED, purpose="schema", start_offset=start, egress=egress)
                strategy.capture(schema_key, _under_controls(stage, schema))
    controls = Controls(seed, purpose="build", egress=egress)
    data = _under_controls(controls, lambda world: adapter.build_world(world, seed))
    with build_lock(key):
        if strategy.has(key):  # another process or session built it while this one waited
            return staged
        if not staged:
            strategy.capture(key, data)
            return False
        world = strategy.restore(schema_key)
        try:
            data(world)
            strategy.capture(key, world)
        except Exception as exc:  # as a one-stage build's failure is (the strategies' capture)
            raise ResetError(f"building golden {key!r} on the schema stage failed: {exc}") from exc
        finally:
            strategy.discard(world)
    return True
