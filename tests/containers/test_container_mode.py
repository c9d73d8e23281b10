"""Container mode is generic: a second adapter (the in-memory ledger) runs through the same path as
the claims app, with the same digests, observations and rewards as its in-process strategy."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

import statekit
from statekit.checks import rollout
from statekit.container_mode import ContainerAdapter, serve_command
from statekit.kit import ContainerImage
from statekit.strategies.container import ContainerPerEpisode
from statekit.testing.ledger import LedgerAdapter
from statekit_examples.adapters.claims_app.image import ensure_image

pytestmark = pytest.mark.docker
SERVED = "statekit.testing.ledger:LedgerAdapter"


def ledger_image(client: Any) -> str:
    """A one-layer image on the claims image (which carries statekit and its runtime dependencies)
    whose entrypoint serves the ledger instead."""
    base = ensure_image(client)
    dockerfile = f"FROM {base}\nENTRYPOINT {json.dumps(serve_command(SERVED))}\n"
    tag = "statekit/ledger-env:" + hashlib.sha256(dockerfile.encode()).hexdigest()[:16]
    image, _ = client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True)
    return str(image.id)


class ContainedLedger(LedgerAdapter, ContainerImage):
    """The ledger, offering container mode: nothing else of it changes."""

    strategies = ("memory", "container")

    def container_image(self, client: Any) -> str:
        return ledger_image(client)


@pytest.fixture(scope="module")
def container_env() -> Iterator[statekit.Environment]:
    with statekit.make(ContainedLedger, strategy="container") as env:
        yield env


def test_a_second_adapter_gives_the_same_rollout_in_a_container(container_env: statekit.Environment) -> None:
    with statekit.make(ContainedLedger, strategy="memory") as local:
        local.reset(seed=3)
        script = local.adapter.reference_actions(local.task)
        expected = rollout(local, seed=3, actions=script)
        expected_dump = local.dump()
    got = rollout(container_env, seed=3, actions=script)
    assert got == expected, "digests, observations and rewards match the in-process strategy"
    assert got.rewards[-1] == 1.0
    assert container_env.dump() == expected_dump, "rows come back through the harness inside"


def test_the_generic_path_serves_it(container_env: statekit.Environment) -> None:
    _, info = container_env.reset(seed=3)
    adapter, strategy = container_env.adapter, container_env.strategy
    assert isinstance(adapter, ContainerAdapter) and isinstance(adapter.inner, ContainedLedger)
    assert isinstance(strategy, ContainerPerEpisode)
    assert info["metadata"]["image"] == strategy.image_id == adapter.fingerprint()["image"]
    attrs = container_env.world.handle.attrs
    assert attrs["HostConfig"]["NetworkMode"] == "none"
    assert attrs["Config"]["Entrypoint"] == serve_command(SERVED)


def test_what_stays_inside_is_a_clear_error(container_env: statekit.Environment) -> None:
    container_env.reset(seed=3)
    with pytest.raises(statekit.ConfigError, match=r"need an in-process strategy of 'ledger' \['memory'\]"):
        container_env.restore(container_env.snapshot())
    with pytest.raises(
        statekit.ConfigError,
        match="runs inside its container, where its determinism controls cannot be switched off",
    ):
        statekit.make(ContainedLedger, strategy="container", disable_controls=("ids",))
