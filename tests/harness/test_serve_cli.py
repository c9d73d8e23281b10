"""``statekit serve`` refuses bad configuration up front, with exit status 2 and a message."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import httpx
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from websockets.asyncio.client import connect

from statekit.postgres import PostgresServer
from statekit.settings import statekit_home
from statekit.strategies.cow_fs import mounts_under
from statekit.strategies.naming import CopyNamer, snapshot_owner

from .helpers import LEDGER

STATEKIT = str(Path(sys.executable).with_name("statekit"))


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [STATEKIT, "serve", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_an_unknown_adapter_fails_before_listening() -> None:
    result = _serve("no_such_app", "--port", "0")
    assert result.returncode == 2
    assert "unknown adapter 'no_such_app'" in result.stderr and "claims_app" in result.stderr


def test_an_unknown_strategy_fails_before_listening() -> None:
    result = _serve(LEDGER, "--strategy", "template", "--port", "0")
    assert result.returncode == 2 and "offers strategies ['memory', 'rewind']" in result.stderr


def test_a_busy_port_says_to_pick_another() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = _serve(LEDGER, "--port", str(busy.getsockname()[1]))
    assert result.returncode == 2 and "pick another --port" in result.stderr


def test_bad_limits_are_refused() -> None:
    result = _serve(LEDGER, "--max-sessions", "0", "--port", "0")
    assert result.returncode == 2 and "max_sessions must be at least 1" in result.stderr


def _default_install() -> set[str]:
    """Distributions ``pip install statekit`` brings (no extras), from the installed metadata."""
    wanted: set[str] = set()
    stack: list[tuple[str, frozenset[str]]] = [("statekit", frozenset())]
    while stack:
        name, extras = stack.pop()
        try:
            requirements = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        wanted.add(canonicalize_name(name))
        for text in requirements:
            requirement = Requirement(text)
            marker = requirement.marker
            applies = marker is None or any(marker.evaluate({"extra": e}) for e in (*extras, ""))
            if applies and canonicalize_name(requirement.name) not in wanted:
                stack.append((requirement.name, frozenset(requirement.extras)))
    return wanted


_ONLY_DEFAULT_INSTALL = """
import sys
BLOCKED = set(sys.argv[1].split(","))
class DefaultInstallOnly:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not in statekit's default install)")
sys.meta_path.insert(0, DefaultInstallOnly())
from statekit.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_ws_answers_with_nothing_but_the_default_install() -> None:
    """uvicorn without a WebSocket library answers /ws with 404; the default install must bring one."""
    wanted = _default_install()
    blocked = sorted(
        module
        for module, owners in metadata.packages_distributions().items()
        if module.isidentifier() and not any(canonicalize_name(o) in wanted for o in owners)
    )
    assert "pytest" in blocked and "openenv" in blocked, "the dev extras are hidden from the server"
    proc = subprocess.Popen(
        [sys.executable, "-c", _ONLY_DEFAULT_INSTALL, ",".join(blocked), "serve", LEDGER, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "STATEKIT_TOKEN"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert " at http://" in line, line + proc.stdout.read()
        url = line.split(" at ", 1)[1].split()[0]

        async def reset_over_ws() -> dict[str, object]:
            async with connect(url.replace("http://", "ws://") + "/ws") as socket:
                await socket.send('{"type": "reset", "data": {"seed": 1}}')
                return dict(json.loads(await socket.recv()))

        assert asyncio.run(reset_over_ws())["type"] == "observation"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_an_empty_token_is_refused_not_taken_for_no_auth() -> None:
    """``export STATEKIT_TOKEN=$(openssl rand -hex 16)`` without openssl must not serve unauthenticated."""
    for env, args in (({"STATEKIT_TOKEN": " "}, ()), ({}, ("--token", ""))):
        result = subprocess.run(
            [STATEKIT, "serve", LEDGER, "--port", "0", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env={**{k: v for k, v in os.environ.items() if k != "STATEKIT_TOKEN"}, **env},
        )
        assert result.returncode == 2, (env, args, result.stdout)
        assert "empty" in result.stderr and "unset" in result.stderr, result.stderr


def test_a_token_sent_in_the_query_string_never_reaches_the_log() -> None:
    secret = "qs-" + os.urandom(8).hex()
    proc = subprocess.Popen(
        [STATEKIT, "serve", LEDGER, "--port", "0", "--token", secret],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split(" at ", 1)[1].split()[0]
        with httpx.Client(timeout=60) as client:  # a loaded machine may take more than httpx's 5 s
            refused = client.get(f"{url}/state", params={"session_id": "x", "token": secret})
            assert refused.status_code == 401
            health = client.get(f"{url}/health", params={"access_token": secret, "api_key": "k"})
            assert health.status_code == 200
            assert client.get(f"{url}/health/{secret}").status_code in (401, 404)
    finally:
        proc.terminate()
        output = line + proc.communicate(timeout=30)[0]
    assert "GET /state?session_id=x&token=[redacted]" in output, output
    assert "access_token=[redacted]&api_key=[redacted]" in output, output
    assert secret not in output, output


_KILLED_MID_EPISODE = """
import json, os, signal, sys
import statekit
env = statekit.make("claims_app", db_url=sys.argv[1], strategy="template")
env.reset(seed=7)
env.snapshot()
env.reset(seed=7)  # the bookmark's world goes (template does not park worlds): the fork becomes a golden
print(json.dumps({"db": env.world.handle["db"].id, "uploads": env.world.handle["uploads"].id}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_server_sweeps_a_killed_processs_leftovers_before_its_first_session(
    pg_url: str, pg_cluster: PostgresServer
) -> None:
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_EPISODE, pg_url], capture_output=True, text=True, timeout=300
    )
    assert killed.returncode == -9, killed.stderr
    left = json.loads(killed.stdout)
    files = statekit_home() / "files" / "claims_app" / "uploads"
    owner = CopyNamer("skclaims").owner_of(left["db"])
    assert owner is not None and owner.pid != os.getpid()
    assert left["db"] in pg_cluster.databases("skclaims_e_") and (files / "copies" / left["uploads"]).exists()
    forks = [name for name in os.listdir(files / "goldens") if snapshot_owner(name) == owner]
    assert forks, "the fork's file golden is left behind"
    proc = subprocess.Popen(
        [STATEKIT, "serve", "claims_app", "--db-url", pg_url, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "STATEKIT_TOKEN"},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split(" at ", 1)[1].split()[0]
        try:
            health = httpx.get(f"{url}/health", timeout=120)
        except httpx.HTTPError as exc:  # the server died starting: its own output says why
            proc.kill()
            raise AssertionError(f"the server did not start: {exc}\n{proc.communicate()[0][-4000:]}") from exc
        assert health.json()["sessions"] == 0
        names = CopyNamer("skclaims")
        assert [name for name in pg_cluster.databases("skclaims_") if names.owner_of(name) == owner] == []
        assert not (files / "copies" / left["uploads"]).exists()
        assert [name for name in os.listdir(files / "goldens") if snapshot_owner(name) == owner] == []
        assert [point for point in mounts_under(files) if left["uploads"] in point] == []
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_bad_world_set_or_cache_budget_is_refused() -> None:
    assert "num_worlds must be at least 1" in _serve(LEDGER, "--num-worlds", "0", "--port", "0").stderr
    result = _serve(LEDGER, "--cache-bytes", "lots", "--port", "0")
    assert result.returncode == 2 and "cannot read 'lots' as a size" in result.stderr
