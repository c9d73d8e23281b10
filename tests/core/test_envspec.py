"""One spec, the same environment everywhere: ``statekit.make``, the harness (``statekit serve``),
Gymnasium, the command line and the pytest plugin take the same ``EnvSpec`` and make the same
environment from it (Ray: ``tests/ray/test_vector.py``); each prints it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import statekit
from statekit.cli import build_parser
from statekit.cli.spec import spec_from_args
from statekit.harness import HarnessConfig, create_app
from statekit.kit import EnvSettings
from statekit.servers import ThreadedServer

REPO = Path(__file__).resolve().parents[2]
LEDGER = "statekit.testing.ledger:LedgerAdapter"
SPEC = statekit.EnvSpec(
    LEDGER, strategy="rewind", max_steps=3, num_worlds=2, start_seed=40, adapter_options={"accounts": 3}
)


def _behaviour(env: object) -> tuple[list[int], int, bool]:
    """What the spec decides, seen through ``env``'s contract: the seeds seedless resets draw, the
    accounts the adapter option made, and whether the step cap truncates at 3."""
    seeds = sorted({env.reset()[1]["seed"] for _ in range(12)})  # type: ignore[attr-defined]
    obs, _, _, _, _ = env.step({"tool": "balances"})  # type: ignore[attr-defined]
    env.step({"tool": "balances"})  # type: ignore[attr-defined]
    *_, truncated, _ = env.step({"tool": "balances"})  # type: ignore[attr-defined]
    return seeds, len(obs["accounts"]), truncated


EXPECTED = ([40, 41], 3, True)


def test_make_takes_the_spec_and_keeps_it() -> None:
    with statekit.make(SPEC) as env:
        assert env.spec == SPEC
        assert _behaviour(env) == EXPECTED
    same = statekit.EnvSpec.of(
        LEDGER, strategy="rewind", max_steps=3, num_worlds=2, start_seed=40, accounts=3
    )
    assert same == SPEC, "make's keyword arguments spell the same spec"
    assert SPEC.describe() == (
        f"EnvSpec({LEDGER}, strategy='rewind', max_steps=3, num_worlds=2, start_seed=40, "
        "adapter_options={'accounts': 3})"
    )


def test_the_harness_serves_the_spec_and_reports_it() -> None:
    with ThreadedServer(create_app(HarnessConfig(SPEC, max_sessions=2))) as server:
        remote = statekit.RemoteEnvironment(server.url)
        try:
            assert remote.health()["spec"] == SPEC.as_dict()
            assert _behaviour(remote) == EXPECTED
        finally:
            remote.close()


def test_gymnasium_takes_the_spec() -> None:
    gym = pytest.importorskip("statekit.gym")
    env = gym.StatekitEnv(SPEC)
    try:
        assert env.statekit_spec == SPEC
        assert _behaviour(env.env) == EXPECTED
    finally:
        env.close()


def test_the_command_line_spells_the_same_spec() -> None:
    args = build_parser().parse_args(
        [
            "serve",
            LEDGER,
            "--strategy",
            "rewind",
            "--max-steps",
            "3",
            "--num-worlds",
            "2",
            "--start-seed",
            "40",
            "--adapter-option",
            "accounts=3",
        ]
    )
    assert spec_from_args(args) == SPEC


def test_the_plugin_prints_each_adapters_spec(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text(f"[pytest]\nstatekit_adapters = {LEDGER}\nstatekit_plan = quick\n")
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-c",
            str(tmp_path / "pytest.ini"),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert f"statekit plan quick: {statekit.EnvSpec(LEDGER).describe()}" in run.stdout
    assert "6 passed" in run.stdout  # test_nothing and the quick plan's five steps


def test_a_spec_refuses_what_cannot_work() -> None:
    with pytest.raises(statekit.ConfigError, match="num_worlds must be at least 1"):
        statekit.EnvSpec(LEDGER, num_worlds=0)
    with pytest.raises(statekit.ConfigError, match="record=True needs services"):
        statekit.EnvSpec("claims_app", record=True)
    from statekit.testing.ledger import LedgerAdapter

    with pytest.raises(statekit.ConfigError, match="needs the adapter's name or class, not an instance"):
        HarnessConfig(statekit.EnvSpec(LedgerAdapter()))


def test_an_episodes_kind_is_the_option_else_the_seeds_pick_from_the_pool() -> None:
    kinds = ("a", "b", "c")
    assert [EnvSettings().task_kind(seed, {}, kinds) for seed in range(4)] == ["a", "b", "c", "a"]
    narrowed = EnvSettings(task_pool=("b", "c"))  # the spec excluded "a"
    assert [narrowed.task_kind(seed, {}, kinds) for seed in range(3)] == ["b", "c", "b"]
    assert narrowed.task_kind(0, {"task": "a"}, kinds) == "a", "an explicit task is the caller's to check"
