"""Seeded ids and randomness, fixed host identity and the builder's clock, on an application that binds
its sources at import and wires none of them (``wild_app``). Each control is proved by removing it."""

from __future__ import annotations

import json
import os
import random
import secrets
import socket
import subprocess
import sys
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import statekit
import statekit.kit
from statekit.adapter import Episode, Outcome
from statekit.checks import NOT_CHECKED, check_controls, check_deterministic
from statekit.contract import JSON
from statekit.determinism.host import NODE, HostIdentity
from statekit.determinism.ids import SeededIds
from statekit.world import World

from .wild_app import WildAdapter, WildEpisode

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("id", "ref", "token", "lucky")
"""Order fields from a bound uuid.uuid4 default, ``from uuid import uuid4``, secrets, SystemRandom."""


def orders(disabled: tuple[str, ...] = (), seed: int = 5) -> tuple[list[Any], str]:
    """Two orders placed in a fresh environment (its world built from nothing), and the final digest."""
    with statekit.make(WildAdapter(), disable_controls=disabled) as env:
        env.reset(seed=seed)
        placed = [env.step({"tool": "order", "item": item})[0]["order"] for item in ("tea", "cake")]
        return placed, env.state().digest


def test_ids_bound_at_import_and_secrets_are_seeded() -> None:
    first, digest_a = orders()
    again, digest_b = orders()
    assert first == again and digest_a == digest_b
    other, _ = orders(seed=6)
    for source in SOURCES:
        assert first[0][source] != other[0][source], f"{source} ignores the seed"
        assert first[0][source] != first[1][source]


def test_without_the_ids_control_every_source_differs() -> None:
    first, digest_a = orders(("ids",))
    again, digest_b = orders(("ids",))
    for source in SOURCES:
        assert first[0][source] != again[0][source], f"{source} was deterministic without the ids control"
    assert digest_a != digest_b


def test_beneath_the_names_seeded_and_restored() -> None:
    """What the control patches, drawn twice under the same seed and outside it."""

    def draw() -> list[Any]:
        return [
            uuid.uuid4(),
            os.urandom(6),
            secrets.token_urlsafe(6),
            secrets.randbelow(10**9),
            random.SystemRandom().random(),
            random.Random().random(),  # unseeded: CPython seeds it from the OS in C
            random.choice(range(10**9)),
            next(tempfile._get_candidate_names()),  # type: ignore[attr-defined]
        ]

    originals = (os.urandom, random._urandom, random.Random.seed, random.seed)  # type: ignore[attr-defined]
    random.seed(42)
    expected = [random.random() for _ in range(3)]
    random.seed(42)
    with SeededIds(9).active():
        a = draw()
    with SeededIds(9).active():
        b = draw()
    with SeededIds(10).active():
        c = draw()
    assert a == b
    assert all(x != y for x, y in zip(a, c, strict=True))
    assert [random.random() for _ in range(3)] == expected, "the caller's random state must be given back"
    assert (os.urandom, random._urandom, random.Random.seed, random.seed) == originals  # type: ignore[attr-defined]
    assert draw() != draw(), "outside the control, entropy is the operating system's again"


def test_uuid4_ids_keep_their_stream() -> None:
    """uuid4 under the control equals what the control gave before it moved beneath the name, so
    recorded cassettes (which carry ids the world was built with) still match."""
    rng = random.Random("uuid:episode:3")
    with SeededIds(3).active():
        ids = [uuid.uuid4() for _ in range(3)]
    assert ids == [uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(3)]


def test_a_fork_continues_the_id_stream() -> None:
    with statekit.make(WildAdapter()) as env:
        env.reset(seed=5)
        env.step({"tool": "order", "item": "tea"})
        fork = env.snapshot()
        after = env.step({"tool": "order", "item": "cake"})[0]
        env.restore(fork)
        again = env.step({"tool": "order", "item": "cake"})[0]
    assert after == again


class ExplainedWild(WildAdapter):
    """The wild app, saying why no task of its exercises the host identity."""

    unprobed = {"host": "the wild app never asks for its host name"}


def test_check_controls_proves_clock_and_ids_on_the_wild_app() -> None:
    results = check_controls(
        lambda disabled: statekit.make(ExplainedWild(), disable_controls=disabled), seed=4
    )
    assert {name: problem for name, problem in results.items() if problem is None} == {
        "clock": None,
        "ids": None,
    }
    for name in ("host", "egress", "db_clock"):  # no probe task: said so, never passed
        assert str(results[name]).startswith(NOT_CHECKED), results[name]
    assert (
        results["host"] == f"{NOT_CHECKED}no task exercises 'host': the wild app never asks for its host name"
    )
    assert "CheckHints.probe_tasks" in str(results["egress"]), "without a reason, how to check it is said"


class HostProbedWild(WildAdapter):
    """The wild app with its orders, which stamp the host's name, named as the host control's probe
    (and as egress's, which they never exercise)."""

    probe_tasks = {"host": "orders", "egress": "orders"}


