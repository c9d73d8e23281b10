"""ContainerPerEpisode against a real Docker engine: the contract suite, isolation, crash cleanup."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from statekit.strategies.base import World
from statekit.strategies.container import (
    GOLDEN_REPO,
    OWNER_LABEL,
    ContainerPerEpisode,
    docker_client,
    exec_in,
)
from statekit.strategies.naming import HOST_TAG, Owner, snapshot_key
from statekit.testing.strategies import STRATEGY_CHECKS, Probe

BASE = "statekit/base:bookworm"
pytestmark = pytest.mark.docker


def _sh(script: str) -> list[str]:
    return ["sh", "-c", script]


PROBE = Probe(
    build=lambda w: exec_in(w, _sh("mkdir -p /data && echo 1 > /data/v")),
    mutate=lambda w: exec_in(w, _sh("echo 2 >> /data/v")),
    read=lambda w: exec_in(w, ["cat", "/data/v"]),
)


@pytest.fixture
def strategy() -> Iterator[ContainerPerEpisode]:
    made = ContainerPerEpisode(BASE, command=["sleep", "infinity"], read_only=False, mem_limit="256m")
    yield made
    made.close()
    made.close()


@pytest.mark.parametrize("check", STRATEGY_CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_contract(check, strategy: ContainerPerEpisode) -> None:  # type: ignore[no-untyped-def]
    check(strategy, PROBE)


def test_containers_have_no_network_and_limits(strategy: ContainerPerEpisode) -> None:
    strategy.capture("netprobe", lambda w: None)
    world = strategy.restore("netprobe")
    try:
        attrs = world.handle.attrs["HostConfig"]
        assert attrs["NetworkMode"] == "none"
        assert attrs["Memory"] == 256 * 2**20 and attrs["PidsLimit"] == 256 and attrs["NanoCpus"] == 10**9
        assert strategy.client.images.get(world.handle.attrs["Image"]).id == world.handle.attrs["Image"]
        interfaces = exec_in(world, ["cat", "/proc/net/dev"])
        assert [line.split(":")[0].strip() for line in interfaces.splitlines()[2:]] == ["lo"]
        probe = (
            "import socket\n"
            "for target in [('1.1.1.1', 80), ('172.17.0.1', 80), ('10.0.0.1', 80)]:\n"
            "    s = socket.socket(); s.settimeout(2)\n"
            "    try:\n"
            "        s.connect(target); print('REACHED', target)\n"
            "    except OSError as exc:\n"
            "        print('blocked', target, exc.errno)\n"
        )
        out = exec_in(world, ["python3", "-c", probe])
        assert "REACHED" not in out and out.count("blocked") == 3
    finally:
        strategy.discard(world)
        strategy.drop("netprobe")


def test_a_killed_controller_leaves_no_containers() -> None:
    code = (
        "import os, signal\n"
        "from statekit.strategies.container import ContainerPerEpisode\n"
        f"s = ContainerPerEpisode({BASE!r}, command=['sleep', 'infinity'])\n"
        "s.capture('crashprobe', lambda w: None)\n"
        "s.restore('crashprobe'); s.restore('crashprobe')\n"
        "print(s.owner, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy())
    assert proc.returncode == -9, proc.stderr
    owner = proc.stdout.strip()
    client = docker_client()
    left = client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner}"})
    assert len(left) == 2, "the killed process left its containers running"
    killed = Owner.from_label(owner)
    assert killed is not None
    sockets = list(Path(tempfile.gettempdir()).glob(f"statekit-containers_e_{killed.tag}_*"))
    assert len(sockets) == 1, "and the directory of their sockets"
    fresh = ContainerPerEpisode(BASE, command=["sleep", "infinity"])
    try:
        assert len([name for name in fresh.swept if name]) >= 3
        assert client.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner}"}) == []
        assert not sockets[0].exists() and str(sockets[0]) in fresh.swept
    finally:
        fresh.drop("crashprobe")
        fresh.close()


def test_the_sweep_keys_containers_and_fork_images_by_pid_and_start_time() -> None:
    """A dead owner's, and a live pid's with another start time (a reused pid), are swept; ours stay."""
    client = docker_client()
    exited = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    me = Owner.current()
    dead, reused = Owner(HOST_TAG, int(exited.stdout), 1), Owner(HOST_TAG, os.getppid(), 1)
    made = {
        who: client.containers.create(BASE, command=["true"], labels={OWNER_LABEL: who.label})
        for who in (dead, reused, me)
    }
    fork_tags = {who: f"{GOLDEN_REPO}:{snapshot_key('sweepprobe', owner=who)}" for who in (dead, me)}
    for tag in fork_tags.values():
        client.images.get(BASE).tag(*tag.split(":"))
    fresh = ContainerPerEpisode(BASE, command=["sleep", "infinity"])
    try:
        left = {c.id for c in client.containers.list(all=True, filters={"label": OWNER_LABEL})}
        assert made[dead].id not in left and made[reused].id not in left
        assert made[me].id in left
        assert fork_tags[dead] in fresh.swept
        assert fork_tags[me] in [t for image in client.images.list(name=GOLDEN_REPO) for t in image.tags]
    finally:
        made[me].remove(force=True)
        client.images.remove(fork_tags[me])
        fresh.close()


def test_world_location_is_a_host_socket_directory(strategy: ContainerPerEpisode) -> None:
    strategy.capture("sockdir", lambda w: None)
    world: World = strategy.restore("sockdir")
    try:
        exec_in(world, _sh("echo hello > /run/statekit/probe"))
        assert (Path(world.location) / "probe").read_text() == "hello\n"
    finally:
        strategy.discard(world)
        strategy.drop("sockdir")
    assert not os.path.exists(world.location)
