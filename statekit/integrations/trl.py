"""TRL: a statekit world as ``GRPOTrainer(environment_factory=...)``.

``environment_factory(adapter, **make_options)`` (or ``url=``/``token=`` for a ``statekit serve``) returns
the zero-argument callable TRL takes. TRL pools the instances it makes and, before each rollout, calls
``reset(**row)`` with every column of the dataset row; each public method of an instance is a tool the
model may call, described to it by the method's type hints and docstring, and ``get_reward()`` scores
the rollout. Here:

- the tool methods are generated from the environment's own tool schemas (names, descriptions,
  argument types and enums), learnt from one probe reset when the factory first makes an instance;
- ``reset(seed=..., options=..., **other_columns)`` restores the seed's world. A row without a ``seed``
  column is refused with ``ValueError``: a rollout that cannot be replayed, or compared with its group,
  is not one statekit serves (add the column: ``dataset.map(lambda row, i: {"seed": i}, with_indices=True)``);
- every rollout of a GRPO group (the same row) starts from the same digest: the factory remembers the
  first initial digest of each (seed, options) and a rollout that starts anywhere else raises
  ``InfrastructureFailure``; ``info`` holds the seed, the digest and what each step returned;
- ``get_reward()`` is the verified reward (the verifier's score held against collateral changes)
  summed over the steps; a rollout whose reset or step could not be served scores ``None``, which
  TRL treats as unscorable (kept out of the group's baseline, advantage 0, when it is the only reward
  source), never as 0. A failed reset is answered with an error observation (TRL's ``reset`` has no
  error path: an exception would end the training run); the next rollout connects again;
- a malformed tool call (unknown arguments, wrong types) reaches statekit, which answers it with an
  error observation; a call after the episode ended answers so, without a step.

The factory pickles (for ``AsyncGRPOTrainer``'s rollout process): it holds only the configuration.
"""

from __future__ import annotations

import inspect
import json
import keyword
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from statekit.client import RemoteEnvironment
from statekit.contract import JSON
from statekit.env import Environment
from statekit.integrations import UNSERVED, as_text, close_quietly, connect, environment_failure, episode_of

log = logging.getLogger(__name__)

RESERVED = frozenset({"reset", "get_reward", "info"})
"""Names TRL reads as the environment's contract (or this class's ``info``), never as tools."""

_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


class InfrastructureFailure(RuntimeError):
    """A reset or step the environment could not serve: the rollout says nothing about the model."""


def _annotation(schema: Mapping[str, JSON]) -> Any:
    """The Python type TRL's schema extraction (``transformers.get_json_schema``) turns back into
    ``schema``'s type: ``Literal`` for an enum, the JSON type's builtin otherwise."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):  # ["integer", "null"]: the argument is optional anyway
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return list[_annotation(schema["items"])]  # type: ignore[misc]
    return _TYPES.get(kind, str) if isinstance(kind, str) else str


def _one_line(text: object) -> str:
    """Text for a docstring line: TRL's docstring parser reads a line break as the next argument."""
    return " ".join(str(text or "").split())


def _docstring(tool: Mapping[str, JSON], names: list[str]) -> str:
    """A Google-style docstring: the description, then one line per argument (TRL requires each)."""
    properties = tool["input_schema"].get("properties", {})
    lines = [_one_line(tool["description"]) or str(tool["name"]), ""]
    if names:
        lines.append("Args:")
        for name in names:
            spec = properties[name]
            text = _one_line(spec.get("description")) or f"the {name.replace('_', ' ')}"
            bounds = ", ".join(
                f"{k} {spec[k]}" for k in ("minimum", "maximum", "minLength", "maxLength") if k in spec
            )
            lines.append(f"    {name}: {text}" + (f" ({bounds})." if bounds else ""))
    lines += ["", "Returns:", "    The observation, as JSON text."]
    return "\n".join(lines)


