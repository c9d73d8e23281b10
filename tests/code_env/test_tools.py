"""The five tools: paths confined to the working directory, bounded outputs, errors as observations."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import statekit
from statekit_examples.adapters.code_env.tools import (
    MAX_WRITE_BYTES,
    Workspace,
    list_files,
    view_file,
    write_file,
)


def _error(env: statekit.Environment, action: dict[str, Any]) -> str:
    observation, reward, terminated, truncated, _ = env.step(action)
    assert reward == 0.0 and not terminated and not truncated
    assert set(observation) == {"error"}, observation
    return str(observation["error"]["code"])


@pytest.mark.parametrize(
    ("action", "code"),
    [
        ({"tool": "view_file", "path": "../median/solution.py"}, "path_outside_workdir"),
        ({"tool": "view_file", "path": "/etc/passwd"}, "path_outside_workdir"),
        ({"tool": "view_file", "path": "sub/../../x"}, "path_outside_workdir"),
        ({"tool": "write_file", "path": "../escape.py", "content": "x"}, "path_outside_workdir"),
        ({"tool": "write_file", "path": "/tmp/escape.py", "content": "x"}, "path_outside_workdir"),
        ({"tool": "view_file", "path": "missing.py"}, "not_found"),
        ({"tool": "view_file", "path": "."}, "is_a_directory"),
        ({"tool": "write_file", "path": "solution.py/x", "content": "x"}, "not_a_directory"),
        ({"tool": "view_file", "path": "solution.py/x"}, "invalid_path"),
        ({"tool": "write_file", "path": "n" * 300, "content": "x"}, "name_too_long"),  # ENAMETOOLONG
        ({"tool": "view_file", "path": "sub/" + "n" * 256}, "name_too_long"),
        ({"tool": "view_file"}, "invalid_arguments"),
        ({"tool": "write_file", "path": "a.py", "content": "x" * (MAX_WRITE_BYTES + 1)}, "invalid_arguments"),
        ({"tool": "rm_rf"}, "unknown_tool"),
        ("view_file solution.py", "malformed_action"),
    ],
)
def test_bad_actions_are_error_observations(code_env: statekit.Environment, action: Any, code: str) -> None:
    code_env.reset(seed=3, options={"task": "median"})
    before = code_env.state().digest
    assert _error(code_env, action) == code
    assert code_env.state().digest == before  # nothing was written


def test_a_symlink_that_leaves_the_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "inside.py").write_text("ok")
    (tmp_path / "link_in.py").symlink_to(tmp_path / "inside.py")
    (tmp_path / "link_out.py").symlink_to("/etc/hostname")
    (tmp_path / "dir_out").symlink_to("/etc")
    ws = Workspace(tmp_path, max_chars=100)
    assert view_file(ws, {"path": "link_in.py"})["content"] == "ok"
    for path in ("link_out.py", "dir_out/hostname"):
        with pytest.raises(Exception, match="resolves outside"):
            view_file(ws, {"path": path})
    with pytest.raises(Exception, match="resolves outside"):
        write_file(ws, {"path": "dir_out/evil", "content": "x"})
    assert not os.path.exists("/etc/evil")


def test_outputs_are_cut_to_the_bound(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("y" * 5000)
    ws = Workspace(tmp_path, max_chars=100)
    seen = view_file(ws, {"path": "big.txt"})
    assert seen["truncated"] is True and len(seen["content"]) < 200
    assert "5000 characters" in seen["content"]
    for i in range(600):
        (tmp_path / f"f{i:03}.py").write_text("")
    listed = list_files(ws, {})
    assert listed["truncated"] is True and len(listed["files"]) == 500


def test_write_creates_readable_files_and_folders(code_env: statekit.Environment) -> None:
    code_env.reset(seed=3, options={"task": "median"})
    observation, *_ = code_env.step({"tool": "write_file", "path": "pkg/helpers.py", "content": "X = 1\n"})
    assert observation == {"path": "pkg/helpers.py", "bytes": 6}
    listed, *_ = code_env.step({"tool": "list_files"})
    assert listed["files"] == ["pkg/helpers.py", "solution.py", "test_visible.py"]
    work = Path(code_env.world.location) / "median"
    assert (work / "pkg").stat().st_mode & 0o777 == 0o755
    assert (work / "pkg" / "helpers.py").stat().st_mode & 0o777 == 0o644


def test_run_tests_output_is_bounded(code_env: statekit.Environment) -> None:
    code_env.reset(seed=3, options={"task": "median"})
    code_env.step(
        {
            "tool": "write_file",
            "path": "test_visible.py",
            "content": "def test_loud():\n    print('z' * 100000)\n",
        }
    )
    observation, *_ = code_env.step({"tool": "run_tests"})
    assert observation["passed"] is True and observation["truncated"] is True
    assert len(observation["stdout"]) < 8100


def test_the_first_observation_and_the_tools(code_env: statekit.Environment) -> None:
    observation, info = code_env.reset(seed=11, options={"task": "title_case"})
    assert observation["files"] == ["solution.py", "test_visible.py", "words.py"]
    assert "small words" in observation["task"]
    assert [t["name"] for t in info["tools"]] == [
        "list_files",
        "view_file",
        "write_file",
        "run_tests",
        "submit",
    ]
    assert info["max_steps"] == 30
    task = info["metadata"]["task"]
    assert task["id"] == "title_case" and task["category"] == "bugfix" and task["created"] == "2026-11-30"
    assert info["metadata"]["image"].startswith("/usr/bin/python3")
