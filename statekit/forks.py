"""Forks of an episode: what ``Environment.snapshot`` keeps and ``restore`` continues from
(``Forking`` holds those two verbs of the environment).

A fork is a bookmark on its world where the strategy can (``mark``: a journal position, O(1)) plus
the episode's controls, task and step count; where it cannot, a captured copy of the world. Bookmarks
survive resets: a strategy that keeps worlds parks and pins the world while a bookmark needs it; one
that destroys worlds at the end of an episode has the bookmarks on it turned into copies first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from statekit.contract import JSON, Task
from statekit.determinism.controls import Controls, ControlsState
from statekit.digest.compute import Digest
from statekit.entropy import true_token
from statekit.errors import ResetError, RewindError, StatekitError
from statekit.live import Live
from statekit.strategies.base import ResetStrategy
from statekit.strategies.naming import snapshot_key
from statekit.world import World

log = logging.getLogger(__name__)


@dataclass
class Fork:
    """One ``snapshot()``: where the episode was, and how to get its world back."""

    key: str
    """The golden the episode started from."""
    step_count: int
    controls: ControlsState
    task: Task
    seed: int
    options: dict[str, JSON]
    done: bool
    digest: Digest | None
    world_id: str = ""
    mark: Any = None
    """A bookmark on world ``world_id`` (cheap), or None: ``copy`` names a captured copy instead."""
    copy: str = ""
    actions: tuple[JSON, ...] = ()
    """The episode's path up to the fork (what an exported episode restored from it replays)."""


class Forks:
    """The forks of one environment, by id, over its strategy."""

    def __init__(self, strategy: ResetStrategy) -> None:
        self.strategy = strategy
        self._forks: dict[str, Fork] = {}

    def add(self, fork_id: str, fork: Fork, world: World) -> None:
        """Keep ``fork`` of ``world``: bookmark it, or (where the strategy cannot) capture a copy."""
        try:
            fork.mark = self.strategy.mark(world)
        except RewindError as exc:
            log.debug("no bookmark (%s): capturing a copy", exc.reason)
            fork.copy = snapshot_key(fork_id)
            self.strategy.capture(fork.copy, world)
        self._forks[fork_id] = fork

    def get(self, fork_id: str) -> Fork:
        fork = self._forks.get(fork_id)
        if fork is None:
            raise StatekitError(f"unknown snapshot {fork_id!r}; known: {sorted(self._forks)}")
        return fork

    def copy_bookmarks(self, world: World) -> None:
        """Turn the bookmarks on ``world`` into captured copies (latest first), before it goes."""
        marked = [(fid, f) for fid, f in self._forks.items() if f.mark is not None and f.world_id == world.id]
        for fork_id, fork in reversed(marked):
            try:
                self.strategy.rewind(world, fork.mark)
                fork.copy = snapshot_key(fork_id)
                self.strategy.capture(fork.copy, world)
            except Exception as exc:  # one lost bookmark must not take the others with it
                log.warning("snapshot %s is lost with its world: %s", fork_id, reason(exc))
                fork.copy = ""
            finally:
                self.strategy.forget(fork.mark)
                fork.mark = None
        for fork_id, fork in marked:
            if not fork.copy:
                del self._forks[fork_id]

    def close(self) -> None:
        """Release every fork's bookmark or copy. Forks are gone first, so nothing copies them again."""
        forks = list(self._forks.values())
        self._forks.clear()
        for fork in forks:
            if fork.mark is not None:
                self.strategy.forget(fork.mark)
            else:
                self.strategy.drop(fork.copy)


class Forking:
    """``snapshot`` and ``restore``, the environment's verbs over its forks (``Environment`` has them)."""

    strategy: ResetStrategy
    _forks: Forks
    _live: Live | None

    if TYPE_CHECKING:  # what it uses of the environment

        def _require_open(self) -> None: ...
        def _require_live(self) -> Live: ...
        def _require_server(self, what: str) -> None: ...
        def _controls_for(self, seed: int) -> Controls: ...
        def _end_episode(self) -> None: ...
        def _release(self, world: World, *, failed: bool = False) -> None: ...
        def digest_report(self) -> Digest: ...
        def _begin(
            self,
            key: str,
            seed: int,
            options: dict[str, JSON],
            *,
            task: Task | None,
            controls: Controls,
            world: World | None = None,
            at: Digest | None = None,
        ) -> tuple[JSON, dict[str, JSON]]: ...

    def snapshot(self) -> str:
        """Fork point: a bookmark of the world (or, where the strategy cannot bookmark, a copy of it)
        plus the episode's controls; returns an id for ``restore``."""
        live = self._require_live()
        live.episode.quiesce()  # its connections released, so the world can be cloned or marked
        fork = Fork(
            live.key,
            live.step_count,
            live.controls.save(),
            live.episode.task,
            live.seed,
            live.options,
            live.done,
            digest=self.digest_report(),
            world_id=live.world.id,
            actions=tuple(live.actions),
        )
        fork_id = true_token(10)
        self._forks.add(fork_id, fork, live.world)
        return fork_id

    def restore(self, snapshot_id: str) -> tuple[JSON, dict]:
        """Continue from a snapshot; the snapshot stays usable for more forks."""
        self._require_open()
        self._require_server("snapshot")
        fork = self._forks.get(snapshot_id)
        controls = self._controls_for(fork.seed)
        controls.load(fork.controls)
        if fork.mark is None:  # a captured copy: the episode ends once the copy's episode started
            obs, info = self._begin(fork.copy, fork.seed, fork.options, task=fork.task, controls=controls)
        else:
            world = self._bookmarked_world(fork)
            try:
                self.strategy.rewind(world, fork.mark)
            except Exception as exc:  # a RewindError, or the strategy broke: the world cannot be trusted
                self._release(world, failed=True)
                raise ResetError(
                    f"snapshot {snapshot_id} is lost: its world cannot be rewound ({reason(exc)})"
                ) from exc
            obs, info = self._begin(
                fork.key,
                fork.seed,
                fork.options,
                task=fork.task,
                controls=controls,
                world=world,
                at=fork.digest,
            )
        assert self._live is not None
        self._live.step_count, self._live.done = fork.step_count, fork.done
        self._live.actions = list(fork.actions)
        return obs, info

    def _bookmarked_world(self, fork: Fork) -> World:
        """The world a bookmark lives on: the current one (its episode ends, the world stays), or one
        a strategy that keeps worlds parked since."""
        live = self._live
        if live is not None and live.world.id == fork.world_id:
            self._live = None
            live.episode.close()
            return live.world
        parked = self.strategy.take(fork.world_id)
        if parked is None:
            raise ResetError(
                f"snapshot of world {fork.world_id} is lost: that world was discarded (its strategy, "
                f"{self.strategy.name}, keeps bookmarked worlds only while the episode lasts)"
            )
        self._end_episode()
        return parked


def reason(exc: Exception) -> str:
    """A failure's reason: a RewindError's own, or the exception's text."""
    return exc.reason if isinstance(exc, RewindError) else f"{type(exc).__name__}: {exc}"
