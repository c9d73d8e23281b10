"""The environment: Gymnasium's contract over an adapter, a reset strategy and determinism controls.
Made from an ``EnvSpec`` by ``statekit.make``; helped by ``cache`` (goldens), ``forks``, ``warm``
(episode starts, warm apps) and ``referee`` (the reward's collateral rule)."""

from __future__ import annotations

import dataclasses
import functools
import logging
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from statekit.adapter import Adapter, EnvSettings, Episode, Outcome
from statekit.cache import WorldCache
from statekit.cache import world_key as world_key  # re-exported: benchmarks and tools import it from here
from statekit.capabilities import StateDumps, capability, replay_control
from statekit.collateral import ChangeSet, Verdict
from statekit.contract import JSON, State, StepResult, Task
from statekit.determinism.clock import EPISODE_START
from statekit.determinism.controls import CORE_CONTROLS, Controls
from statekit.determinism.egress import EgressScope
from statekit.determinism.ids import HeldGenerators
from statekit.digest.compute import Digest
from statekit.digest.dump import StateDump
from statekit.entropy import true_token
from statekit.envspec import EnvSpec
from statekit.errors import (
    ActionError,
    ConfigError,
    EnvironmentClosed,
    ResetNeeded,
    ServerDown,
    StatekitError,
    WorldLost,
    stale_connection_error,
    stale_connection_hint,
)
from statekit.forks import Forking, Forks
from statekit.live import Live, Step
from statekit.memo import Memo
from statekit.referee import Referee
from statekit.strategies.base import Health, ResetStrategy
from statekit.tools import check_reset_options, parse_action
from statekit.transfer import Transferring
from statekit.warm import EpisodeStarts
from statekit.world import World

log = logging.getLogger(__name__)


