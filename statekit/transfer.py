"""Episodes that move: ``export_episode`` turns a live episode into bytes, ``import_episode`` continues
it in another environment of the same adapter (another process, another machine).

The blob holds what decides the world (the adapter and its fingerprint, the spec's task and control
settings, the seed and options), the episode's path (every action since the reset), the digest the
world had, and, where the strategy can read them (``ResetStrategy.changes``: PostgreSQL's change
journal), the world's changes since its golden and the controls' state (virtual clock, generators).
Importing resets to the seed's world and compares its golden's digest with the exporter's, then
applies those changes (the cost of what changed, not of the steps that made them) and continues the
controls where they were: the same golden with every change landed (``apply_changes`` checks) is
the exporter's world. Without changes, or when they cannot be applied here, it replays the actions
under the episode's controls instead and compares the world's digest with the exporter's (reset and
step are deterministic: ``statekit check`` proves it per adapter). A world that comes out different
is an error, never a silent fork. Outbound calls replay from cassettes and egress is closed, so
neither way repeats a side effect outside the world.

Applying changes assumes, as ``restore`` does, that an episode's state is its world and its controls:
the application's own episode object is the one its reset made, as the exporter's was. A blob is
trusted as a description of an episode: it can hold any rows.
"""

from __future__ import annotations

import json
import logging
import zlib
from datetime import datetime
from typing import TYPE_CHECKING, Any

from statekit.contract import JSON
from statekit.determinism.controls import ControlsState
from statekit.envspec import EnvSpec
from statekit.errors import ConfigError, ResetError
from statekit.live import Live
from statekit.strategies.base import ResetStrategy

if TYPE_CHECKING:
    from statekit.adapter import Adapter
    from statekit.contract import State
    from statekit.digest.compute import Digest

log = logging.getLogger(__name__)
FORMAT = 2
DECIDING = ("max_steps", "exclude_tasks", "disable_controls", "adapter_options")
"""The spec's fields that change what an episode does (a strategy, a cache or a URL does not)."""


def _deciding(spec: EnvSpec, adapter: Adapter) -> dict[str, JSON]:
    fields = spec.as_dict()
    return json.loads(
        json.dumps(
            {
                "adapter": adapter.name,
                "fingerprint": adapter.fingerprint(),
                **{k: fields[k] for k in DECIDING},
            },
            sort_keys=True,
            default=str,
        )
    )


