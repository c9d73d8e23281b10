"""Container mode's generic wrapper, without Docker: who gets wrapped, and the world key."""

from __future__ import annotations

from typing import Any

import pytest

from statekit.capabilities import capability
from statekit.container_mode import ContainerAdapter, adapter_for, offers_container
from statekit.env import world_key
from statekit.errors import ConfigError
from statekit.kit import ContainerImage
from statekit.testing.ledger import LedgerAdapter


class ImagedLedger(LedgerAdapter, ContainerImage):
    strategies = ("memory", "container")

    def container_image(self, client: Any) -> str:
        raise AssertionError("not called without Docker")


def test_only_adapters_with_an_image_are_wrapped_and_only_for_container() -> None:
    plain, imaged = LedgerAdapter(), ImagedLedger()
    assert not offers_container(plain) and offers_container(imaged)
    assert adapter_for(plain, "container") is plain, "an adapter's own 'container' strategy stays its own"
    assert adapter_for(imaged, "memory") is imaged
    wrapped = adapter_for(imaged, "container")
    assert isinstance(wrapped, ContainerAdapter) and wrapped.inner is imaged and wrapped.name == "ledger"
    with pytest.raises(
        ConfigError, match=r"'ledger' has no container image: implement ContainerImage\.container_image"
    ):
        ContainerAdapter(plain)
    with pytest.raises(ConfigError, match="has no ContainerImage capability"):
        capability(plain, ContainerImage)


def test_the_world_key_changes_with_the_image() -> None:
    adapter = ContainerAdapter(ImagedLedger())
    with pytest.raises(ConfigError, match="the image is known once make_strategy"):
        adapter.fingerprint()
    keys = set()
    for image in ("sha256:" + "a" * 64, "sha256:" + "b" * 64):
        adapter.image_id = image
        assert adapter.fingerprint()["image"] == image
        keys.add(world_key(adapter.fingerprint(), 7))
    keys.add(world_key(ImagedLedger().fingerprint(), 7))
    assert len(keys) == 3, "each image, and the in-process adapter, has its own worlds"
