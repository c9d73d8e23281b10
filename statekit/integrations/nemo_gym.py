"""NeMo Gym (``nemo-gym`` 0.4, Python >= 3.12): a statekit world as a resources server.

NeMo Gym's agents play a dataset row against a resources server: ``POST /seed_session`` with the
row, one ``POST /<tool>`` per tool call (the model's arguments as the body; a cookie session ties
the calls of one rollout together), then ``POST /verify`` with the row and the model's response,
which answers the reward. Here:

- ``/seed_session`` restores the world of the row's ``seed`` (required: a rollout that cannot be
  replayed or compared with its group is refused, 422), with the row's ``options``, in a statekit
  session of its own, and answers the initial digest, the first observation and the tools;
- each tool route is one statekit step; it answers the observation, the reward, ``terminated`` and
  ``truncated``. A malformed call is statekit's error observation (200), a call before
  ``/seed_session`` or after the episode ended a 409, an environment that could not serve the step a 503;
- ``/verify`` answers statekit's reward (the steps' rewards: the verifier's score at termination,
  collateral rule included), the verdict, both digests and how the episode ended, and closes the
  session. A rollout whose environment failed gets a 503, never a reward of 0.

The tools (one route each) are learnt from one probe reset when the server starts. The worlds are
made in the server's process (``adapter`` and ``make_options``) or are sessions of a ``statekit
serve`` (``url``, ``token``). Run it as NeMo Gym runs a resources server (its config names this
class) or alone: ``python -m statekit.integrations.nemo_gym --url http://127.0.0.1:8000``.
"""

from __future__ import annotations

import argparse
import logging
from typing import Annotated, Any

import uvicorn
from fastapi import Body, FastAPI, HTTPException, Request
from nemo_gym.base_resources_server import (
    BaseResourcesServerConfig,
    BaseSeedSessionRequest,
    BaseSeedSessionResponse,
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
)
from nemo_gym.config_types import BaseServerConfig
from nemo_gym.server_utils import SESSION_ID_KEY, ServerClient
from omegaconf import OmegaConf
from pydantic import ConfigDict, Field, PrivateAttr
from starlette.concurrency import run_in_threadpool

from statekit.client import RemoteEnvironment
from statekit.contract import JSON
from statekit.env import Environment
from statekit.integrations import UNSERVED, close_quietly, connect, environment_failure, episode_of

log = logging.getLogger(__name__)

RESERVED = frozenset({"seed_session", "verify", "aggregate_metrics"})
"""NeMo Gym's own routes on a resources server: no tool may take their names."""


def unserved(why: str) -> HTTPException:
    """A 503 for a rollout the environment failed, logged: the agent's client sees only a status."""
    log.warning("503: %s", why)
    return HTTPException(503, why)


class StatekitResourcesServerConfig(BaseResourcesServerConfig):
    adapter: str | None = None
    """The adapter whose worlds are made in this process (or ``url``)."""
    url: str | None = None
    """A ``statekit serve`` whose sessions play the rollouts."""
    token: str | None = None
    make_options: dict[str, Any] = Field(default_factory=dict)
    probe_seed: int = 0


class StatekitSeedSessionRequest(BaseSeedSessionRequest):
    model_config = ConfigDict(extra="allow")  # the whole dataset row arrives
    seed: int | None = None
    options: dict[str, Any] | None = None


class StatekitSeedSessionResponse(BaseSeedSessionResponse):
    seed: int
    initial_digest: str
    observation: Any
    tools: list[dict[str, Any]]


class StatekitVerifyRequest(BaseVerifyRequest):
    model_config = ConfigDict(extra="allow")


class StatekitVerifyResponse(BaseVerifyResponse):
    seed: int
    initial_digest: str
    final_digest: str
    terminated: bool
    truncated: bool
    verdict: dict[str, Any] | None
    step_rewards: list[float]


class _Rollout:
    """One cookie session's episode."""

    def __init__(self, env: Environment | RemoteEnvironment, seed: int, digest: str) -> None:
        self.env, self.seed, self.initial_digest = env, seed, digest
        self.rewards: list[float] = []
        self.terminated = self.truncated = False
        self.verdict: dict[str, Any] | None = None
        self.failure: str | None = None


