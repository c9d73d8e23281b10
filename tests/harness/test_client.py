"""``RemoteEnvironment`` mirrors ``Environment``: same calls, same results, same errors."""

from __future__ import annotations

import socket

import pytest

import statekit
from statekit.client import RemoteEnvironment
from statekit.errors import RemoteError, ResetNeeded

from .conftest import TOKEN
from .helpers import LEDGER, play


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_remote_and_local_give_the_same_episode(ledger_url: str, seed: int) -> None:
    with statekit.make(LEDGER) as local, RemoteEnvironment(ledger_url) as remote:
        local.reset(seed=seed)
        script = local.adapter.reference_actions(local.task)
        expected = play(local, seed, script)
        assert play(remote, seed, script) == expected
        assert expected.rewards[-1] == 1.0
        assert remote.tools == local.tools


def test_step_or_state_before_reset_raise_reset_needed(ledger_url: str) -> None:
    with RemoteEnvironment(ledger_url) as remote:
        with pytest.raises(ResetNeeded, match=r"call reset"):
            remote.step({"tool": "balances"})
        with pytest.raises(ResetNeeded):
            remote.state()
        with pytest.raises(ResetNeeded):
            remote.tools  # noqa: B018


def test_the_end_of_an_episode_raises_reset_needed_as_in_process(ledger_url: str) -> None:
    with RemoteEnvironment(ledger_url) as remote:
        remote.reset(seed=1)
        assert remote.step({"tool": "submit"})[2] is True
        with pytest.raises(ResetNeeded, match="ended"):
            remote.step({"tool": "balances"})
        remote.reset(seed=1)  # the same session starts again
        assert remote.step({"tool": "balances"})[0]["accounts"]


def test_server_refusals_are_remote_errors_with_status_and_code(ledger_url: str) -> None:
    with RemoteEnvironment(ledger_url) as remote:
        remote.reset(seed=1)
        with pytest.raises(RemoteError) as refused:
            remote.restore("no-such-snapshot")
        assert (refused.value.status, refused.value.code) == (404, "unknown_snapshot")
        with pytest.raises(RemoteError) as bad:
            remote.reset(seed=-1)
        assert (bad.value.status, bad.value.code) == (422, "invalid_request")


def test_snapshot_and_restore_mirror_the_local_ones(ledger_url: str) -> None:
    with RemoteEnvironment(ledger_url) as remote:
        _, info = remote.reset(seed=2)
        fork = remote.snapshot()
        remote.step({"tool": "submit"})
        _, again = remote.restore(fork)
        assert again["digest"] == info["digest"] and remote.state().step_count == 0
        assert remote.restore(fork)[1]["digest"] == info["digest"], "a snapshot serves many forks"


def test_an_exported_episode_continues_in_another_session_and_in_process(ledger_url: str) -> None:
    with (
        RemoteEnvironment(ledger_url) as source,
        RemoteEnvironment(ledger_url) as moved,
        statekit.make(LEDGER) as local,
    ):
        source.reset(seed=3)
        source.step({"tool": "balances"})
        blob = source.export_episode()
        _, info = moved.import_episode(blob)  # opens its session
        assert info["imported"] == "replay" and moved.tools == source.tools  # the ledger's world: memory
        local.import_episode(blob)
        assert moved.state().digest == source.state().digest == local.state().digest
        action = {"tool": "balances"}
        assert moved.step(action)[0] == source.step(action)[0] == local.step(action)[0]
        with pytest.raises(RemoteError) as refused:
            moved.import_episode(b"garbage")
        assert (refused.value.status, refused.value.code) == (422, "invalid_episode")
        assert moved.state().step_count == 2, "a refused import leaves the session's episode as it was"


def test_token_and_unreachable_servers(token_url: str) -> None:
    url = token_url
    with RemoteEnvironment(url, token=TOKEN) as remote:
        remote.reset(seed=1)
    with RemoteEnvironment(url) as anonymous, pytest.raises(RemoteError) as refused:
        anonymous.reset(seed=1)
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with RemoteEnvironment(f"http://127.0.0.1:{port}") as nowhere, pytest.raises(RemoteError) as down:
        nowhere.reset(seed=1)
    assert down.value.code == "unreachable"


def test_close_is_safe_twice_and_ends_the_session(ledger_url: str) -> None:
    remote = RemoteEnvironment(ledger_url)
    remote.reset(seed=1)
    session = remote.session_id
    remote.close()
    remote.close()
    with RemoteEnvironment(ledger_url) as other:
        other.session_id = session
        with pytest.raises(RemoteError) as gone:
            other.state()
        other.session_id = None
    assert gone.value.code == "unknown_session"
