"""The environment: Gymnasium's contract over an adapter, a reset strategy and determinism controls."""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from statekit.adapter import Adapter, Episode, Outcome
from statekit.cache import Memo, WorldCache
from statekit.cache import world_key as world_key  # re-exported: benchmarks and tools import it from here
from statekit.collateral import ChangeSet, GoldenDumps, Verdict
from statekit.contract import JSON, State, StepResult, Task
from statekit.determinism.controls import CORE_CONTROLS, Controls, ControlsState
from statekit.determinism.egress import EgressScope
from statekit.determinism.ids import HeldGenerators, true_token
from statekit.digest.canonical import canonical_json
from statekit.digest.compute import Digest
from statekit.digest.dump import StateDump
from statekit.errors import (
    ActionError,
    ConfigError,
    EnvironmentClosed,
    ResetError,
    ResetNeeded,
    RewindError,
    ServerDown,
    StatekitError,
    WorldLost,
)
from statekit.seeds import WorldSet
from statekit.strategies.base import Health, ResetStrategy, World
from statekit.strategies.naming import snapshot_key
from statekit.strategies.rewinding import Rewinding
from statekit.tools import check_reset_options, parse_action

log = logging.getLogger(__name__)
EPISODE_START = timedelta(hours=1)
"""Episodes begin an hour after their world was built, so 'built' and 'acted on' never coincide."""
WARM_APPS = 4
"""Applications kept attached to worlds this environment may see again (least recent detached)."""
START_CACHE = 4096


@dataclass
class _Snapshot:
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


@dataclass(frozen=True)
class _Start:
    """What a first start on a key taught: the task it posed and the controls' state after it."""

    task: Task
    controls: ControlsState


