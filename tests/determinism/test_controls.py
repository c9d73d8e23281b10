"""Each determinism control proved by removing it, and the done-when checks of the controls issue."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import statekit
from adapters.claims_app import CASSETTE_DIR, ClaimsAdapter
from adapters.claims_app.vendors import live_vendors
from examples.claims_app.config import Settings
from statekit.testing import NOT_CHECKED, check_controls

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def control_results(pg_url: str) -> dict[str, str | None]:
    """Run the removal experiment once for all four controls (live vendors for 'outbound')."""
    with live_vendors() as url:

        def make_env(disabled: tuple[str, ...]) -> statekit.Environment:
            live = {"vendors_url": url} if "outbound" in disabled else {}
            return statekit.make("claims_app", db_url=pg_url, disable_controls=disabled, **live)

        return check_controls(make_env, seed=7)


@pytest.mark.parametrize("control", ["clock", "ids", "jobs", "outbound"])
def test_removing_a_control_breaks_determinism(control_results: dict[str, str | None], control: str) -> None:
    """With the control on, replays match; with only it off, they differ (or state moves between steps)."""
    assert control_results[control] is None


@pytest.mark.parametrize("control", ["host", "egress", "db_clock"])
def test_controls_without_a_probe_are_not_checked(
    control_results: dict[str, str | None], control: str
) -> None:
    """The claims app names no probe task for these: reported as not checked, never as passed (their
    own tests in this directory prove them on the wild app)."""
    assert set(control_results) == {"clock", "ids", "host", "egress", "db_clock", "jobs", "outbound"}
    assert str(control_results[control]).startswith(NOT_CHECKED + "no probe task exercises")


def test_unknown_control_names_are_rejected(pg_url: str) -> None:
    with pytest.raises(statekit.ConfigError, match=r"unknown determinism control\(s\) \['weather'\]"):
        statekit.make("claims_app", db_url=pg_url, disable_controls=("weather",))


ROLLOUT = """
import json, sys, statekit
from statekit.testing import rollout
env = statekit.make("claims_app", db_url=sys.argv[1])
env.reset(seed=7, options={"task": "file_new_claim"})
script = env.adapter.reference_actions(env.task)
r = rollout(env, seed=7, actions=script, options={"task": "file_new_claim"})
out = {"digest": r.state_digest, "initial": r.initial_digest, "obs": r.observations, "rewards": r.rewards}
print(json.dumps(out))
env.close()
"""


def test_separate_processes_times_zones_and_hash_seeds_agree(pg_cluster: Any, tmp_path: Path) -> None:
    """Two rollouts in separate processes, seconds apart, under different TZ and PYTHONHASHSEED: one
    on the suite's server, one in a fresh embedded cluster of its own that builds the world from nothing."""
    outputs = []
    for tz, hashseed, prefix in (("UTC", "1", "a"), ("Asia/Tokyo", "12345", "b")):
        env = {**os.environ, "TZ": tz, "PYTHONHASHSEED": hashseed, "STATEKIT_HOME": str(tmp_path / prefix)}
        env.pop("STATEKIT_TEST_PG_URL", None)
        url = pg_cluster.admin_url if prefix == "a" else ""
        args = [
            sys.executable,
            "-c",
            ROLLOUT.replace("db_url=sys.argv[1]", "db_url=sys.argv[1] or None"),
            url,
        ]
        run = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        outputs.append(json.loads(run.stdout.strip().splitlines()[-1]))
        time.sleep(3)
    assert outputs[0] == outputs[1]
    assert outputs[0]["rewards"][-1] == 1.0


@pytest.fixture
def no_egress(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Record every attempt to open an internet socket or resolve a name from this process."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append(("connect", address))
        return real_connect(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        attempts.append(("resolve", host))
        raise OSError("name resolution is not allowed in this test")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield attempts


def test_episode_runs_from_cassettes_with_no_vendor_and_no_egress(pg_url: str, no_egress: list[Any]) -> None:
    with statekit.make("claims_app", db_url=pg_url) as env:
        env.reset(seed=7, options={"task": "file_new_claim"})
        script = env.adapter.reference_actions(env.task)
        rewards = [env.step(action)[1] for action in script]
    assert rewards[-1] == 1.0, "filing a claim calls two vendors; both were answered from the cassette"
    assert no_egress == []


def test_an_unrecorded_request_is_an_error_observation(pg_url: str, no_egress: list[Any]) -> None:
    with statekit.make("claims_app", db_url=pg_url) as env:
        env.reset(seed=7, options={"task": "file_new_claim"})
        action = env.adapter.reference_actions(env.task)[0]
        started = time.monotonic()
        obs, reward, terminated, truncated, _ = env.step({**action, "loss_line1": "1 Never Recorded Road"})
        elapsed = time.monotonic() - started
        digest_after = env.state().digest
        _, info = env.reset(seed=7, options={"task": "file_new_claim"})
    error = obs["error"]
    assert error["code"] == "replay_miss"
    assert error["requests"] == ["POST http://vendors.statekit.invalid/address/v1/validate"]
    assert "POST http://vendors.statekit.invalid/address/v1/validate" in error["message"]
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert elapsed < 10, "a miss must fail fast, not hang"
    assert digest_after == info["digest"], "the failed filing changed nothing"
    assert no_egress == []


def test_cassettes_hold_no_secrets() -> None:
    cassettes = sorted(CASSETTE_DIR.glob("*.yaml"))
    assert len(cassettes) >= 16
    key = Settings.vendor_api_key
    for path in cassettes:
        text = path.read_text()
        lowered = text.lower()
        assert "interactions:" in text and "version: 1" in text, f"{path.name} is not a versioned cassette"
        assert key not in text, f"{path.name} contains the vendor API key"
        for word in ("authorization", "bearer", "x-api-key", "cookie"):
            assert word not in lowered, f"{path.name} contains {word!r}"


def test_cassettes_cover_the_seeds_the_suite_uses() -> None:
    adapter = ClaimsAdapter()
    for seed in (7, 8, 9, 11):
        assert adapter.cassette(seed).exists()
