"""statekit worlds inside the rollout loops RL trainers run: one module per framework.

Each is a thin layer over the public API (``statekit.make``, ``RemoteEnvironment``) and works for any
adapter, in-process or against ``statekit serve`` (so a trainer's process need not host PostgreSQL):

- ``statekit.integrations.skyrl``: a ``skyrl_gym`` text environment, registered as ``"statekit"``;
- ``statekit.integrations.trl``: TRL ``GRPOTrainer``'s ``environment_factory``;
- ``statekit.integrations.verifiers``: a verifiers taskset (``vf-eval statekit-verifiers``);
- ``statekit.integrations.nemo_gym``: a NeMo Gym resources server.

What they share lives here: reading the episode a dataset row asks for (``episode_of``), opening the
environment a rollout plays (``connect``), telling a model how to act (``instructions``), reading the
tool call out of its text (``parse_tool_call``), and telling an environment that failed from a model
that did (``UNSERVED``, ``environment_failure``, ``close_quietly``).
"""

from __future__ import annotations

import json
import numbers
import re
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from statekit.client import RemoteEnvironment
from statekit.contract import JSON
from statekit.env import Environment
from statekit.errors import StatekitError
from statekit.make import make

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
"""The tool-call markup of Hermes-style chat templates (Qwen 2.5/3, Hermes, many others); a stop string
may have cut the closing tag."""


UNSERVED = (StatekitError, OSError)
"""What a reset or step the environment could not serve raises (statekit's errors, a transport's): an
infrastructure failure, which says nothing about the model."""


def episode_of(row: Mapping[str, Any]) -> tuple[int, dict[str, JSON] | None]:
    """The episode a dataset row asks for: its integer ``seed`` (required: a rollout without one can be
    neither replayed nor compared with its group) and its optional ``options`` mapping (e.g.
    ``{"task": KIND}``). ``ValueError`` says what is missing and how to add it."""
    seed, options = row.get("seed"), row.get("options")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(
            f"a statekit rollout needs an integer 'seed' column in the dataset row, got {seed!r} "
            f"(columns: {sorted(row)}): add one, e.g. dataset.map(lambda row, i: {{'seed': i}}, "
            "with_indices=True); an episode without one can be neither replayed nor compared with its group"
        )
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(
            f"a statekit rollout's 'options' is a mapping (e.g. {{'task': KIND}}), got {options!r}"
        )
    return int(seed), dict(options) if options is not None else None


def environment_failure(info: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The error of a step the environment failed (``info["error"]``: the application or the verifier
    broke, not the agent), or None. A malformed action is the agent's and is not one."""
    error = info.get("error")
    return error if isinstance(error, Mapping) else None


def close_quietly(env: Environment | RemoteEnvironment) -> None:
    """End a rollout's environment; one whose server is already gone has nothing left to end."""
    with suppress(*UNSERVED):
        env.close()


def connect(
    adapter: str | None = None, *, url: str | None = None, token: str | None = None, **make_options: Any
) -> Environment | RemoteEnvironment:
    """The environment a rollout plays: served at ``url`` (a ``statekit serve``; ``token`` its
    ``STATEKIT_TOKEN``), else made in this process for ``adapter`` with ``make_options`` (any
    ``EnvSpec`` field: strategy, db_url, max_steps, exclude_tasks, ...)."""
    if url is not None:
        if adapter is not None:
            raise TypeError(
                f"adapter={adapter!r} and url={url!r}: a served environment's adapter is the server's"
            )
        if make_options:
            raise TypeError(
                f"{sorted(make_options)} configure an environment made here; a served one was configured by "
                "statekit serve"
            )
        return RemoteEnvironment(url, token=token)
    if adapter is None:
        raise TypeError("say which environment: adapter=NAME (made here) or url=URL (a statekit serve)")
    return make(adapter, **make_options)


def as_text(value: JSON) -> str:
    """An observation as the model reads it: JSON with sorted keys."""
    return json.dumps(value, sort_keys=True)


def instructions(tools: list[dict[str, JSON]]) -> str:
    """How the model acts: the tools' names, descriptions and argument schemas, and the call format."""
    listed = "\n".join(
        f"- {t['name']}: {t['description']} Arguments (JSON Schema): {as_text(t['input_schema'])}"
        for t in tools
    )
    return (
        f"You act in this environment by calling one tool per turn.\nTools:\n{listed}\n"
        'Call a tool as <tool_call>{"name": TOOL, "arguments": {...}}</tool_call>.'
    )


def parse_tool_call(text: str) -> dict[str, JSON]:
    """The action a model's text asks for: the last ``<tool_call>{"name", "arguments"}</tool_call>``
    (or a bare JSON object, ``{"name", "arguments"}`` or statekit's ``{"tool", ...}``), as statekit's
    ``{"tool": NAME, **arguments}``. Text with no readable call becomes ``{}``: the environment answers
    it with its malformed-action error observation, and the step counts, as any bad action does."""
    calls = TOOL_CALL.findall(text)
    candidate = calls[-1] if calls else text.strip()
    try:
        call = json.loads(candidate)
    except ValueError:
        return {}
    if not isinstance(call, Mapping):
        return {}
    if isinstance(call.get("tool"), str):  # statekit's own form (whose arguments may include a "name")
        return dict(call)
    if isinstance(call.get("name"), str):
        arguments = call.get("arguments") or {}
        if isinstance(arguments, str):  # OpenAI's wire format carries arguments as JSON text
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return {}
        if not isinstance(arguments, Mapping):
            return {}
        return {**arguments, "tool": call["name"]}
    return {}


__all__ = [
    "TOOL_CALL",
    "UNSERVED",
    "as_text",
    "close_quietly",
    "connect",
    "environment_failure",
    "episode_of",
    "instructions",
    "parse_tool_call",
]
