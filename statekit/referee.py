"""The reward of an episode: its verifier's score, held against the changes it made.

A task may declare the changes it expects (``Episode.expected_changes``, ``statekit.collateral``);
any other change the episode made zeroes the reward, or costs the declared penalty. The changes come
from the world's journal in O(changes) where the adapter can read it (``StateDumps.dump_changes``),
else from the golden's dump, computed once per world key, diffed with the world's.
"""

from __future__ import annotations

from collections.abc import Callable

from statekit.adapter import Adapter, Episode
from statekit.capabilities import StateDumps, capability
from statekit.collateral import ChangeSet, GoldenDumps, Verdict
from statekit.determinism.controls import Controls
from statekit.digest.compute import Digest
from statekit.digest.dump import StateDump
from statekit.world import World


class Referee:
    """Scores the episodes of one environment and remembers the last verdict."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self.last_verdict: Verdict | None = None
        """The collateral verdict of the last scored episode (None when its task declares no expectation,
        or its verifier scored 0)."""
        self._golden_dumps = GoldenDumps()

    def changes(
        self, world: World, *, golden: Digest, now: Digest, key: str, golden_dump: Callable[[], StateDump]
    ) -> ChangeSet:
        """Every digested row ``world`` (whose digest is ``now``) changed since its golden (digest
        ``golden``, world key ``key``; ``golden_dump`` reads it from a fresh copy when needed)."""
        dumps = capability(self.adapter, StateDumps, why="the changes an episode made")
        parts = dumps.dump_changes(world, golden, now)
        if parts is not None:  # from the world's journal: O(changes)
            return ChangeSet.between(*parts)
        return ChangeSet.between(self._golden_dumps.get(key, golden_dump), dumps.dump(world))

    def score(self, episode: Episode, controls: Controls, changes: Callable[[], ChangeSet]) -> float:
        """The verifier's score, held against the episode's stray changes when its task declares the
        changes it expects. A score of 0 cannot fall further: its expectation and changes are not read."""
        with controls.active():
            score = float(episode.score())
            expectation = episode.expected_changes() if score > 0 else None
        self.last_verdict = None if expectation is None else expectation.judge(score, changes())
        return score if self.last_verdict is None else self.last_verdict.reward