class Environment(Forking, Transferring):
    """``reset``/``step``/``state``/``snapshot``/``restore``/``export_episode``/``import_episode``/``close``
    over one application. Made by ``statekit.make`` (from an ``EnvSpec``, kept as ``spec``; without
    one, ``EnvSpec(adapter)``); it owns its adapter and strategy."""

    def __init__(
        self,
        adapter: Adapter,
        strategy: ResetStrategy,
        *,
        spec: EnvSpec | None = None,
        cache: WorldCache | None = None,
    ) -> None:
        self.spec = spec or EnvSpec(adapter)
        """What this environment was made from (``statekit.envspec``)."""
        known = (*CORE_CONTROLS, *(control.name for control in adapter.controls))
        _check_controls(adapter, self.spec, known)
        self.adapter = adapter
        self.strategy = strategy
        self.control_names: tuple[str, ...] = known
        """Every determinism control of this environment, statekit's then the adapter's."""
        self.worlds = self.spec.worlds
        """The seeds a seedless reset draws from (``statekit.seeds``)."""
        self.cache = cache or WorldCache(adapter, strategy)
        """The world cache: builds, leases and evicts goldens (``statekit.cache``)."""
        allowed = [*adapter.allowed_endpoints(), *self.spec.services.values()]
        self._egress = EgressScope(allowed, enabled="egress" not in self.spec.disable_controls)
        self.cache.egress = self._egress  # a world's build may reach out only where the adapter says
        self._held = HeldGenerators()  # the applications' own random generators, re-seeded per episode
        self._live: Live | None = None
        self._forks = Forks(strategy)
        self._referee = Referee(adapter)
        self._starts = EpisodeStarts(adapter, self._controls_for)
        self._goldens: dict[str, Digest] = Memo()  # bounded: seedless runs draw endless seeds
        """Digest of each golden, computed on its first copy. Episodes must not write while starting
        (``check_reset_restores`` compares it with a fresh digest), so it is also each episode's first."""
        self._cap = self.spec.max_steps
        self._closed = False
        # The guard is on from the first reset until close() or garbage collection: an environment that
        # never played or was dropped must not keep blocking the rest of the process.
        weakref.finalize(self, self._egress.close)

    # -- the contract -------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, JSON] | None = None) -> tuple[JSON, dict]:
        """Start an episode in a fresh copy of the seed's world; build that world on first use.

        The current episode ends only once the new one has started, so a refused reset (bad seed or
        options, a failed build) leaves it exactly as it was. One exception: a strategy that keeps
        worlds, resetting to the live world's own seed, rewinds that world, so the episode ends first;
        then only what is refused before anything else (the options) leaves it untouched.
        """
        self._require_open()
        if seed is None:
            seed = self.worlds.draw()
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self._require_server("world")  # nothing could be restored: say so before touching anything
        options = dict(options or {})
        self._egress.open()  # from the first episode until close(), nothing here reaches out unannounced
        self._check_options(options)
        key = self.cache.ensure(seed)
        live = self._live
        if live is not None and key == live.key and self.strategy.capabilities.keeps_worlds:
            self._end_episode()  # its world is rewound in place for the new episode: options checked above
        controls = self._controls_for(seed, start_offset=EPISODE_START)
        try:
            return self._begin(key, seed, options, task=None, controls=controls)
        except StatekitError:
            raise
        except Exception as exc:  # the application's own connection failing may be the server dying
            self._require_server("world", fresh=True, cause=exc)
            if stale := stale_connection_error(exc):
                raise stale from exc
            raise

    def step(self, action: Any) -> Step:
        """Apply one action. Bad actions become error observations with reward 0."""
        live = self._require_live()
        if live.done:
            raise ResetNeeded(
                "this episode has ended (terminated or truncated): call reset() to start another"
            )
        live.step_count += 1
        live.record(action)
        noted: dict[str, JSON] = {}
        try:
            tool, arguments = parse_action(action, live.episode.tools)
        except ActionError as exc:
            outcome = Outcome({"error": {"code": exc.code, "message": str(exc)}})
        else:
            try:
                with live.controls.active():
                    outcome = live.episode.call(tool.name, arguments)
            except Exception as exc:  # the application broke, not the agent: end the episode, say why
                self._raise_if_lost(fresh=True)  # or its database died under it: not the application's doing
                log.exception("step %d of episode %s failed", live.step_count, live.episode_id)
                failed = f"{type(exc).__name__}: {exc} {stale_connection_hint(exc) or ''}".rstrip()
                message = f"the environment failed while applying {tool.name!r}: {failed}"
                return self._fail(live, "environment_error", message)
            observation, noted = live.controls.report(outcome.observation)  # egress, replay misses, ...
            outcome = dataclasses.replace(outcome, observation=observation)
            default = timedelta(seconds=self.adapter.tick_seconds)
            live.controls.clock.advance(default if outcome.advance is None else outcome.advance)
        terminated = outcome.done
        try:
            reward = self._referee.score(live.episode, live.controls, self.changes) if terminated else 0.0
        except Exception as exc:
            log.exception("the verifier of episode %s failed", live.episode_id)
            return self._fail(live, "verifier_error", f"{type(exc).__name__}: {exc}")
        truncated = not terminated and live.step_count >= self._max_steps(live.episode)
        live.done = terminated or truncated
        info = live.info(**noted)
        if terminated and self.last_verdict is not None:
            info["verdict"] = self.last_verdict.as_dict()
        return live.returned(StepResult(outcome.observation, reward, terminated, truncated, info))

    def state(self) -> State:
        """Episode id, step count, seed, virtual clock and the world's digest."""
        live = self._require_live()
        return State(
            episode_id=live.episode_id,
            step_count=live.step_count,
            seed=live.seed,
            clock=live.controls.clock.isoformat(),
            digest=self.digest_now(),
        )

    def close(self) -> None:
        """End the episode, drop snapshots, release the strategy and adapter. Safe twice."""
        if self._closed:
            return
        self._closed = True
        try:
            self._forks.close()  # first: ending the episode must not copy bookmarks about to go
            self._end_episode()
        finally:
            try:
                self._starts.close()
            finally:
                try:
                    self.cache.close()  # its leases: the goldens this environment used may go now
                finally:
                    try:
                        self.strategy.close()
                    finally:
                        self._egress.close()
                        self.adapter.close()

    # -- around the contract ------------------------------------------------------------------
    @property
    def tools(self) -> list[dict[str, JSON]]:
        """The actions on offer, as ``[{"name", "description", "input_schema"}]``."""
        if self._live is None:
            raise ResetNeeded("tools are known once an episode exists: call reset(seed=...) first")
        return [tool.as_dict() for tool in self._live.episode.tools]

    @property
    def task(self) -> Task:
        if self._live is None:
            raise ResetNeeded("no episode yet: call reset(seed=...) first")
        return self._live.episode.task

    @property
    def world(self) -> World:
        """The current episode's world, for inspection (the strategy owns it; do not discard it)."""
        return self._require_live().world

    @property
    def last_verdict(self) -> Verdict | None:
        """The collateral verdict of the last scored episode (``statekit.referee``)."""
        return self._referee.last_verdict

    @property
    def disabled_controls(self) -> frozenset[str]:
        return frozenset(self.spec.disable_controls)

    @functools.cached_property
    def settings(self) -> EnvSettings:
        """What the adapter is told of this environment (``attach``/``start_episode`` receive it).
        Made on first use: the task pool asks the adapter its task kinds, which may cost (a task store
        validated) and which an environment that never plays does not need."""
        return EnvSettings(
            task_pool=tuple(
                kind for kind in self.adapter.task_kinds() if kind not in self.spec.exclude_tasks
            ),
            disabled_controls=self.disabled_controls,
            services=self.spec.services,
            recording=self.spec.record,
        )

    @property
    def last_reset_cache(self) -> str:
        """ "hit" if the last reset's world came from the cache, "miss" if it was built."""
        return self.cache.last

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
        live = self._require_live()
        live.digest = self.adapter.digest(live.world, since=None if full else live.digest)
        return live.digest

    def dump(self) -> StateDump:
        """The canonical rows of the current world (what its digest is computed from)."""
        return capability(self.adapter, StateDumps, why="dumping its state").dump(self.world)

    def changes(self) -> ChangeSet:
        """Every row the current episode's world changed since its seed's golden (the digest's rows):
        the one door for collateral-damage checks (``statekit.referee``)."""
        live = self._require_live()
        seed = live.seed
        return self._referee.changes(
            live.world,
            golden=self._goldens[live.key],
            now=self.digest_report(),
            key=self.cache.key(seed),
            golden_dump=lambda: self._golden_dump(seed),
        )

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
        return capability(self.adapter, StateDumps, why="the coverage check").check_schema(self.world)

    @contextmanager
    def step_cap(self, steps: int) -> Iterator[None]:
        """Episodes started inside run to at most ``steps`` steps instead of the spec's cap (the
        checker's probes play with a generous budget, so running out is never their defence)."""
        saved, self._cap = self._cap, steps
        try:
            yield
        finally:
            self._cap = saved

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

    # -- internals ----------------------------------------------------------------------------
    def _check_options(self, options: dict[str, JSON]) -> None:
        """Refuse bad reset options before any world is touched: against the adapter's schema, a task
        kind the spec excludes, then the adapter's own ``check_options``."""
        check_reset_options(options, self.adapter.reset_options(), self.adapter.name)
        kind = options.get("task")
        if kind in self.spec.exclude_tasks:
            raise ConfigError(
                f"task kind {kind!r} is excluded from this environment's pool (exclude_tasks); "
                f"it poses {list(self.settings.task_pool)}"
            )
        self.adapter.check_options(options)

    def _controls_for(self, seed: int, **options: Any) -> Controls:
        """This environment's controls for ``seed`` (``purpose``, ``start_offset``: see ``Controls``)."""
        return Controls(
            seed, disabled=self.disabled_controls, egress=self._egress, held=self._held, **options
        )

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
        """Start an episode on a copy of ``key`` (or on ``world``, at a bookmark whose digest is ``at``)."""
        world = world or self.strategy.restore(key)
        served = self.strategy.last_restore
        try:
            episode, observation = self._starts.start(
                world, key, seed=seed, options=options, task=task, controls=controls, settings=self.settings
            )
        except BaseException:
            self._release(world, failed=True)
            raise
        try:
            if key not in self._goldens:  # a copy equals its golden until the first step: hash it once
                self._goldens[key] = self.adapter.digest(world)
            self._end_episode()  # only now: a reset or restore refused above leaves the episode as it was
        except BaseException:
            episode.close()
            self._release(world, failed=True)
            raise
        live = self._live = Live(
            key, seed, options, world, episode, controls, true_token(16), digest=at or self._goldens[key]
        )
        info = {
            "episode_id": live.episode_id,
            "seed": seed,
            "task_id": episode.task.id,
            "task_kind": episode.task.kind,
            "max_steps": self._max_steps(episode),
            "tools": [tool.as_dict() for tool in episode.tools],
            "digest": live.digest.digest,
            "clock": controls.clock.isoformat(),
            "strategy": self.strategy.name,
            "world": served,
            "metadata": self.adapter.metadata(),
        }
        live.last = (observation, info)
        return observation, info

    def _golden_dump(self, seed: int) -> StateDump:
        cache = self.cache.last  # reports the last reset, not this look at the golden
        try:
            with self.open_world(seed) as world:
                return capability(self.adapter, StateDumps).dump(world)
        finally:
            self.cache.last = cache

    def _fail(self, live: Live, code: str, message: str) -> Step:
        """An infrastructure failure inside a step: reward 0, truncated (the world may be half-written,
        so the episode cannot go on), and the reason in the observation and ``info["error"]``."""
        live.done = True
        observation = {"error": {"code": code, "message": message}}
        return live.returned(StepResult(observation, 0.0, False, True, live.info(error=observation)))

    def _max_steps(self, episode: Episode) -> int:
        return self._cap or episode.task.max_steps

    def _require_open(self) -> None:
        if self._closed:
            raise EnvironmentClosed(
                "this environment was closed (its worlds and server are released): make a new one with "
                "statekit.make(...)"
            )

    def _require_live(self) -> Live:
        """The live episode, or the error that says why there is none (or why it must wait)."""
        self._require_open()
        if self._live is None:
            raise ResetNeeded("step()/state() before reset(): call reset(seed=...) first")
        self._raise_if_lost()
        down = self.strategy.health().down
        if down is not None:  # the world may come back with its server: the episode waits
            raise ServerDown(f"{down}; the episode is kept until then: retry the call")
        assert self._live is not None
        return self._live

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
        live = self._live
        why = None if live is None else self.strategy.lost(live.world, fresh=fresh)
        if why is None and fresh:
            why = self.strategy.health(fresh=True).down  # the step failed: ask the server now
        if why is None or live is None:
            return
        live.done = True
        self._live = None
        try:
            live.episode.close()
        finally:
            self._release(live.world, failed=True)
        raise WorldLost(
            f"episode {live.episode_id} is lost: {why}. reset() starts a new one once the server is back; "
            "the seed and the actions taken so far replay it exactly"
        )

    def _end_episode(self) -> None:
        """Close the episode and hand its world back."""
        live, self._live = self._live, None
        if live is not None:
            try:
                live.episode.close()
            finally:
                self._release(live.world)

    def _release(self, world: World, *, failed: bool = False) -> None:
        """Hand ``world`` back to the strategy. Its warm app goes too unless the world may come back
        (a strategy that keeps worlds parks it) and nothing failed on it; a strategy that does not keep
        worlds destroys it, so bookmarks on it are first turned into copies."""
        keeps = self.strategy.capabilities.keeps_worlds
        if failed or not keeps:
            self._starts.drop(world)
        if not keeps:
            self._forks.copy_bookmarks(world)
        self.strategy.discard(world)


def _check_controls(adapter: Adapter, spec: EnvSpec, known: tuple[str, ...]) -> None:
    """Refuse a spec whose controls the adapter cannot honour: an unknown name, replay switched off (or
    recording) without live services, or anything switched off or reached outside a process statekit
    cannot reach into."""
    disabled = set(spec.disable_controls)
    unknown = sorted(disabled - set(known))
    if unknown:
        raise ConfigError(f"unknown determinism control(s) {unknown}; this environment has {list(known)}")
    replay = replay_control(adapter)
    if replay in disabled and not spec.services:
        raise ConfigError(
            f"with the {replay!r} control off the application needs live services: pass services= "
            "(statekit check starts the adapter's LiveServices for it)"
        )
    if spec.record and replay in disabled:
        raise ConfigError(f"record=True records through the {replay!r} control: it cannot be off")
    if spec.services and adapter.out_of_process:
        raise ConfigError(f"live services cannot be reached: {adapter.out_of_process}")
    if disabled and adapter.out_of_process:
        raise ConfigError(
            f"controls cannot be switched off (asked: {sorted(disabled)}): {adapter.out_of_process}"
        )