class Environment:
    """``reset``/``step``/``state``/``snapshot``/``restore``/``close`` over one application.

    Construct it with ``statekit.make``; it owns its strategy (and closes it).
    """

    def __init__(
        self,
        adapter: Adapter,
        strategy: ResetStrategy,
        *,
        max_steps: int | None = None,
        disable_controls: tuple[str, ...] = (),
        cache: WorldCache | None = None,
        worlds: WorldSet | None = None,
    ) -> None:
        known = (*CORE_CONTROLS, *(control.name for control in adapter.controls))
        unknown = sorted(set(disable_controls) - set(known))
        if unknown:
            raise ConfigError(f"unknown determinism control(s) {unknown}; this environment has {list(known)}")
        self.adapter = adapter
        self.strategy = strategy
        self.max_steps_override = max_steps
        self.disabled_controls = frozenset(disable_controls)
        self.control_names: tuple[str, ...] = known
        """Every determinism control of this environment, statekit's then the adapter's."""
        adapter.disabled_controls = self.disabled_controls
        guarded = "egress" not in self.disabled_controls
        self._egress = EgressScope(adapter.allowed_endpoints(), enabled=guarded)
        self._held = HeldGenerators()  # the applications' own random generators, re-seeded per episode
        self.cache = cache or WorldCache(adapter, strategy)
        """The snapshot cache: builds, leases and evicts goldens (``statekit.cache``)."""
        self.worlds = worlds or WorldSet()
        """The seeds a seedless reset draws from (``statekit.seeds``)."""
        self.cache.egress = self._egress  # a world's build may reach out only where the adapter says
        self._episode: Episode | None = None
        self._world: World | None = None
        self._key = ""
        self._controls: Controls | None = None
        self._episode_id = ""
        self._seed = 0
        self._options: dict[str, JSON] = {}
        self._step_count = 0
        self._done = False
        self._snapshots: dict[str, _Snapshot] = {}
        self._goldens: dict[str, Digest] = Memo()  # bounded: seedless runs draw endless seeds
        """Digest of each golden, computed on its first copy. Episodes must not write while starting
        (``check_reset_restores`` compares it with a fresh digest), so it is also each episode's first."""
        self._digest: Digest | None = None
        """The latest digest of the current world: what the next one is updated from."""
        self._apps: OrderedDict[str, Any] = OrderedDict()
        self._starts: OrderedDict[str, _Start] = OrderedDict()
        self._closed = False
        # The guard switches on with the first episode (reset) and off at close(), or when the
        # environment is garbage collected unclosed: an environment that never played (a server's
        # sweeping one) or was dropped must not keep blocking the rest of the process.
        weakref.finalize(self, self._egress.close)
        self._golden_dumps = GoldenDumps()
        self.last_verdict: Verdict | None = None
        """The collateral verdict of the last scored episode (None when its task declares no expectation,
        or its verifier scored 0)."""

    # -- the contract -------------------------------------------------------------------------
    @property
    def tools(self) -> list[dict[str, JSON]]:
        """The actions on offer, as ``[{"name", "description", "input_schema"}]``."""
        if self._episode is None:
            raise ResetNeeded("tools are known once an episode exists: call reset(seed=...) first")
        return [tool.as_dict() for tool in self._episode.tools]

    @property
    def world(self) -> World:
        """The current episode's world, for inspection (the strategy owns it; do not discard it)."""
        self._require_episode()
        assert self._world is not None
        return self._world

    @property
    def task(self) -> Task:
        if self._episode is None:
            raise ResetNeeded("no episode yet: call reset(seed=...) first")
        return self._episode.task

    def reset(self, *, seed: int | None = None, options: dict[str, JSON] | None = None) -> tuple[JSON, dict]:
        """Start an episode in a fresh copy of the seed's world; build that world on first use.

        The current episode ends only once the new one has started, so a refused reset (bad seed or
        options, a failed build) leaves it exactly as it was. One exception: a ``Rewinding`` strategy
        resetting to the live world's own seed rewinds that world, so the episode ends first; then only
        what ``adapter.check_options`` refuses (asked before anything else) leaves it untouched.
        """
        self._require_open()
        if seed is None:
            seed = self.worlds.draw()
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self._require_server("world")  # nothing could be restored: say so before touching anything
        options = dict(options or {})
        self._egress.open()  # from the first episode until close(), nothing here reaches out unannounced
        check_reset_options(options, self.adapter.reset_options(), self.adapter.name)
        self.adapter.check_options(options)
        key = self.cache.ensure(seed)
        if self._world is not None and key == self._key and isinstance(self.strategy, Rewinding):
            self._end_episode()  # its world is rewound in place for the new episode: options checked above
        controls = Controls(
            seed,
            start_offset=EPISODE_START,
            disabled=self.disabled_controls,
            egress=self._egress,
            held=self._held,
        )
        try:
            return self._begin(key, seed, options, task=None, controls=controls)
        except StatekitError:
            raise
        except Exception as exc:  # the application's own connection failing may be the server dying
            self._require_server("world", fresh=True, cause=exc)
            raise

    def step(self, action: Any) -> tuple[JSON, float, bool, bool, dict]:
        """Apply one action. Bad actions become error observations with reward 0."""
        episode = self._require_episode()
        if self._done:
            raise ResetNeeded(
                "this episode has ended (terminated or truncated): call reset() to start another"
            )
        assert self._controls is not None
        self._step_count += 1
        noted: dict[str, JSON] = {}
        try:
            tool, arguments = parse_action(action, episode.tools)
        except ActionError as exc:
            outcome = Outcome({"error": {"code": exc.code, "message": str(exc)}})
        else:
            try:
                with self._controls.active():
                    outcome = episode.call(tool.name, arguments)
            except Exception as exc:  # the application broke, not the agent: end the episode, say why
                self._raise_if_lost(fresh=True)  # or its database died under it: not the application's doing
                log.exception("step %d of episode %s failed", self._step_count, self._episode_id)
                message = f"the environment failed while applying {tool.name!r}: {type(exc).__name__}: {exc}"
                return self._fail({"error": {"code": "environment_error", "message": message}})
            observation, noted = self._controls.report(outcome.observation)  # egress, replay misses, ...
            outcome = dataclasses.replace(outcome, observation=observation)
            tick = (
                outcome.advance
                if outcome.advance is not None
                else timedelta(seconds=self.adapter.tick_seconds)
            )
            self._controls.clock.advance(tick)
        terminated = outcome.done
        try:
            reward = self._score() if terminated else 0.0
        except Exception as exc:
            log.exception("the verifier of episode %s failed", self._episode_id)
            return self._fail(
                {"error": {"code": "verifier_error", "message": f"{type(exc).__name__}: {exc}"}}
            )
        truncated = not terminated and self._step_count >= self._max_steps(episode)
        self._done = terminated or truncated
        info = {
            "episode_id": self._episode_id,
            "step": self._step_count,
            "clock": self._controls.clock.isoformat(),
            **noted,
        }
        if terminated and self.last_verdict is not None:
            info["verdict"] = self.last_verdict.as_dict()
        return StepResult(outcome.observation, reward, terminated, truncated, info).as_tuple()

    def state(self) -> State:
        """Episode id, step count, seed, virtual clock and the world's digest."""
        self._require_episode()
        assert self._controls is not None and self._world is not None
        return State(
            episode_id=self._episode_id,
            step_count=self._step_count,
            seed=self._seed,
            clock=self._controls.clock.isoformat(),
            digest=self.digest_now(),
        )

    def health(self) -> Health:
        """Whether this environment can serve episodes now: ``down`` says why not (its database server
        is down and being restarted, or unreachable). Costs nothing: the strategy watches in the
        background."""
        return self.strategy.health()

    def digest_now(self) -> str:
        """The digest of the current world (updated from the previous one where the adapter can)."""
        return self.digest_report().digest

    def digest_report(self, *, full: bool = False) -> Digest:
        """The digest of the current world: per-table hashes and row counts. ``full`` recomputes it
        from every row instead of updating the last one (the two must always agree)."""
        world = self.world
        digest = self.adapter.digest(world, since=None if full else self._digest)
        self._digest = digest
        return digest

    def dump(self) -> StateDump:
        """The canonical rows of the current world (what its digest is computed from)."""
        return self.adapter.dump(self.world)

    def changes(self) -> ChangeSet:
        """Every row the current episode's world changed since its seed's golden (the digest's rows).

        The one door for collateral-damage checks (``statekit.collateral``): the adapter's
        ``dump_changes`` reads them from the world's journal; failing that, the golden's dump is
        computed once per world key (from a fresh copy) and diffed with the world's dump now.
        """
        self._require_episode()
        parts = self.adapter.dump_changes(self.world, self._goldens[self._key], self.digest_report())
        if parts is not None:  # from the world's journal: O(changes)
            return ChangeSet.between(*parts)
        seed = self._seed
        golden = self._golden_dumps.get(self.cache.key(seed), lambda: self._golden_dump(seed))
        return ChangeSet.between(golden, self.dump())

    def _golden_dump(self, seed: int) -> StateDump:
        cache = self.cache.last  # reports the last reset, not this look at the golden
        try:
            with self.open_world(seed) as world:
                return self.adapter.dump(world)
        finally:
            self.cache.last = cache

    @contextmanager
    def open_world(self, seed: int) -> Iterator[World]:
        """A fresh copy of the seed's initial world with no episode on it (schema and drift checks)."""
        self._require_open()
        world = self.strategy.restore(self.cache.ensure(seed))
        try:
            yield world
        finally:
            self.strategy.discard(world)

    def coverage_problems(self) -> list[str]:
        """Columns of the current world that the digest spec fails to cover (empty when all is well)."""
        return self.adapter.check_schema(self.world)

    def snapshot(self) -> str:
        """Fork point: a bookmark of the world (or, where the strategy cannot bookmark, a copy of it)
        plus the episode's controls; returns an id for ``restore``."""
        episode = self._require_episode()
        assert self._controls is not None and self._world is not None
        snap_id = true_token(10)
        world = self._quiet_world()
        snap = _Snapshot(
            self._key,
            self._step_count,
            self._controls.save(),
            episode.task,
            self._seed,
            self._options,
            self._done,
            digest=self.digest_report(),
            world_id=world.id,
        )
        try:
            snap.mark = self.strategy.mark(world)
        except RewindError as exc:
            log.debug("no bookmark (%s): capturing a copy", exc.reason)
            snap.copy = snapshot_key(snap_id)
            self.strategy.capture(snap.copy, world)
        self._snapshots[snap_id] = snap
        return snap_id

    def restore(self, snapshot_id: str) -> tuple[JSON, dict]:
        """Continue from a snapshot; the snapshot stays usable for more forks."""
        self._require_open()
        self._require_server("snapshot")
        snap = self._snapshots.get(snapshot_id)
        if snap is None:
            raise StatekitError(f"unknown snapshot {snapshot_id!r}; known: {sorted(self._snapshots)}")
        controls = Controls(snap.seed, disabled=self.disabled_controls, egress=self._egress, held=self._held)
        controls.load(snap.controls)
        if snap.mark is None:  # a captured copy: the episode ends once the copy's episode started
            obs, info = self._begin(snap.copy, snap.seed, snap.options, task=snap.task, controls=controls)
        else:
            world = self._bookmarked_world(snap)
            try:
                self.strategy.rewind(world, snap.mark)
            except Exception as exc:  # a RewindError, or the strategy broke: the world cannot be trusted
                self._release(world, failed=True)
                raise ResetError(
                    f"snapshot {snapshot_id} is lost: its world cannot be rewound ({_why(exc)})"
                ) from exc
            obs, info = self._begin(
                snap.key,
                snap.seed,
                snap.options,
                task=snap.task,
                controls=controls,
                world=world,
                at=snap.digest,
            )
        self._step_count, self._done = snap.step_count, snap.done
        return obs, info

    def close(self) -> None:
        """End the episode, drop snapshots, release the strategy and adapter. Safe twice."""
        if self._closed:
            return
        self._closed = True
        try:
            snapshots = list(self._snapshots.values())
            self._snapshots.clear()  # first: ending the episode must not copy bookmarks about to go
            for snap in snapshots:
                if snap.mark is not None:
                    self.strategy.forget(snap.mark)
                else:
                    self.strategy.drop(snap.copy)
            self._end_episode()
        finally:
            self._snapshots.clear()
            try:
                while self._apps:
                    _, app = self._apps.popitem()
                    self.adapter.detach(app)
            finally:
                try:
                    self.cache.close()  # its leases: the goldens this environment used may go now
                finally:
                    try:
                        self.strategy.close()
                    finally:
                        self._egress.close()
                        self.adapter.close()

    def end_episode(self) -> None:
        """End the current episode now and hand its world back to the strategy (``reset`` does this
        itself; checks use it to control which copy the next reset gets)."""
        self._end_episode()

    def prefetch(self, seeds: list[int]) -> None:
        """Tell the strategy which seeds come next so a pool can pre-clone them."""
        self._require_open()
        self.strategy.prefetch(self.cache.prefetch(seeds))

    def __enter__(self) -> Environment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def last_reset_cache(self) -> str:
        """ "hit" if the last reset's world came from the cache, "miss" if it was built."""
        return self.cache.last

    # -- internals ----------------------------------------------------------------------------
    def _app(self, world: World, seed: int) -> Any:
        """The application attached to ``world``: kept warm while the world may come back. Attached
        under the seed's controls, so what it makes then (its generators, ids, timestamps) is seeded."""
        if world.id in self._apps:
            self._apps.move_to_end(world.id)
            return self._apps[world.id]
        controls = Controls(
            seed, purpose="attach", disabled=self.disabled_controls, egress=self._egress, held=self._held
        )
        controls.bind(world)
        with controls.active():
            app = self.adapter.attach(world)
        self._apps[world.id] = app
        while len(self._apps) > WARM_APPS:
            _, old = self._apps.popitem(last=False)
            self.adapter.detach(old)
        return app

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
    ) -> tuple[JSON, dict]:
        """Start an episode on a copy of ``key`` (or on ``world``, rewound to a bookmark whose digest
        is ``at``)."""
        world = world or self.strategy.restore(key)
        served = self.strategy.last_restore
        start_key = f"{key}:{canonical_json(options)}"
        known = self._starts.get(start_key) if task is None and self.adapter.deterministic_start else None
        episode: Episode | None = None
        try:
            app = self._app(world, seed)
            controls.bind(world)
            with controls.active(all_on=True):
                warm = {} if app is None else {"app": app}  # adapters without attach keep the old signature
                episode = self.adapter.start_episode(
                    world, seed=seed, options=options, task=task or (known.task if known else None), **warm
                )
                observation = episode.observe()
            controls.adopt(episode.controls, (control.name for control in self.adapter.controls))
            if known is not None:  # the same start as the first one: the controls end where they did
                controls.load(known.controls)
            elif task is None and self.adapter.deterministic_start:
                self._starts[start_key] = _Start(episode.task, controls.save())
                while len(self._starts) > START_CACHE:
                    self._starts.popitem(last=False)
            if key not in self._goldens:  # a copy equals its golden until the first step: hash it once
                self._goldens[key] = self.adapter.digest(world)
            self._end_episode()  # only now: a reset or restore refused above leaves the episode as it was
        except BaseException:
            if episode is not None:
                episode.close()
            self._release(world, failed=True)
            raise
        self._world, self._episode, self._controls, self._key = world, episode, controls, key
        self._digest = at or self._goldens[key]
        self._episode_id = true_token(16)
        self._seed, self._options = seed, options
        self._step_count, self._done = 0, False
        info = {
            "episode_id": self._episode_id,
            "seed": seed,
            "task_id": episode.task.id,
            "task_kind": episode.task.kind,
            "max_steps": self._max_steps(episode),
            "tools": [tool.as_dict() for tool in episode.tools],
            "digest": self._digest.digest,
            "clock": controls.clock.isoformat(),
            "strategy": self.strategy.name,
            "world": served,
            "metadata": self.adapter.metadata(),
        }
        return observation, info

    def _bookmarked_world(self, snap: _Snapshot) -> World:
        """The world a bookmark lives on: the current one (its episode ends, the world stays), or one
        a Rewinding strategy parked since."""
        if self._world is not None and self._world.id == snap.world_id:
            world = self._world
            episode, self._episode, self._world, self._controls = self._episode, None, None, None
            if episode is not None:
                episode.close()
            return world
        parked = self.strategy.take(snap.world_id) if isinstance(self.strategy, Rewinding) else None
        if parked is None:
            raise ResetError(
                f"snapshot of world {snap.world_id} is lost: that world was discarded (its strategy, "
                f"{self.strategy.name}, keeps bookmarked worlds only while the episode lasts)"
            )
        self._end_episode()
        return parked

    def _fail(self, observation: JSON) -> tuple[JSON, float, bool, bool, dict]:
        """An infrastructure failure inside a step: reward 0, truncated (the world may be half-written,
        so the episode cannot go on), and the reason in the observation and ``info["error"]``."""
        self._done = True
        assert self._controls is not None
        clock = self._controls.clock.isoformat()
        info = {
            "episode_id": self._episode_id,
            "step": self._step_count,
            "clock": clock,
            "error": observation,
        }
        return StepResult(observation, 0.0, False, True, info).as_tuple()

    def _score(self) -> float:
        """The verifier's score, held against the episode's stray changes when its task declares
        the changes it expects (``Episode.expected_changes``)."""
        assert self._episode is not None and self._controls is not None
        with self._controls.active():
            score = float(self._episode.score())
            # a score of 0 cannot fall further: its expectation and changes are not needed
            expectation = self._episode.expected_changes() if score > 0 else None
        self.last_verdict = None if expectation is None else expectation.judge(score, self.changes())
        return score if self.last_verdict is None else self.last_verdict.reward

    def _max_steps(self, episode: Episode) -> int:
        return self.max_steps_override or episode.task.max_steps

    def _quiet_world(self) -> World:
        """The current world, with the episode's connections released so it can be cloned or marked."""
        episode = self._require_episode()
        assert self._world is not None
        episode.quiesce()
        return self._world

    def _require_open(self) -> None:
        if self._closed:
            raise EnvironmentClosed(
                "this environment was closed (its worlds and server are released): "
                "make a new one with statekit.make(...)"
            )

    def _require_episode(self) -> Episode:
        self._require_open()
        if self._episode is None:
            raise ResetNeeded("step()/state() before reset(): call reset(seed=...) first")
        self._raise_if_lost()
        down = self.strategy.health().down
        if down is not None:  # the world may come back with its server: the episode waits
            raise ServerDown(f"{down}; the episode is kept until then: retry the call")
        return self._episode

    def _require_server(self, what: str, *, fresh: bool = False, cause: Exception | None = None) -> None:
        """Raise ServerDown if the worlds' server is down (``fresh``: ask it now), so no ``what`` is
        restored half-way."""
        down = self.strategy.health(fresh=fresh).down
        if down is not None:
            raise ServerDown(
                f"no {what} can be restored now ({down}); retry once health() is clear"
            ) from cause

    def _raise_if_lost(self, *, fresh: bool = False) -> None:
        """End the episode and raise WorldLost if its world died with its server. ``fresh`` (after a
        step failed) asks the server now, and a server down then ends the episode too: the step may
        have half happened."""
        world = self._world
        why = None if world is None else self.strategy.lost(world, fresh=fresh)
        if why is None and fresh:
            why = self.strategy.health().down
        if why is None:
            return
        episode_id = self._episode_id
        self._done = True
        episode, self._episode, self._world, self._controls = self._episode, None, None, None
        self._digest = None
        try:
            if episode is not None:
                episode.close()
        finally:
            assert world is not None
            self._release(world, failed=True)
        raise WorldLost(
            f"episode {episode_id} is lost: {why}. reset() starts a new one once the server is back; "
            "the seed and the actions taken so far replay it exactly"
        )

    def _end_episode(self) -> None:
        """Close the episode and hand its world back. A strategy that does not keep worlds (no
        ``Rewinding``) destroys it, so bookmarks on it are first turned into copies."""
        episode, world = self._episode, self._world
        self._episode = self._world = self._controls = None
        self._digest = None
        if episode is not None:
            episode.close()
        if world is not None:
            self._release(world)

    def _release(self, world: World, *, failed: bool = False) -> None:
        """Hand ``world`` back to the strategy. Its warm app goes too unless the world may come back
        (a Rewinding strategy parks it) and nothing failed on it; a strategy that does not keep worlds
        destroys it, so bookmarks on it are first turned into copies."""
        keeps = isinstance(self.strategy, Rewinding)
        if (failed or not keeps) and world.id in self._apps:
            self.adapter.detach(self._apps.pop(world.id))
        if not keeps:
            self._copy_bookmarks(world)
        self.strategy.discard(world)

    def _copy_bookmarks(self, world: World) -> None:
        """Turn the bookmarks on ``world`` into captured copies (latest first), before it goes."""
        marked = [
            (sid, s) for sid, s in self._snapshots.items() if s.mark is not None and s.world_id == world.id
        ]
        for snap_id, snap in reversed(marked):
            try:
                self.strategy.rewind(world, snap.mark)
                snap.copy = snapshot_key(snap_id)
                self.strategy.capture(snap.copy, world)
            except Exception as exc:  # one lost bookmark must not take the others with it
                log.warning("snapshot %s is lost with its world: %s", snap_id, _why(exc))
                snap.copy = ""
            finally:
                self.strategy.forget(snap.mark)
                snap.mark = None
        for snap_id, snap in marked:
            if not snap.copy:
                del self._snapshots[snap_id]


def _why(exc: Exception) -> str:
    """A failure's reason: a RewindError's own, or the exception's text."""
    return exc.reason if isinstance(exc, RewindError) else f"{type(exc).__name__}: {exc}"
