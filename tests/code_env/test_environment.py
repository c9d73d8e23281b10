"""The code environment through statekit's contract: forks, the harness's schema, the public API only."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import jsonschema

import statekit
from statekit.checks import check_rewind_order
from statekit.harness import HarnessConfig, create_app
from statekit.servers import ThreadedServer
from statekit_examples.adapters.code_env import CodeEnvAdapter

from .conftest import require_root

PACKAGE = Path(__file__).resolve().parents[2] / "adapters" / "code_env"
PUBLIC = {"statekit", "statekit.kit"}


def test_the_adapter_imports_only_statekits_public_api() -> None:
    """The two public faces, ``statekit`` (users) and ``statekit.kit`` (adapter authors); nothing below."""
    for path in PACKAGE.rglob("*.py"):
        if "tasks" in path.relative_to(PACKAGE).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                if name.split(".")[0] == "statekit":
                    assert name in PUBLIC, f"{path.relative_to(PACKAGE)} imports {name}"


def test_a_fork_mid_episode_continues_in_a_fresh_copy(
    code_env: statekit.Environment, adapter: CodeEnvAdapter
) -> None:
    code_env.reset(seed=12, options={"task": "roman_to_int"})
    code_env.step(adapter.reference_actions(code_env.task)[0])
    fork = code_env.snapshot()
    code_env.step({"tool": "write_file", "path": "solution.py", "content": "broken("})
    assert code_env.step({"tool": "submit"})[1] == 0.0
    for _ in range(2):  # the snapshot stays usable for more forks
        _, info = code_env.restore(fork)
        assert info["task_id"] == "roman_to_int"
        shown, *_ = code_env.step({"tool": "view_file", "path": "solution.py"})
        assert "VALUES" in shown["content"]
        assert code_env.step({"tool": "submit"})[1] == 1.0


def test_an_episode_moves_to_another_environment_by_its_files(code_env: statekit.Environment) -> None:
    """Exported before its last step, imported elsewhere: the overlay's changed files travel (not the
    path), and the last step scores the same on both sides."""
    code_env.reset(seed=3)
    script = code_env.adapter.reference_actions(code_env.task)
    for action in script[:-1]:
        code_env.step(action)
    blob = code_env.export_episode()
    with statekit.make("code_env") as other:
        _, info = other.import_episode(blob)
        assert info["imported"] == "changes"
        assert other.state().digest == code_env.state().digest
        last = other.step(script[-1])
        assert last[:4] == code_env.step(script[-1])[:4] and last[1] == 1.0


def test_the_harness_describes_the_tools_and_observations(code_env: statekit.Environment) -> None:
    with ThreadedServer(create_app(HarnessConfig("code_env", token=None))) as server:
        schema = httpx.get(f"{server.url}/schema", timeout=30).json()
    branches = {b["title"]: b for b in schema["action"]["oneOf"]}
    assert set(branches) == {"list_files", "view_file", "write_file", "run_tests", "submit"}
    assert branches["write_file"]["required"] == ["tool", "path", "content"]
    validator = jsonschema.Draft202012Validator(schema["observation"])
    observation, _ = code_env.reset(seed=1, options={"task": "median"})
    seen = [observation]
    for action in [
        {"tool": "list_files"},
        {"tool": "view_file", "path": "solution.py"},
        {"tool": "view_file", "path": "../x"},
        *code_env.adapter.reference_actions(code_env.task),
    ]:
        seen.append(code_env.step(action)[0])
    for observation in seen:
        validator.validate(observation)


def test_with_rewind_a_tree_is_put_back_in_place_and_reused() -> None:
    require_root()
    with statekit.make("code_env", tasks=["median", "fizzbuzz"], rewind=True) as env:
        _, info = env.reset(seed=3, options={"task": "median"})
        initial, location = info["digest"], env.world.location
        env.step({"tool": "write_file", "path": "solution.py", "content": "def median(xs):\n    return 0\n"})
        env.step({"tool": "write_file", "path": "extra/notes.txt", "content": "dirty"})
        assert env.state().digest != initial
        _, info = env.reset(seed=3, options={"task": "median"})
        assert env.world.location == location and env.state().digest == initial == info["digest"]
        assert env.strategy.stats.rewound >= 1  # type: ignore[attr-defined]
        reference = env.adapter.reference_actions(env.task)
        assert [env.step(a)[1] for a in reference][-1] == 1.0
        assert check_rewind_order(env, 3) is None