def _tool_method(tool: Mapping[str, JSON]) -> Callable[..., str]:
    """One tool as a method whose signature and docstring describe its arguments to TRL, and which
    passes whatever the model sent on to statekit (which judges malformed calls itself)."""
    name = str(tool["name"])
    schema = tool["input_schema"]
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    names = sorted(properties, key=lambda n: (n not in required, n))
    odd = [n for n in names if not n.isidentifier() or keyword.iskeyword(n) or n == "self"]
    if odd:
        raise ValueError(
            f"tool {name!r}: arguments {odd} are not Python parameter names, and TRL calls a tool with "
            "keyword arguments; offer the model other tools (tools=[...]) or rename them in the adapter"
        )

    def method(self: StatekitToolEnv, **arguments: Any) -> str:
        return self._act(name, arguments)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    for arg in names:
        annotations[arg] = _annotation(properties[arg])
        default = inspect.Parameter.empty if arg in required else None
        parameters.append(
            inspect.Parameter(
                arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotations[arg]
            )
        )
    method.__name__ = method.__qualname__ = name
    method.__doc__ = _docstring(tool, names)
    method.__annotations__ = annotations
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    return method


class StatekitToolEnv:
    """One pooled TRL environment: a statekit session reset for each rollout it plays.

    Subclassed per factory with one method per tool (``environment_factory`` builds the class)."""

    def __init__(
        self, factory: EnvironmentFactory, env: Environment | RemoteEnvironment | None = None
    ) -> None:
        self._factory = factory
        self._env = env
        self.info: dict[str, Any] = {}
        self._reward = 0.0
        self._done = False
        self._failure: str | None = None

    def reset(self, **row: Any) -> str:
        """Start the rollout ``row`` asks for (its ``seed`` and optional ``options``); the task and the
        first observation are appended to the prompt."""
        seed, options = episode_of(row)
        self._reward, self._done, self._failure = 0.0, False, None
        self.info = {"seed": seed, "options": options, "initial_digest": None, "steps": []}
        try:
            observation, info = self._start(seed, options)
        except UNSERVED as exc:  # scored None, not 0; TRL's loop goes on
            self._failure = f"reset(seed={seed}) could not be served: {type(exc).__name__}: {exc}"
            log.error("rollout seed=%s: %s", seed, self._failure)
            return as_text({"error": {"code": "environment_unavailable", "message": self._failure}})
        digest = str(info["digest"])
        group = self._factory.group_digest(seed, options, digest)
        self.info["initial_digest"] = digest
        if group != digest:  # statekit broke its contract: stop the run, whatever it costs
            raise InfrastructureFailure(
                f"rollout of seed {seed} started from digest {digest[:12]}, its group from {group[:12]}: "
                "a GRPO group must share one world"
            )
        log.info("rollout seed=%s initial_digest=%s", seed, digest[:16])
        return as_text(observation)

    def _start(self, seed: int, options: dict[str, JSON] | None) -> tuple[JSON, dict[str, Any]]:
        """Reset this instance's session, or a new one if it failed (a restarted server, a lost
        worker): once, so a dead environment costs one connection attempt per rollout."""
        if self._env is not None:
            try:
                return self._env.reset(seed=seed, options=options)
            except UNSERVED:
                self._close()
        self._env = self._factory.connect()
        return self._env.reset(seed=seed, options=options)

    def _close(self) -> None:
        """Let the session go: a failed one (the next rollout connects again), or at the end (private:
        TRL would offer any public method to the model as a tool)."""
        env, self._env = self._env, None
        if env is not None:
            close_quietly(env)

    def get_reward(self) -> float | None:
        """The rollout's verified reward, or ``None`` (unscorable) if the environment failed it."""
        reward = None if self._failure else self._reward
        self.info["reward"] = reward
        self.info["failure"] = self._failure
        self._factory.rollouts.append(dict(self.info))
        log.info(
            "rollout seed=%s initial_digest=%s reward=%s%s",
            self.info.get("seed"),
            str(self.info.get("initial_digest", ""))[:16],
            reward,
            f" failure={self._failure}" if self._failure else "",
        )
        return reward

    def _act(self, tool: str, arguments: dict[str, Any]) -> str:
        if not self.info:
            raise InfrastructureFailure("a tool was called before reset(): TRL resets each rollout first")
        if self._failure or self._env is None:
            raise InfrastructureFailure(f"this rollout's environment failed: {self._failure}")
        if self._done:
            return as_text({"error": {"code": "episode_over", "message": "the episode has ended"}})
        action = {k: v for k, v in arguments.items() if v is not None}
        action["tool"] = tool
        try:
            observation, reward, terminated, truncated, info = self._env.step(action)
        except UNSERVED as exc:
            self._failure = f"{type(exc).__name__}: {exc}"
            self._close()
            raise InfrastructureFailure(f"step {tool!r} could not be served: {exc}") from exc
        if (error := environment_failure(info)) is not None:  # the environment, not the model, failed it
            self._failure = as_text(error)
            raise InfrastructureFailure(f"step {tool!r} failed in the environment: {self._failure}")
        self._reward += reward
        self._done = terminated or truncated
        self.info["steps"].append(
            {"action": action, "reward": reward, "terminated": terminated, "truncated": truncated}
        )
        return as_text(observation)