def _encode(value: Any) -> JSON:
    """A control's saved state as JSON (tuples, datetimes and non-string keys tagged)."""
    if isinstance(value, tuple):  # a generator's state is mostly one tuple of 625 ints: copied as is
        plain = all(type(v) is int for v in value)
        return {"tuple": list(value) if plain else [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, datetime):
        return {"datetime": value.isoformat()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ConfigError(f"a control's state holds a {type(value).__name__}, which cannot move")


def _decode(value: JSON) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        ((tag, inner),) = value.items()
        if tag == "tuple":
            return tuple(inner) if all(type(v) is int for v in inner) else tuple(_decode(v) for v in inner)
        if tag == "dict":
            return {_decode(k): _decode(v) for k, v in inner}
        return datetime.fromisoformat(inner)
    return value


def _started(start: dict[str, JSON], last: dict[str, JSON], how: str) -> dict[str, JSON]:
    """An import's info: the episode's start here (its id, tools, task...; not the golden's digest),
    then the last info returned there, and how the episode came (``imported``)."""
    here = {k: v for k, v in start.items() if k != "digest"}
    return {**here, **last, "episode_id": start["episode_id"], "imported": how}


class Transferring:
    """``export_episode`` and ``import_episode`` (``Environment`` has them)."""

    adapter: Adapter
    spec: EnvSpec
    strategy: ResetStrategy
    _live: Live | None
    _goldens: dict[str, Digest]

    if TYPE_CHECKING:  # what it uses of the environment

        def _require_live(self) -> Live: ...
        def _end_episode(self) -> None: ...
        def reset(
            self, *, seed: int | None = None, options: dict[str, JSON] | None = None
        ) -> tuple[JSON, dict]: ...
        def step(self, action: Any) -> tuple[JSON, float, bool, bool, dict]: ...
        def state(self) -> State: ...

    def export_episode(self) -> bytes:
        """The live episode as bytes ``import_episode`` continues elsewhere (the episode goes on here too)."""
        live = self._require_live()
        changes: JSON = None
        if self.strategy.capabilities.rewinds:
            live.episode.quiesce()  # its connections released: the changes are read from a quiet world
            try:
                changes = self.strategy.changes(live.world)
            except Exception as exc:  # cannot tell them (or failed to): the blob is the path alone
                log.debug("no changes to export (%s): the import will replay the actions", exc)
        try:  # an adapter control whose state is not data: the import replays instead
            controls: JSON = [[name, _encode(state)] for name, state in live.controls.save().states]
        except ConfigError as exc:
            log.debug("the controls' state cannot move (%s): the import will replay the actions", exc)
            changes = controls = None
        body = {
            "format": FORMAT,
            "world": _deciding(self.spec, self.adapter),
            "seed": live.seed,
            "options": live.options,
            "actions": live.actions,
            "step_count": live.step_count,
            "done": live.done,
            "digest": self.state().digest,
            "golden": self._goldens[live.key].digest,
            "changes": changes,
            "controls": controls,
            "last": json.loads(json.dumps(live.last, default=str)),
        }
        try:
            text = json.dumps(body, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ConfigError(f"this episode's actions are not JSON, so it cannot move: {exc}") from exc
        return zlib.compress(text.encode(), 1)

    def import_episode(self, blob: bytes) -> tuple[JSON, dict]:
        """Continue an exported episode here: the observation and info its last step (or its reset)
        returned there, ``info["imported"]`` saying how ("changes": applied; "replay": actions
        replayed). Raises ConfigError for a blob of another adapter, version or spec, ResetError when
        the world here starts or comes out different from the exported one."""
        try:
            body = json.loads(zlib.decompress(blob))
            seed, options, actions, digest = body["seed"], body["options"], body["actions"], body["digest"]
            fmt, world, steps = body["format"], body["world"], body["step_count"]
        except (zlib.error, ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"not an exported statekit episode: {exc}") from exc
        if fmt != FORMAT:
            raise ConfigError(f"an exported episode of format {fmt!r}; this statekit reads format {FORMAT}")
        here = _deciding(self.spec, self.adapter)
        if world != here:
            differ = sorted(k for k in {*world, *here} if world.get(k) != here.get(k))
            raise ConfigError(
                f"the episode was exported from another world: {differ} differ ({world} there, {here} here)"
            )
        observation, start = self.reset(seed=seed, options=options)
        golden = self._goldens[self._require_live().key].digest
        if body.get("golden") != golden:
            raise ResetError(
                f"the episode was exported from another golden world (digest {str(body.get('golden'))[:12]} "
                f"there, {golden[:12]} here): is the adapter's world builder deterministic? (statekit check)"
            )
        if body.get("changes") is not None and body.get("controls") is not None and self._apply(body):
            # the same golden, every change landed (``apply_changes`` checks): the exporter's world
            return body["last"][0], _started(start, body["last"][1], "changes")
        info = start
        for action in actions:
            observation, _, _, _, info = self.step(action)
        now = self.state()
        if now.digest != digest or now.step_count != steps:
            raise ResetError(
                f"the imported episode came out different: digest {now.digest[:12]} after {now.step_count} "
                f"steps, exported {digest[:12]} after {steps} (is this adapter deterministic? statekit check)"
            )
        return observation, _started(start, info, "replay")

    def _apply(self, body: dict[str, Any]) -> bool:
        """Bring the episode just reset to the exported one by its changes and controls; False (the
        episode reset again, for a replay) when they cannot be applied here."""
        live = self._require_live()
        live.episode.quiesce()
        try:
            self.strategy.apply_changes(live.world, body["changes"])
            controls = ControlsState(tuple((str(name), _decode(state)) for name, state in body["controls"]))
            last = (body["last"][0], dict(body["last"][1]))
            live.controls.load(controls)
        except Exception as exc:  # the replay that follows is checked by digest: nothing goes unseen
            log.warning("the exported episode cannot be applied here (%s): replaying its actions", exc)
            self._end_episode()  # its world rewinds what was applied, as after any episode
            self.reset(seed=live.seed, options=live.options)
            return False
        live.controls.bind(live.world)  # the database clock watches from the applied changes on
        live.step_count, live.done, live.actions, live.last = (
            int(body["step_count"]),
            bool(body["done"]),
            list(body["actions"]),
            last,
        )
        return True