def test_a_control_is_proved_when_without_it_replays_agree_but_follow_the_machine() -> None:
    """With the host control off, two replays on one machine match (its host name, twice), but not the
    replays with it on: what another machine would see differs, so the control does work. Removing a
    control that changes nothing (egress: the orders never call out) still proves nothing."""
    results = check_controls(
        lambda disabled: statekit.make(HostProbedWild(), disable_controls=disabled), seed=4, pause=0.0
    )
    assert results["host"] is None
    unchanged = f"{NOT_CHECKED}with only 'egress' off, replays still match"
    assert str(results["egress"]).startswith(unchanged), results


class QuietEpisode(WildEpisode):
    """An order placed, and only that said: what it drew shows in the world, not in the observation."""

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        outcome = super().call(tool, arguments)
        return Outcome({"placed": True}) if tool == "order" else outcome


class QuietWild(WildAdapter):
    def start_episode(self, world: World, **kwargs: Any) -> Episode:
        episode = super().start_episode(world, **kwargs)
        assert isinstance(episode, WildEpisode)
        return QuietEpisode(episode.store, episode.task, episode.notifier, episode.shop)


def test_a_replay_that_ends_differently_is_named_to_the_table_row_and_column() -> None:
    """Unseeded ids (the ids control off) that only the world keeps: same observations and rewards,
    different final digests, and the check names where (the first order's id)."""
    with statekit.make(QuietWild(), disable_controls=("ids",)) as env:
        env.reset(seed=4)
        script = env.adapter.reference_actions(env.task)
        problem = check_deterministic(env, 4, script, repeats=2)
    assert problem is not None and "final digests differ" in problem, problem
    assert "in orders, a row of the first run is not in the second" in problem, problem
    assert "row differs in column(s) id, lucky, ref, token:" in problem, problem


def real_identity() -> dict[str, str]:
    import getpass
    import platform

    return {
        "host": socket.gethostname(),
        "node": platform.node(),
        "nodename": os.uname().nodename,
        "user": getpass.getuser(),
        "env_user": os.environ.get("USER", ""),
    }


def test_host_identity_is_fixed_inside_and_real_outside() -> None:
    real = real_identity()
    user_before = os.environ.get("USER")
    with statekit.make(WildAdapter()) as env:
        env.reset(seed=1)
        inside = env.step({"tool": "whoami"})[0]
        order = env.step({"tool": "order", "item": "tea"})[0]["order"]
    assert inside == {"host": "statekit", "node": "statekit", "nodename": "statekit", "user": "statekit",
                      "env_user": "statekit"}  # fmt: skip
    assert (order["host"], order["user"]) == ("statekit", "statekit"), "from getpass import getuser is caught"
    assert real_identity() == real and os.environ.get("USER") == user_before
    with statekit.make(WildAdapter(), disable_controls=("host",)) as env:
        env.reset(seed=1)
        assert env.step({"tool": "whoami"})[0] == real


def test_uuid1_carries_no_mac_address() -> None:
    real = uuid.getnode()
    with HostIdentity().active():
        inside = uuid.uuid1().node, uuid.getnode()
    assert inside == (NODE, NODE) != (real, real)
    assert uuid.getnode() == real


MACHINE = """
import json, sys
sys.path.insert(0, {root!r})
import statekit
from tests.determinism.wild_app import WildAdapter
out = {{}}
for disabled in ((), ("host",)):
    with statekit.make(WildAdapter(), disable_controls=disabled) as env:
        env.reset(seed=2)
        seen = [env.step({{"tool": "whoami"}})[0], env.step({{"tool": "order", "item": "tea"}})[0]]
        out["off" if disabled else "on"] = {{"seen": seen, "digest": env.state().digest}}
print(json.dumps(out))
"""


def on_machine(hostname: str, user: str) -> dict[str, Any]:
    """The same rollouts as another machine and user would play them: a UTS namespace of its own."""
    script = MACHINE.format(root=str(ROOT))
    env = {**os.environ, "USER": user, "LOGNAME": user}
    command = ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$1" -c "$2"', hostname]
    done = subprocess.run(
        [*command, sys.executable, script], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_two_machines_agree_only_with_the_host_control() -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("CI runs as root: a UTS namespace is needed to play another machine")
        pytest.skip("not root (and not CI): cannot give a process another host name")
    a, b = on_machine("machine-a", "alice"), on_machine("machine-b", "bob")
    assert a["on"] == b["on"]
    assert a["on"]["seen"][0]["host"] == "statekit"
    assert a["off"]["seen"][0]["host"] == "machine-a" and b["off"]["seen"][0]["user"] == "bob"
    assert a["off"]["digest"] != b["off"]["digest"], "without the control the world records the machine"


def test_the_builder_advances_the_virtual_clock() -> None:
    with statekit.make(WildAdapter()) as env:
        env.reset(seed=3)
        built = [order["placed_at"] for order in env.world.handle["orders"]]
    with statekit.make(WildAdapter()) as env:
        env.reset(seed=3)
        assert [order["placed_at"] for order in env.world.handle["orders"]] == built
    first, second = (statekit_time(t) for t in built)
    assert second - first == timedelta(minutes=5)


def statekit_time(text: str) -> Any:
    from datetime import datetime

    return datetime.fromisoformat(text)


def test_the_clock_exists_only_while_statekit_runs_the_app() -> None:
    with pytest.raises(statekit.StatekitError, match=r"statekit.kit.clock\(\) is only defined while"):
        statekit.kit.clock()