class EnvironmentFactory:
    """TRL's ``environment_factory``: each call makes one pooled environment (picklable config only)."""

    def __init__(
        self,
        adapter: str | None = None,
        *,
        url: str | None = None,
        token: str | None = None,
        probe_seed: int = 0,
        probe_options: dict[str, JSON] | None = None,
        tools: Sequence[str] | None = None,
        **make_options: Any,
    ) -> None:
        self.adapter, self.url, self.token = adapter, url, token
        self.probe_seed, self.probe_options = probe_seed, probe_options
        self.tools = tuple(tools) if tools is not None else None
        self.make_options = make_options
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._lock = threading.Lock()
        self._class: type[StatekitToolEnv] | None = None
        self._spare: Environment | RemoteEnvironment | None = None
        self._groups: dict[str, str] = {}
        self.rollouts: list[dict[str, Any]] = []
        """Each scored rollout's info (seed, initial digest, steps, reward, failure), in this process."""

    def __getstate__(self) -> dict[str, Any]:
        return {
            k: getattr(self, k)
            for k in ("adapter", "url", "token", "probe_seed", "probe_options", "tools", "make_options")
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def connect(self) -> Environment | RemoteEnvironment:
        """A new environment (a new session, if served) configured as this factory says."""
        return connect(self.adapter, url=self.url, token=self.token, **self.make_options)

    def environment_class(self) -> type[StatekitToolEnv]:
        """The class whose methods are this environment's tools (one probe reset the first time)."""
        with self._lock:
            if self._class is None:
                env = self.connect()
                try:
                    env.reset(seed=self.probe_seed, options=self.probe_options)
                    tools = self._offered(env.tools)
                    methods = {str(t["name"]): _tool_method(t) for t in tools}
                except BaseException:
                    env.close()
                    raise
                name = f"Statekit_{(self.adapter or 'served').rsplit(':', 1)[-1].rsplit('.', 1)[-1]}"
                self._class = type(name, (StatekitToolEnv,), {**methods, "__module__": __name__})
                self._spare = env  # the probe's session plays the first instance's rollouts
            return self._class

    def _offered(self, tools: list[dict[str, JSON]]) -> list[dict[str, JSON]]:
        """The tools the model is offered: ``self.tools`` of the environment's, none named like TRL's
        own methods."""
        if self.tools is not None:
            offered = {str(t["name"]) for t in tools}
            unknown = sorted(set(self.tools) - offered)
            if unknown:
                raise ValueError(f"tools {unknown} are not offered; the environment's: {sorted(offered)}")
            tools = [t for t in tools if t["name"] in self.tools]
        clashes = sorted(
            str(t["name"]) for t in tools if t["name"] in RESERVED or str(t["name"]).startswith("_")
        )
        if clashes:
            raise ValueError(f"tools {clashes} clash with TRL's environment methods")
        return tools

    def group_digest(self, seed: int, options: Mapping[str, JSON] | None, digest: str) -> str:
        """The initial digest of (seed, options)'s group: the first rollout's, remembered."""
        key = json.dumps([seed, options], sort_keys=True)
        with self._lock:
            return self._groups.setdefault(key, digest)

    def __call__(self) -> StatekitToolEnv:
        cls = self.environment_class()
        with self._lock:
            env, self._spare = self._spare, None
        return cls(self, env)


def environment_factory(
    adapter: str | None = None,
    *,
    url: str | None = None,
    token: str | None = None,
    tools: Sequence[str] | None = None,
    **make_options: Any,
) -> EnvironmentFactory:
    """The callable to pass as ``GRPOTrainer(environment_factory=...)``: statekit worlds of ``adapter``
    made in the trainer's process (``make_options``: any ``EnvSpec`` field), or sessions of the
    ``statekit serve`` at ``url``. ``tools`` offers the model only those (default: all)."""
    return EnvironmentFactory(adapter, url=url, token=token, tools=tools, **make_options)


__all__ = ["EnvironmentFactory", "InfrastructureFailure", "StatekitToolEnv", "environment_factory"]
