"""statekit environments behind Gymnasium's API, in-process or from a harness URL.

Importing this module registers ``statekit/<adapter>`` for every registered adapter, so::

    import statekit.gym  # noqa: F401  (registers the ids)
    env = gymnasium.make("statekit/claims_app")                     # in-process (embedded PostgreSQL)
    env = gymnasium.make("statekit/claims_app", url="http://127.0.0.1:8000", token="...")  # remote
    env = gymnasium.make("statekit.gym:statekit/claims_app")        # no import needed

Gymnasium 1.x has no plugin discovery any more (the ``gymnasium.envs`` entry-point group was
removed in 1.0), hence the import, or Gymnasium's ``"module:id"`` form which imports it for you.

Spaces. A statekit observation is nested JSON whose shape depends on the tool just called (a claim,
a list of claims, an error), and an action is ``{"tool": NAME, ...arguments}`` with per-tool
arguments. No fixed ``Dict``/``Box`` space describes that without dropping information, and the
agents these environments are for (language models) read and write text anyway. So both spaces are
``gymnasium.spaces.Text`` over printable ASCII: an observation is compact JSON with sorted keys and
``ensure_ascii`` (every value survives ``json.loads`` intact), and an action is a JSON string, or a
dict for convenience. A string that is not JSON is still a step: the environment answers with its
usual ``malformed_action`` error observation, so ``action_space.sample()`` is safe to send.
"""

from __future__ import annotations

import json
from typing import Any, SupportsFloat

from statekit.envspec import EnvSpec
from statekit.errors import ConfigError
from statekit.make import make

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as exc:  # an optional extra
    raise ConfigError("statekit.gym needs Gymnasium: pip install 'statekit[gym]'") from exc

from statekit.client import RemoteEnvironment
from statekit.contract import JSON
from statekit.env import Environment
from statekit.registry import registered
from statekit.seeds import WorldSet

PRINTABLE = "".join(chr(c) for c in range(0x20, 0x7F))
"""What ``json.dumps(..., ensure_ascii=True)`` can emit: space to tilde."""
MAX_OBSERVATION_CHARS = 1 << 20
MAX_ACTION_CHARS = 1 << 16


def encode(value: JSON) -> str:
    """The observation text: compact, sorted keys, ASCII only (so it is in the Text space)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def decode_action(action: Any) -> Any:
    """A JSON string becomes its value; other strings and non-strings go to the environment as they are."""
    if not isinstance(action, str):
        return action
    try:
        return json.loads(action)
    except ValueError:
        return action


class StatekitEnv(gymnasium.Env[str, str]):
    """A statekit environment as a ``gymnasium.Env`` (see the module docstring for the spaces).

    Give ``url`` (and ``token``) to play against ``statekit serve``; otherwise the environment is made
    in-process from ``adapter`` (a name, or an ``EnvSpec``) and ``make_options`` (``EnvSpec``'s fields:
    ``db_url``, ``strategy``, ...), as ``statekit.make`` does. Or pass a ready ``env`` (an
    ``Environment`` or ``RemoteEnvironment``); it is closed with this one. ``statekit_spec`` is the
    spec an in-process environment was made from.
    ``reset(seed=None)`` draws the world's seed from Gymnasium's seeded generator, so one seeded reset
    fixes the whole sequence of worlds, as Gymnasium users expect; it draws from the environment's
    world set (``num_worlds``/``start_seed``: given here, made in-process with them, or read from the
    harness's ``/health``), so a finite set stays finite. ``info`` is statekit's, except
    that step infos leave out the (random) ``episode_id``, which reset's info carries.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        adapter: str | EnvSpec | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        env: Environment | RemoteEnvironment | None = None,
        num_worlds: int | None = None,
        start_seed: int = 0,
        **make_options: Any,
    ) -> None:
        if env is None and url:
            env = RemoteEnvironment(url, token=token)
        elif env is None:
            if adapter is None:
                raise ConfigError("StatekitEnv needs an adapter (a registered name), a harness url= or env=")
            if num_worlds is not None:  # given here, they override the spec's world set
                make_options.update(num_worlds=num_worlds, start_seed=start_seed)
            env = make(EnvSpec.of(adapter, **make_options))
        self.env = env
        self.statekit_spec = env.spec if isinstance(env, Environment) else None
        self.worlds = _world_set(env, num_worlds, start_seed)
        self.observation_space = spaces.Text(MAX_OBSERVATION_CHARS, min_length=0, charset=PRINTABLE)
        self.action_space = spaces.Text(MAX_ACTION_CHARS, min_length=0, charset=PRINTABLE)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        world = seed if seed is not None else self.worlds.draw_from(self.np_random)
        observation, info = self.env.reset(seed=world, options=options)
        return encode(observation), info

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(decode_action(action))
        # Gymnasium's contract (and its checker) wants step info to follow from seed and actions; the
        # episode's random id stays in reset's info.
        info = {key: value for key, value in info.items() if key != "episode_id"}
        return encode(observation), float(reward), terminated, truncated, info

    def close(self) -> None:
        self.env.close()
        super().close()


def _world_set(env: Environment | RemoteEnvironment, count: int | None, start: int) -> WorldSet:
    if count is not None:
        return WorldSet(count, start)
    if isinstance(env, Environment):
        return env.worlds
    health = env.health()  # the harness says which worlds its seedless resets draw from
    return WorldSet(health.get("num_worlds"), int(health.get("start_seed") or 0))


def register_envs() -> list[str]:
    """Register ``statekit/<name>`` for every adapter this installation knows; return the ids."""
    ids = []
    for name in sorted(registered()):
        env_id = f"statekit/{name}"
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point="statekit.gym:StatekitEnv", kwargs={"adapter": name})
        ids.append(env_id)
    return ids


register_envs()
