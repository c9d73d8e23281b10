"""The reset-strategy contract suite, public so a new strategy can prove itself the same way.

Each check takes a strategy and a *probe*: three functions that know the strategy's resource
(build a world, change it, read it back). Run every check in ``STRATEGY_CHECKS`` against a fresh
strategy; each raises AssertionError with a message on failure. ``REWIND_CHECKS`` prove the optional
rewind interface for strategies that offer it (one that cannot rewind must say so with RewindError).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from statekit.entropy import true_token
from statekit.errors import ResetError, RewindError
from statekit.strategies.base import ResetStrategy, World


@dataclass(frozen=True)
class Probe:
    """How the contract suite touches a strategy's resource."""

    build: Callable[[World], None]
    mutate: Callable[[World], None]
    read: Callable[[World], object]


def _key() -> str:
    return "k" + true_token(8)


def check_restore_unknown_key_fails(strategy: ResetStrategy, probe: Probe) -> None:
    try:
        world = strategy.restore(_key())
    except ResetError:
        return
    strategy.discard(world)
    raise AssertionError("restoring a key that was never captured must raise ResetError")


def check_copies_are_isolated(strategy: ResetStrategy, probe: Probe) -> None:
    key = _key()
    strategy.capture(key, probe.build)
    assert strategy.has(key), "has(key) must be true after capture"
    a, b = strategy.restore(key), strategy.restore(key)
    try:
        original = probe.read(a)
        assert probe.read(b) == original, "two fresh copies must be equal"
        probe.mutate(a)
        assert probe.read(a) != original, "the probe's mutation must change the world"
        assert probe.read(b) == original, "changing one copy must not change another"
        c = strategy.restore(key)
        try:
            assert probe.read(c) == original, "changing a copy must not change the golden"
        finally:
            strategy.discard(c)
    finally:
        strategy.discard(a)
        strategy.discard(b)
        strategy.drop(key)


def check_failed_build_leaves_nothing(strategy: ResetStrategy, probe: Probe) -> None:
    key = _key()

    def broken(world: World) -> None:
        probe.build(world)
        raise RuntimeError("builder failed half-way")

    try:
        strategy.capture(key, broken)
    except (ResetError, RuntimeError):
        pass
    else:
        raise AssertionError("a failing builder must make capture raise")
    assert not strategy.has(key), "a failed build must leave no golden behind"


def check_capture_from_live_world(strategy: ResetStrategy, probe: Probe) -> None:
    key, fork = _key(), _key()
    strategy.capture(key, probe.build)
    live = strategy.restore(key)
    try:
        probe.mutate(live)
        changed = probe.read(live)
        strategy.capture(fork, live)
        copy = strategy.restore(fork)
        try:
            assert probe.read(copy) == changed, "a capture of a live world must copy its current state"
        finally:
            strategy.discard(copy)
    finally:
        strategy.discard(live)
        strategy.drop(fork)
        strategy.drop(key)


def check_discard_is_idempotent(strategy: ResetStrategy, probe: Probe) -> None:
    key = _key()
    strategy.capture(key, probe.build)
    world = strategy.restore(key)
    strategy.discard(world)
    strategy.discard(world)
    strategy.drop(key)
    assert not strategy.has(key), "drop(key) must forget the golden"


STRATEGY_CHECKS: list[Callable[[ResetStrategy, Probe], None]] = [
    check_restore_unknown_key_fails,
    check_copies_are_isolated,
    check_failed_build_leaves_nothing,
    check_capture_from_live_world,
    check_discard_is_idempotent,
]


def check_rewind_restores_the_golden(strategy: ResetStrategy, probe: Probe) -> None:
    key = _key()
    strategy.capture(key, probe.build)
    world = strategy.restore(key)
    try:
        original = probe.read(world)
        probe.mutate(world)
        assert probe.read(world) != original, "the probe's mutation must change the world"
        try:
            strategy.rewind(world)
        except RewindError as exc:
            assert exc.reason, "a strategy that cannot rewind must say why"
            return
        assert probe.read(world) == original, "rewind must put the world back to its golden, in place"
        probe.mutate(world)
        strategy.rewind(world)
        assert probe.read(world) == original, "a world must rewind again and again"
    finally:
        strategy.discard(world)
        strategy.drop(key)


def check_rewind_to_a_bookmark(strategy: ResetStrategy, probe: Probe) -> None:
    key = _key()
    strategy.capture(key, probe.build)
    world = strategy.restore(key)
    try:
        original = probe.read(world)
        probe.mutate(world)
        try:
            mark = strategy.mark(world)
        except RewindError as exc:
            assert exc.reason, "a strategy that cannot bookmark must say why"
            return
        marked = probe.read(world)
        strategy.rewind(world)
        assert probe.read(world) == original, "a world with a bookmark must still rewind to its golden"
        strategy.rewind(world, mark)
        assert probe.read(world) == marked, "rewind(to=mark) must restore the bookmarked state"
        strategy.rewind(world)
        probe.mutate(world)
        strategy.rewind(world, mark)
        assert probe.read(world) == marked, "a bookmark stays usable after rewinding past it and back"
        strategy.forget(mark)
        strategy.rewind(world)
        assert probe.read(world) == original
    finally:
        strategy.discard(world)
        strategy.drop(key)


REWIND_CHECKS: list[Callable[[ResetStrategy, Probe], None]] = [
    check_rewind_restores_the_golden,
    check_rewind_to_a_bookmark,
]