class StatekitResourcesServer(SimpleResourcesServer):
    config: StatekitResourcesServerConfig
    _rollouts: dict[str, _Rollout] = PrivateAttr(default_factory=dict)

    def setup_webserver(self) -> FastAPI:
        app = super().setup_webserver()
        for tool in self._probe_tools():
            app.post(f"/{tool['name']}", description=str(tool["description"]))(
                self._tool_route(str(tool["name"]))
            )
        return app

    def _connect(self) -> Environment | RemoteEnvironment:
        config = self.config
        return connect(config.adapter, url=config.url, token=config.token, **config.make_options)

    def _probe_tools(self) -> list[dict[str, JSON]]:
        env = self._connect()
        try:
            env.reset(seed=self.config.probe_seed)
            tools = env.tools
        finally:
            env.close()
        clashes = sorted(str(t["name"]) for t in tools if t["name"] in RESERVED)
        if clashes:
            raise ValueError(f"tools {clashes} would shadow NeMo Gym's own routes {sorted(RESERVED)}")
        return tools

    async def seed_session(
        self, request: Request, body: StatekitSeedSessionRequest
    ) -> StatekitSeedSessionResponse:
        try:
            seed, options = episode_of({"seed": body.seed, "options": body.options})
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from exc
        key = request.session[SESSION_ID_KEY]
        if (old := self._rollouts.pop(key, None)) is not None:
            await run_in_threadpool(close_quietly, old.env)
        env: Environment | RemoteEnvironment | None = None
        try:
            env = await run_in_threadpool(self._connect)
            observation, info = await run_in_threadpool(env.reset, seed=seed, options=options)
        except UNSERVED as exc:
            if env is not None:  # nothing half-made stays behind: a world made here, a served session
                await run_in_threadpool(close_quietly, env)
            raise unserved(f"reset(seed={seed}) could not be served: {exc}") from exc
        self._rollouts[key] = _Rollout(env, seed, str(info["digest"]))
        return StatekitSeedSessionResponse(
            seed=seed, initial_digest=str(info["digest"]), observation=observation, tools=env.tools
        )

    def _tool_route(self, tool: str) -> Any:
        async def call(
            request: Request, arguments: Annotated[dict[str, Any] | None, Body()] = None
        ) -> dict[str, Any]:
            rollout = self._rollouts.get(request.session[SESSION_ID_KEY])
            if rollout is None:
                raise HTTPException(409, "no episode in this session: POST /seed_session first")
            if rollout.failure:
                raise unserved(f"this rollout's environment failed: {rollout.failure}")
            if rollout.terminated or rollout.truncated:
                raise HTTPException(409, "the episode has ended: POST /verify")
            try:
                step = await run_in_threadpool(rollout.env.step, {**(arguments or {}), "tool": tool})
            except UNSERVED as exc:
                rollout.failure = f"{type(exc).__name__}: {exc}"
                raise unserved(f"step {tool!r} could not be served: {exc}") from exc
            observation, reward, terminated, truncated, info = step
            if (error := environment_failure(info)) is not None:  # the environment, not the model, failed it
                rollout.failure = str(error)
                raise unserved(f"step {tool!r} failed in the environment: {error}")
            rollout.rewards.append(reward)
            rollout.terminated, rollout.truncated = terminated, truncated
            rollout.verdict = info.get("verdict") or rollout.verdict
            return {
                "observation": observation,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
            }

        call.__name__ = tool
        return call

    async def verify(self, request: Request, body: StatekitVerifyRequest) -> StatekitVerifyResponse:
        rollout = self._rollouts.pop(request.session[SESSION_ID_KEY], None)
        if rollout is None:
            raise HTTPException(409, "no episode in this session: POST /seed_session first")
        try:
            if rollout.failure:
                raise unserved(f"the rollout's environment failed, it has no reward: {rollout.failure}")
            try:
                final = (await run_in_threadpool(rollout.env.state)).digest
            except UNSERVED as exc:
                raise unserved(f"the rollout's world could not be read: {exc}") from exc
        finally:
            await run_in_threadpool(close_quietly, rollout.env)
        outcome = {
            "reward": sum(rollout.rewards),
            "seed": rollout.seed,
            "initial_digest": rollout.initial_digest,
            "final_digest": final,
            "terminated": rollout.terminated,
            "truncated": rollout.truncated,
            "verdict": rollout.verdict,
            "step_rewards": rollout.rewards,
        }
        return StatekitVerifyResponse(**(body.model_dump() | outcome))  # the row's own seed is overridden


def app(config: StatekitResourcesServerConfig) -> FastAPI:
    """The resources server's app outside NeMo Gym's launcher (no head server: nothing to query)."""
    server = StatekitResourcesServer(
        config=config,
        server_client=ServerClient(
            head_server_config=BaseServerConfig(host=config.host, port=config.port),
            global_config_dict=OmegaConf.create({}),
        ),
    )
    web = server.setup_webserver()
    server.setup_liveness(web)
    return web


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="a statekit world as a NeMo Gym resources server")
    parser.add_argument("--adapter", help="make worlds in this process (or --url)")
    parser.add_argument("--url", help="a statekit serve")
    parser.add_argument("--token")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8010)
    args = parser.parse_args(argv)
    config = StatekitResourcesServerConfig(
        name="statekit", host=args.host, port=args.port, entrypoint="statekit.integrations.nemo_gym",
        adapter=args.adapter, url=args.url, token=args.token,
    )  # fmt: skip
    uvicorn.run(app(config), host=args.host, port=args.port)


if __name__ == "__main__":
    main()

__all__ = ["StatekitResourcesServer", "StatekitResourcesServerConfig", "app", "main"]
