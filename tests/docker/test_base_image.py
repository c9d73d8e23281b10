"""The locally built base image statekit/base:bookworm runs on the local Docker engine.

Needs ``scripts/docker-engine.sh`` then ``scripts/build-base-image.sh`` (no registry
can be reached, so the image is built from the Debian mirror, never pulled). When the
engine or the image is missing these tests fail -- never skip -- naming the script.
Uses the docker SDK directly: nothing here needs testcontainers' Ryuk reaper, and
every container is removed in a ``finally``.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass

import docker
import pytest

pytestmark = pytest.mark.docker

IMAGE = "statekit/base:bookworm"
ENGINE_SCRIPT = "scripts/docker-engine.sh"
IMAGE_SCRIPT = "scripts/build-base-image.sh"


@dataclass
class DockerEnv:
    client: docker.DockerClient | None
    problem: str | None


def _hint(msg: str) -> str:
    where = " (CI=true: .ci/run must call it before pytest)" if os.environ.get("CI") == "true" else ""
    return msg + where


@pytest.fixture(scope="module")
def docker_env() -> DockerEnv:
    # Problems are recorded, not raised here: a failing fixture would show as an
    # error; each test calls _require() so that it FAILS with the message.
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:  # any failure here means "no usable engine"
        return DockerEnv(None, _hint(f"Docker engine not reachable ({exc}); run {ENGINE_SCRIPT} as root"))
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        return DockerEnv(client, _hint(f"image {IMAGE} missing; run {IMAGE_SCRIPT} as root"))
    return DockerEnv(client, None)


def _require(env: DockerEnv) -> docker.DockerClient:
    if env.problem is not None or env.client is None:
        pytest.fail(env.problem or "no Docker client", pytrace=False)
    return env.client


def _run(client: docker.DockerClient, command: list[str], *, network_mode: str = "none") -> tuple[int, str]:
    """Run a container to completion; return (exit code, combined output). Always removed."""
    container = client.containers.create(IMAGE, command=command, network_mode=network_mode)
    try:
        container.start()
        status = container.wait(timeout=120)
        return status["StatusCode"], container.logs().decode()
    finally:
        container.remove(force=True)


# Runs inside the container. Lists the interfaces first and, when GUARD is set,
# refuses to connect if any non-loopback interface exists: a broken isolation
# then shows up as a failed test without a single packet leaving the machine.
PROBE = r"""
import json, socket, sys
targets, guard = json.loads(sys.argv[1]), sys.argv[2] == "guard"
ifaces = sorted(name for _, name in socket.if_nameindex())
results = {}
for host, port in targets:
    key = f"{host}:{port}"
    if guard and set(ifaces) - {"lo"}:
        results[key] = "not attempted: non-loopback interface present"
        continue
    try:
        socket.create_connection((host, port), timeout=2).close()
        results[key] = "connected"
    except OSError as exc:
        results[key] = f"failed: {type(exc).__name__}: {exc}"
print(json.dumps({"ifaces": ifaces, "results": results}))
"""


def _probe(
    client: docker.DockerClient, targets: list[tuple[str, int]], *, network_mode: str, guard: bool
) -> dict:
    code, out = _run(
        client,
        ["python3", "-c", PROBE, json.dumps(targets), "guard" if guard else "noguard"],
        network_mode=network_mode,
    )
    assert code == 0, out
    return json.loads(out.strip().splitlines()[-1])


def _bridge_gateway(client: docker.DockerClient) -> str | None:
    """The host's address on the default docker bridge, if the engine has one."""
    try:
        configs = client.networks.get("bridge").attrs.get("IPAM", {}).get("Config") or []
    except docker.errors.NotFound:
        return None
    return next((c["Gateway"] for c in configs if c.get("Gateway")), None)


def test_python_runs_in_base_image(docker_env: DockerEnv) -> None:
    client = _require(docker_env)
    code, out = _run(client, ["python3", "-c", "import sys; print('statekit-ok', sys.version_info[:2])"])
    assert code == 0, out
    assert out.strip() == "statekit-ok (3, 11)"


def test_postgres_15_binaries_present(docker_env: DockerEnv) -> None:
    client = _require(docker_env)
    # Absolute path proves where it lives; the bare name proves the image PATH has it.
    code, out = _run(
        client, ["sh", "-c", "/usr/lib/postgresql/15/bin/postgres --version && command -v postgres"]
    )
    assert code == 0, out
    version, path = out.strip().splitlines()
    assert version.startswith("postgres (PostgreSQL) 15."), version
    assert path == "/usr/lib/postgresql/15/bin/postgres"


def test_network_none_blocks_outbound(docker_env: DockerEnv) -> None:
    client = _require(docker_env)
    gateway = _bridge_gateway(client)
    listener = None
    targets: list[tuple[str, int]] = [("1.1.1.1", 80)]
    try:
        if gateway is not None:
            # A real listener on the host's bridge address, so a failure below
            # means "isolated", not "nothing listening on that port".
            listener = socket.create_server((gateway, 0))
            gw_target = (gateway, listener.getsockname()[1])
            targets.append(gw_target)
            # Positive control: a bridged container does reach the listener.
            control = _probe(client, [gw_target], network_mode="bridge", guard=False)
            assert control["results"][f"{gateway}:{gw_target[1]}"] == "connected", control

        isolated = _probe(client, targets, network_mode="none", guard=True)
    finally:
        if listener is not None:
            listener.close()

    assert isolated["ifaces"] == ["lo"], isolated
    for target, result in isolated["results"].items():
        assert result.startswith("failed:"), f"{target}: {result}"
