"""verifiers (Prime Intellect's environment framework, 0.4): statekit worlds as a native taskset.

    vf-eval statekit-verifiers @ eval.toml

with ``[env.taskset] url = "http://127.0.0.1:8000"`` (a ``statekit serve``), ``seeds = [1, 2]`` and
optionally ``token``, ``options`` (e.g. ``{task = "file_new_claim"}``), ``max_turns``. One task per
seed; every rollout of a task starts from that seed's world (a GRPO group: ``num_rollouts``).

verifiers' own OpenEnv taskset already plays ``statekit serve`` (``[env.taskset] id = "openenv"``),
but keeps only the summed reward. This one tells the model the tools (names, descriptions, argument
schemas) and the ``<tool_call>`` format, reads its reply with ``statekit.integrations.parse_tool_call``
(a reply with no readable call is a step answered with an error observation), and records on each
trace what statekit knows: the reward as ``statekit_reward``, and in ``trace.info["statekit"]`` the
seed, the initial and final digests, ``terminated`` vs ``truncated``, the steps' rewards and the
verifier's verdict. A reset or step the server could not serve (or that the environment failed:
``info["error"]``) raises, which verifiers records as the rollout's error (``EnvError``), never as a
reward of 0.

verifiers pins ``mcp==2.0.0``, which statekit's dev tools cannot share a venv with: this module runs
where verifiers is installed (``scripts/venv-verifiers.sh`` builds one) and reaches statekit over HTTP.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from statekit.client import RemoteEnvironment
from statekit.contract import JSON
from statekit.integrations import as_text, close_quietly, environment_failure, instructions, parse_tool_call


class StatekitData(vf.TaskData):
    url: str
    seed: int
    options: dict[str, Any] | None
    max_turns: int


class StatekitConfig(vf.TasksetConfig):
    url: str
    """A ``statekit serve`` (its base URL)."""
    token: str | None = None
    """The serve's ``STATEKIT_TOKEN``, if it has one (default: this process's ``STATEKIT_TOKEN``). Kept
    out of the tasks: verifiers writes a task's data into every trace."""
    seeds: list[int] = Field(default_factory=lambda: [0])
    """One task per seed."""
    options: dict[str, Any] | None = None
    """``reset`` options for every task (e.g. ``{"task": KIND}``)."""
    max_turns: int = 30
    """Model turns before the rollout stops (statekit's own step cap may stop it sooner)."""


class StatekitTask(vf.Task[StatekitData]):
    pass


class StatekitTaskset(vf.Taskset[StatekitTask, StatekitConfig]):
    def load(self) -> Iterator[StatekitTask]:
        config = self.config
        for seed in config.seeds:
            data = StatekitData(
                name=f"seed {seed}",
                url=config.url,
                seed=seed,
                options=config.options,
                max_turns=config.max_turns,
            )
            yield StatekitTask(data, config.task)


class StatekitEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig()


class StatekitEnv(vf.Env[StatekitEnvConfig]):
    """The model plays one statekit episode; the engine relays observations and tool calls."""

    async def run(self, task: StatekitTask, agents: Any) -> None:
        data = task.data
        token = self.taskset.config.token or os.environ.get("STATEKIT_TOKEN")
        env = RemoteEnvironment(data.url, token=token)
        try:
            await self._play(env, data, agents, task)
        finally:  # a server already gone: the rollout's own error stands
            await asyncio.to_thread(close_quietly, env)

    async def _play(
        self, env: RemoteEnvironment, data: StatekitData, agents: Any, task: StatekitTask
    ) -> None:
        observation, info = await asyncio.to_thread(env.reset, seed=data.seed, options=data.options)
        record: dict[str, JSON] = {
            "seed": data.seed,
            "initial_digest": info["digest"],
            "rewards": [],
            "terminated": False,
            "truncated": False,
            "verdict": None,
        }
        total, turns = 0.0, 0
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn(
                f"{instructions(env.tools)}\n\nObservation: {as_text(observation)}"
            )
            while not segment.terminated:
                action = parse_tool_call(segment.last_reply)
                observation, reward, terminated, truncated, info = await asyncio.to_thread(env.step, action)
                if (error := environment_failure(info)) is not None:  # the environment failed, not the model
                    raise RuntimeError(f"the environment failed step {turns + 1}: {error}")
                turns += 1
                total += reward
                record["rewards"].append(reward)
                record.update(terminated=terminated, truncated=truncated, verdict=info.get("verdict"))
                if terminated or truncated:
                    break
                if turns >= data.max_turns:
                    interaction.trace.stop("max_turns")
                    break
                segment = await interaction.turn(f"Observation: {as_text(observation)}")
        record["final_digest"] = (await asyncio.to_thread(env.state)).digest
        interaction.trace.info["statekit"] = record
        interaction.trace.record_reward("statekit_reward", total)


__all__ = [
    "StatekitConfig",
    "StatekitData",
    "StatekitEnv",
    "StatekitEnvConfig",
    "StatekitTask",
    "StatekitTaskset",
]
