"""The claims environment with one container per episode: same digests as the template strategy."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

import statekit
from statekit.checks import rollout
from statekit.strategies.container import ContainerPerEpisode
from statekit.strategies.prewarmed import Prewarmed

pytestmark = pytest.mark.docker
TASK = {"task": "file_new_claim"}


@pytest.fixture(scope="module")
def reference(pg_url: str) -> tuple[list[dict], object]:
    with statekit.make("claims_app", db_url=pg_url) as env:
        env.reset(seed=7, options=TASK)
        script = env.adapter.reference_actions(env.task)
        return script, rollout(env, seed=7, actions=script, options=TASK)


@pytest.fixture(scope="module")
def container_env() -> Iterator[statekit.Environment]:
    with statekit.make("claims_app", strategy="container", prewarm=1) as env:
        yield env


def test_a_seed_digest_is_the_same_whichever_strategy_served_it(
    reference: tuple[list[dict], object], container_env: statekit.Environment
) -> None:
    script, expected = reference
    got = rollout(container_env, seed=7, actions=script, options=TASK)
    assert got == expected, "digests, observations and rewards match the template strategy"
    assert got.rewards[-1] == 1.0


def test_the_clock_outside_follows_the_world_inside(pg_url: str, container_env: statekit.Environment) -> None:
    """A 48-hour wait moves the world inside the container 48 hours; the environment's clock too."""
    actions = [{"tool": "wait", "hours": 48}, {"tool": "list_claims", "limit": 1}]
    clocks = {}
    with statekit.make("claims_app", db_url=pg_url) as template:
        for name, env in (("template", template), ("container", container_env)):
            _, info = env.reset(seed=7, options=TASK)
            for action in actions:
                *_, step_info = env.step(action)
            clocks[name] = (info["clock"], step_info["clock"], env.state().clock)
    start, after_steps, now = clocks["container"]
    assert clocks["container"] == clocks["template"]
    assert datetime.fromisoformat(now) - datetime.fromisoformat(start) == timedelta(hours=48, minutes=1)
    assert after_steps == now


def test_episode_containers_are_pinned_and_offline(container_env: statekit.Environment) -> None:
    _, info = container_env.reset(seed=7, options=TASK)
    strategy = container_env.strategy
    assert isinstance(strategy, Prewarmed) and isinstance(strategy.inner, ContainerPerEpisode)
    world = container_env.world
    assert world is not None
    config = world.handle.attrs
    assert config["HostConfig"]["NetworkMode"] == "none"
    assert config["Image"].startswith("sha256:"), "started from an image id, never a floating tag"
    assert config["Config"]["Image"].startswith("sha256:")
    assert info["metadata"]["image"] == strategy.inner.image_id, "reset's info records the image digest"
    assert info["strategy"] == "prewarmed(container)"


def test_forks_and_unknown_strategies_are_clear_errors(container_env: statekit.Environment) -> None:
    container_env.reset(seed=7)
    forks = r"forks \(snapshot/restore\) need an in-process strategy of 'claims_app' \['rewind', 'template'\]"
    with pytest.raises(statekit.ConfigError, match=forks):
        container_env.restore(container_env.snapshot())
    with pytest.raises(
        statekit.ConfigError, match=r"offers strategies \['rewind', 'template', 'container'\], not 'vm'"
    ):
        statekit.make("claims_app", strategy="vm")
