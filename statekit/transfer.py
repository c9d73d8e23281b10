"""Episodes that move: ``export_episode`` turns a live episode into bytes, ``import_episode`` continues
it in another environment of the same adapter (another process, another machine).

The blob holds the episode's path, not its world: what decides the world (the adapter and its
fingerprint, the spec's task and control settings, the seed and options), every action since the
reset, and the digest the world had. Importing resets to the seed's world and replays the actions
under the episode's controls. Reset and step are deterministic (``statekit check`` proves it per
adapter), so the world, the virtual clock and the generators end where the exporter's were, and the
import compares digests to be sure: a world that came out different is an error, never a silent fork.
Outbound calls replay from cassettes and egress is closed, so replaying repeats no side effect outside
the world. The price is the replay: an import costs what the episode's steps cost (a bytes copy of the
journal since the golden would cost what changed; that is the next step, see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import json
import zlib
from typing import TYPE_CHECKING, Any

from statekit.contract import JSON
from statekit.envspec import EnvSpec
from statekit.errors import ConfigError, ResetError
from statekit.live import Live

if TYPE_CHECKING:
    from statekit.adapter import Adapter
    from statekit.contract import State

FORMAT = 1
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


class Transferring:
    """``export_episode`` and ``import_episode`` (``Environment`` has them)."""

    adapter: Adapter
    spec: EnvSpec
    _live: Live | None

    if TYPE_CHECKING:  # what it uses of the environment

        def _require_live(self) -> Live: ...
        def reset(
            self, *, seed: int | None = None, options: dict[str, JSON] | None = None
        ) -> tuple[JSON, dict]: ...
        def step(self, action: Any) -> tuple[JSON, float, bool, bool, dict]: ...
        def state(self) -> State: ...

    def export_episode(self) -> bytes:
        """The live episode as bytes ``import_episode`` continues elsewhere (the episode goes on here too)."""
        live = self._require_live()
        body = {
            "format": FORMAT,
            "world": _deciding(self.spec, self.adapter),
            "seed": live.seed,
            "options": live.options,
            "actions": live.actions,
            "step_count": live.step_count,
            "digest": self.state().digest,
        }
        try:
            text = json.dumps(body, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ConfigError(f"this episode's actions are not JSON, so it cannot move: {exc}") from exc
        return zlib.compress(text.encode(), 1)

    def import_episode(self, blob: bytes) -> tuple[JSON, dict]:
        """Continue an exported episode here: the observation and info its last step (or its reset)
        returned there. Raises ConfigError for a blob of another adapter, version or spec, ResetError
        when the replayed world differs from the exported one."""
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
        observation, info = self.reset(seed=seed, options=options)
        for action in actions:
            observation, _, _, _, info = self.step(action)
        now = self.state()
        if now.digest != digest or now.step_count != steps:
            raise ResetError(
                f"the imported episode came out different: digest {now.digest[:12]} after {now.step_count} "
                f"steps, exported {digest[:12]} after {steps} (is this adapter deterministic? statekit check)"
            )
        return observation, {**info, "imported": True}
