"""SkyRL (``skyrl-gym``): a statekit world as a ``BaseTextEnv``, registered as ``"statekit"``.

SkyRL makes one environment per trajectory, ``skyrl_gym.make(env_class, env_config=..., extras=row)``,
calls ``init(prompt)`` and then ``step(text)`` with each model turn until ``done``. Here ``env_config``
says which world (``adapter`` and ``make`` options, or ``url``/``token`` of a ``statekit serve``) and
the dataset row's ``extras`` say which episode: ``seed`` (required: a rollout with no seed is not
reproducible), ``options`` (e.g. ``{"task": KIND}``), ``max_turns``. The model calls one tool per turn
as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (``statekit.integrations.parse_tool_call``);
text without a readable call is a step with an error observation, never a crash. A reset or step the
environment cannot serve raises, so SkyRL counts a failed trajectory, never a reward of 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skyrl_gym import register
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput, ConversationType

from statekit.integrations import as_text, connect, episode_of, instructions, parse_tool_call

ENV_ID = "statekit"


class StatekitTextEnv(BaseTextEnv):
    """One trajectory in a statekit world (``env_config``: the world; ``extras``: the episode)."""

    def __init__(self, env_config: Mapping[str, Any] | None = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        config, extras = dict(env_config or {}), dict(extras or {})
        self.seed, self.options = episode_of(extras)
        self.max_turns = int(extras.get("max_turns", config.pop("max_turns", 30)))
        self.env = connect(config.pop("adapter", None), **config)
        self.initial_digest = ""
        self.total_reward = 0.0

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        """Reset to the seed's world; the first observation (the task) and the tools follow ``prompt``."""
        try:
            observation, info = self.env.reset(seed=self.seed, options=self.options)
        except BaseException:
            self.env.close()  # SkyRL may never call close() on an environment whose init failed
            raise
        self.initial_digest = str(info["digest"])
        tools = self.env.tools
        conversation = [
            *prompt,
            {"role": "user", "content": f"{instructions(tools)}\n\nObservation: {as_text(observation)}"},
        ]
        return conversation, {"seed": self.seed, "initial_digest": self.initial_digest, "tools": tools}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One model turn: its tool call is one statekit step; ``done`` when the episode ends or the
        turns run out (``metadata`` keeps statekit's ``terminated``/``truncated`` apart)."""
        self.turns += 1
        observation, reward, terminated, truncated, info = self.env.step(parse_tool_call(action))
        self.total_reward += reward
        out_of_turns = self.turns >= self.max_turns and not (terminated or truncated)
        return BaseTextEnvStepOutput(
            observations=[{"role": "user", "content": f"Observation: {as_text(observation)}"}],
            reward=reward,
            done=terminated or truncated or out_of_turns,
            metadata={
                "terminated": terminated,
                "truncated": truncated or out_of_turns,
                "seed": self.seed,
                "initial_digest": self.initial_digest,
                "info": info,
            },
            postprocessed_action=None,
        )

    def get_metrics(self) -> dict[str, Any]:
        return {"reward": self.total_reward, "turns": self.turns, "initial_digest": self.initial_digest}

    def close(self) -> None:
        self.env.close()


register(id=ENV_ID, entry_point=f"{__name__}:StatekitTextEnv")
