"""How an episode starts, and what stays warm between episodes: the application attached to each
world, and the task each deterministic start posed.

A strategy that keeps worlds (``Capabilities.keeps_worlds``) hands the same world back for the same
seed, so the application attached to it (``Adapter.attach``: engines, a web app) serves the next
episode too; and an adapter whose ``start_episode`` only reads the world (``deterministic_start``) need
not search for the same task again: the task it posed once, and the controls' state after that start,
are handed back.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from statekit.adapter import Adapter, EnvSettings, Episode
from statekit.contract import JSON, Task
from statekit.determinism.controls import Controls, ControlsState
from statekit.digest.canonical import canonical_json
from statekit.world import World

WARM_APPS = 4
"""Applications kept attached to worlds this environment may see again (least recent detached)."""
START_CACHE = 4096
"""Episode starts remembered (a long run of seedless resets draws endless seeds)."""


@dataclass(frozen=True)
class Start:
    """What a first start on a key taught: the task it posed and the controls' state after it."""

    task: Task
    controls: ControlsState


class EpisodeStarts:
    """Starts the episodes of one environment on its adapter."""

    def __init__(self, adapter: Adapter, controls_for: Callable[..., Controls]) -> None:
        self.adapter = adapter
        self._controls_for = controls_for
        self._apps: OrderedDict[str, Any] = OrderedDict()
        self._starts: OrderedDict[str, Start] = OrderedDict()

    def start(
        self,
        world: World,
        key: str,
        *,
        seed: int,
        options: dict[str, JSON],
        task: Task | None,
        controls: Controls,
        settings: EnvSettings,
    ) -> tuple[Episode, JSON]:
        """The adapter's episode on ``world`` (a copy of golden ``key``) and its first observation, started
        under ``controls`` (all on: an episode's set-up is never what a control check proves)."""
        start_key = f"{key}:{canonical_json(options)}"
        known = self._starts.get(start_key) if task is None and self.adapter.deterministic_start else None
        app = self._app(world, seed, settings)
        controls.bind(world)
        episode: Episode | None = None
        try:
            with controls.active(all_on=True):
                episode = self.adapter.start_episode(
                    world,
                    seed=seed,
                    options=options,
                    task=task or (known.task if known else None),
                    app=app,
                    settings=settings,
                )
                if known is not None:  # the same start as the first: the controls end where they did,
                    controls.load(known.controls)  # before the first observation (the clock moves too)
                observation = episode.observe()
            controls.adopt(episode.controls, (control.name for control in self.adapter.controls))
        except BaseException:
            if episode is not None:
                episode.close()
            raise
        if known is not None:  # again, after the observation and the adoption of the episode's own
            controls.load(known.controls)  # controls: the state the first start ended with, for all
        elif task is None and self.adapter.deterministic_start:
            self._starts[start_key] = Start(episode.task, controls.save())
            while len(self._starts) > START_CACHE:
                self._starts.popitem(last=False)
        return episode, observation

    def _app(self, world: World, seed: int, settings: EnvSettings) -> Any:
        """The application attached to ``world``: kept warm while the world may come back. Attached
        under the seed's controls, so what it makes then (its generators, ids, timestamps) is seeded."""
        if world.id in self._apps:  # the same world, put back since its last episode
            self._apps.move_to_end(world.id)
            self.adapter.on_rewind(self._apps[world.id])
            return self._apps[world.id]
        controls = self._controls_for(seed, purpose="attach")
        controls.bind(world)
        with controls.active():
            app = self.adapter.attach(world, settings)
        self._apps[world.id] = app
        while len(self._apps) > WARM_APPS:
            _, old = self._apps.popitem(last=False)
            self.adapter.detach(old)
        return app

    def drop(self, world: World) -> None:
        """Detach the app of ``world`` (it is going, or failed)."""
        if world.id in self._apps:
            self.adapter.detach(self._apps.pop(world.id))

    def close(self) -> None:
        while self._apps:
            _, app = self._apps.popitem()
            self.adapter.detach(app)
