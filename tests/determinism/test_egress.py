"""The egress guard, against real sockets: a listener in another process that would answer anyone.

A non-loopback listener cannot be reached from here, so the destination the guard must refuse is a
loopback port that nothing allows; the same connection with the guard switched off proves it would
otherwise succeed.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import statekit
import statekit.kit
from statekit.client import RemoteEnvironment
from statekit.harness import HarnessConfig, create_app
from statekit.servers import ThreadedServer

from .wild_app import WildAdapter

LISTENER = """
import socket
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(8)
print(server.getsockname()[1], flush=True)
while True:
    conn, _ = server.accept()
    print("accepted", flush=True)  # before answering: once a client has read, the count is out
    conn.sendall(b"hello")
    conn.close()
"""


@dataclass
class Listener:
    port: int
    proc: subprocess.Popen[str]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def accepted(self) -> int:
        """Connections it took (stops it: call at the end)."""
        self.proc.kill()
        out, _ = self.proc.communicate(timeout=10)
        return out.count("accepted")


@pytest.fixture
def listener() -> Iterator[Listener]:
    proc = subprocess.Popen([sys.executable, "-c", LISTENER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    found = Listener(int(proc.stdout.readline()), proc)
    yield found
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def send_webhook_between_steps(adapter: WildAdapter, env: statekit.Environment, port: int) -> list[str]:
    """Step: schedule a webhook; between steps: let the daemon thread call out and wait for it."""
    env.step({"tool": "webhook", "host": "127.0.0.1", "port": port})
    adapter.notifier.go.set()
    for thread in adapter.notifier.threads:
        thread.join(15)
    return adapter.notifier.outcomes


def test_a_thread_calling_out_between_steps_is_caught(listener: Listener) -> None:
    adapter = WildAdapter()
    with statekit.make(adapter) as env:
        env.reset(seed=1)
        outcomes = send_webhook_between_steps(adapter, env, listener.port)
        obs, reward, terminated, truncated, info = env.step({"tool": "whoami"})
    assert len(outcomes) == 1 and outcomes[0].startswith("failed: EgressError: statekit refused to connect")
    error = obs["error"]
    assert error["code"] == "egress_blocked"
    assert error["destinations"] == [listener.address]
    assert f"connect {listener.address} (thread 'webhook', between steps)" in error["message"]
    assert obs["response"]["host"] == "statekit", "the step itself went through; the error names the leak"
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert [n["code"] for n in info["determinism"]] == ["egress_blocked"]
    assert listener.accepted() == 0


def test_without_the_egress_control_the_same_webhook_goes_out(listener: Listener) -> None:
    adapter = WildAdapter()
    with statekit.make(adapter, disable_controls=("egress",)) as env:
        env.reset(seed=1)
        outcomes = send_webhook_between_steps(adapter, env, listener.port)
        obs, _, _, _, info = env.step({"tool": "whoami"})
    assert outcomes == ["sent: hello"]
    assert "error" not in obs and "determinism" not in info
    assert listener.accepted() == 1


def test_a_connection_during_a_step_fails_there_and_is_named(listener: Listener) -> None:
    with statekit.make(WildAdapter()) as env:
        env.reset(seed=1)
        obs = env.step({"tool": "fetch", "host": "127.0.0.1", "port": listener.port})[0]
        clean = env.step({"tool": "whoami"})[0]
    assert obs["response"] == {"failed": "EgressError"}
    assert obs["error"]["destinations"] == [listener.address]
    assert "during a controlled call" in obs["error"]["message"]
    assert "error" not in clean, "a refusal is reported once"
    assert listener.accepted() == 0


def test_name_lookups_leave_no_query() -> None:
    with statekit.make(WildAdapter()) as env:
        env.reset(seed=1)
        refused = env.step({"tool": "resolve", "name": "vendors.example.com"})[0]
        local = env.step({"tool": "resolve", "name": "localhost"})[0]
    assert refused["response"] == {"failed": "EgressError"}
    assert refused["error"]["destinations"] == ["vendors.example.com"]
    assert local["addresses"] >= 1


def test_what_the_guard_lets_through(listener: Listener, tmp_path: Path) -> None:
    fetch = {"tool": "fetch", "host": "127.0.0.1", "port": listener.port}
    with statekit.make(WildAdapter(allowed=(f"http://{listener.address}",))) as env:
        env.reset(seed=1)
        assert env.step(fetch)[0] == {"read": "hello"}, "a destination the adapter declares"
    with statekit.make(WildAdapter()) as env:
        env.reset(seed=1)
        with statekit.kit.allow_egress(listener.address):
            assert env.step(fetch)[0] == {"read": "hello"}, "a destination the caller allows"
        assert env.step(fetch)[0]["error"]["code"] == "egress_blocked", "and only while allowed"

        own = socket.create_server(("127.0.0.1", 0))  # a server of this very process
        threading.Thread(target=lambda: own.accept()[0].sendall(b"self"), daemon=True).start()
        port = own.getsockname()[1]
        assert env.step({"tool": "fetch", "host": "127.0.0.1", "port": port})[0] == {"read": "self"}
        own.close()

        path = str(tmp_path / "s")
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(path)
        unix.listen(1)
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(path)  # Unix sockets (a database's, Docker's) are never egress
        unix.close()
    with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as conn:
        assert conn.recv(5) == b"hello", "no environment open: the guard is inert"
    assert listener.accepted() == 3


def test_a_build_that_calls_out_fails(listener: Listener) -> None:
    with (
        statekit.make(WildAdapter(build_calls=listener.address)) as env,
        pytest.raises(
            statekit.ConfigError, match=rf"building the world for seed 4: .*connect {listener.address}"
        ),
    ):
        env.reset(seed=4)
    assert listener.accepted() == 0


def test_the_harness_and_its_clients_pass() -> None:
    """An in-process harness hosts an environment (the guard is on in this process) while this
    process is also its client, by RemoteEnvironment and by plain HTTP."""
    app = create_app(HarnessConfig("statekit.testing.ledger:LedgerAdapter", workers=0))
    with ThreadedServer(app) as server, RemoteEnvironment(server.url) as remote:
        remote.reset(seed=3)
        assert remote.step({"tool": "balances"})[0]["accounts"]
        with contextlib.closing(httpx.Client()) as plain:
            assert plain.get(f"{server.url}/health").status_code == 200
