"""Timing helpers shared by the benchmarks (run as ``python benchmarks/NAME.py``, so this folder is
on ``sys.path``)."""

from __future__ import annotations

import time
from collections.abc import Callable

from statekit.strategies.base import ResetStrategy


def timed(call: Callable[[], object]) -> float:
    """Seconds one call takes."""
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def repeat(n: int, call: Callable[[], object]) -> list[float]:
    return [timed(call) for _ in range(n)]


def restore_latencies(strategy: ResetStrategy, key: str, n: int, *, warmup: int = 0) -> list[float]:
    """Time ``restore`` only; each copy is discarded untimed before the next."""
    for _ in range(warmup):
        strategy.discard(strategy.restore(key))
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        world = strategy.restore(key)
        samples.append(time.perf_counter() - t0)
        strategy.discard(world)
    return samples


def percentile_ms(samples: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``samples``, in milliseconds."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000
