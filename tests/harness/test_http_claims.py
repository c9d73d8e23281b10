"""The claims environment over HTTP, served by the real ``statekit serve`` command.

Same seed and same script as in-process must give the same observations, rewards and digests:
serving an environment changes how it is reached, never what it does.
"""

from __future__ import annotations

import httpx
import jsonschema

from statekit.client import RemoteEnvironment

from .conftest import ClaimsReference
from .helpers import play


def test_an_episode_over_http_matches_the_in_process_one(
    claims_server: str, claims_reference: ClaimsReference
) -> None:
    local = claims_reference.trace(7)
    assert local.rewards[-1] == 1.0 and local.ended == (True, False), "the reference script must solve seed 7"
    with RemoteEnvironment(claims_server) as remote:
        served = play(remote, 7, claims_reference.script(7))
    assert served.initial_digest == local.initial_digest
    assert served.observations == local.observations
    assert served.rewards == local.rewards
    assert served.digests == local.digests
    assert served.ended == local.ended


def test_raw_http_speaks_the_documented_shapes(claims_server: str, claims_reference: ClaimsReference) -> None:
    script = claims_reference.script(7)
    with httpx.Client(base_url=claims_server, timeout=120) as http:
        started = http.post("/reset", json={"seed": 7, "options": {}}).json()
        assert set(started) == {"session_id", "observation", "info"}
        session = started["session_id"]
        stepped = http.post("/step", json={"session_id": session, "action": script[0]}).json()
        assert set(stepped) == {"observation", "reward", "terminated", "truncated", "info"}
        state = http.get("/state", params={"session_id": session}).json()
        assert set(state) == {"episode_id", "step_count", "seed", "clock", "digest"}
        assert state["step_count"] == 1 and state["seed"] == 7
        assert state["digest"] == claims_reference.trace(7).digests[0]
        assert http.delete("/session", params={"session_id": session}).json() == {
            "session_id": session,
            "closed": True,
        }


def test_snapshot_and_restore_fork_an_episode(claims_server: str, claims_reference: ClaimsReference) -> None:
    script, local = claims_reference.script(7), claims_reference.trace(7)
    with RemoteEnvironment(claims_server) as remote:
        remote.reset(seed=7)
        remote.step(script[0])
        fork = remote.snapshot()
        for action in script[1:]:
            remote.step(action)
        assert remote.state().digest == local.digests[-1]
        _, info = remote.restore(fork)
        assert info["digest"] == local.digests[0]
        assert remote.state().step_count == 1
        rewards = [remote.step(action)[1] for action in script[1:]]
        assert rewards == local.rewards[1:]
        assert remote.state().digest == local.digests[-1]


def test_schema_describes_this_environment(claims_server: str, claims_reference: ClaimsReference) -> None:
    schemas = httpx.get(f"{claims_server}/schema", timeout=30).json()
    tools = {branch["title"] for branch in schemas["action"]["oneOf"]}
    assert {"get_claim", "approve", "deny", "submit"} <= tools
    actions = jsonschema.Draft202012Validator(schemas["action"])
    observations = jsonschema.Draft202012Validator(schemas["observation"])
    for action in claims_reference.script(7):
        actions.validate(action)
    assert not actions.is_valid({"tool": "rm_rf"})
    assert not actions.is_valid({"tool": "get_claim"}), "get_claim's required reference is enforced"
    for observation in claims_reference.trace(7).observations:
        observations.validate(observation)
    jsonschema.Draft202012Validator(schemas["state"]).validate(
        {"episode_id": "e", "step_count": 0, "seed": 7, "clock": "2025-01-01T00:00:00Z", "digest": "d"}
    )
    assert set(schemas["state"]["required"]) == {"episode_id", "step_count", "seed", "clock", "digest"}


def test_diff_names_the_difference_between_two_live_sessions() -> None:
    """`statekit diff --url` compares two live sessions of a served environment."""
    import json
    import os
    import subprocess
    import sys

    from statekit.client import RemoteEnvironment
    from statekit.harness import HarnessConfig
    from statekit.harness.app import create_app
    from statekit.servers import ThreadedServer

    def diff(url: str, left: str, right: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "statekit.cli", "diff", "--url", url, left, right, "--json"]
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)

    with ThreadedServer(create_app(HarnessConfig("statekit.testing.ledger:LedgerAdapter"))) as server:
        a, b = RemoteEnvironment(server.url), RemoteEnvironment(server.url)
        a.reset(seed=3)
        b.reset(seed=3)
        balances, *_ = b.step({"tool": "balances"})
        source, target = sorted(balances["accounts"])[:2]
        b.step({"tool": "transfer", "source": source, "target": target, "cents": 1})
        changed = diff(server.url, a.session_id or "", b.session_id or "")
        same = diff(server.url, a.session_id or "", a.session_id or "")
        a.close()
        b.close()
    assert same.returncode == 0 and json.loads(same.stdout)["equal"] is True, same.stderr
    assert changed.returncode == 1, changed.stderr
    tables = json.loads(changed.stdout)["tables"]
    assert [c["key"] for c in tables["accounts"]["changed"]] == [[source], [target]]
    assert len(tables["journal"]["added"]) == 1
