"""Sessions never share state: four seeds played at once give exactly what each gives alone."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from statekit.client import RemoteEnvironment

from .conftest import ClaimsReference
from .helpers import Trace, play

SEEDS = (7, 8, 9, 10)


def test_four_parallel_sessions_match_their_solo_runs(
    claims_server: str, claims_reference: ClaimsReference
) -> None:
    scripts = {seed: claims_reference.script(seed) for seed in SEEDS}
    alone = {}
    for seed in SEEDS:
        with RemoteEnvironment(claims_server) as remote:
            alone[seed] = play(remote, seed, scripts[seed])
    assert len({trace.initial_digest for trace in alone.values()}) == len(SEEDS), "the seeds differ"

    start = threading.Barrier(len(SEEDS))

    def together(seed: int) -> Trace:
        with RemoteEnvironment(claims_server) as remote:
            start.wait(timeout=60)  # all four sessions are mid-episode at the same time
            return play(remote, seed, scripts[seed])

    with ThreadPoolExecutor(len(SEEDS)) as pool:
        parallel = dict(zip(SEEDS, pool.map(together, SEEDS), strict=True))
    for seed in SEEDS:
        assert parallel[seed] == alone[seed], f"seed {seed} differs when played alongside others"
        assert parallel[seed] == claims_reference.trace(seed), f"seed {seed} differs from in-process"
