"""docs/WRAPPING.md is executed as written: its files become a package, its commands run against it."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "WRAPPING.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _blocks() -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in BLOCK.findall(GUIDE.read_text())]


def _write_files(into: Path) -> list[Path]:
    written = []
    for _, body in _blocks():
        first = body.splitlines()[0] if body.strip() else ""
        if first.startswith("# file: "):
            path = into / first.removeprefix("# file: ").strip()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
            written.append(path)
    return written


def test_the_guide_adapter_uses_only_the_public_faces(tmp_path: Path) -> None:
    """The adapter imports the author's face (``statekit.kit``) and, for the errors, the user's
    (``statekit``): never a private module."""
    files = _write_files(tmp_path)
    assert {p.relative_to(tmp_path).as_posix() for p in files} >= {"todo_app/app.py", "todo_app/adapter.py"}
    tree = ast.parse((tmp_path / "todo_app" / "adapter.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert {m for m in imported if m.startswith("statekit")} == {"statekit", "statekit.kit"}
    app = ast.parse((tmp_path / "todo_app" / "app.py").read_text())
    modules = {n.module for n in ast.walk(app) if isinstance(n, ast.ImportFrom) and n.module}
    modules |= {a.name for n in ast.walk(app) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m.startswith("statekit") for m in modules), "the app knows nothing of statekit"


def test_the_guide_commands_pass(tmp_path: Path) -> None:
    _write_files(tmp_path)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    commands = [
        shlex.split(line.split("#")[0])
        for lang, body in _blocks()
        if lang == "bash"
        for line in body.splitlines()
        if line.startswith(("statekit spec init", "statekit check"))
    ]
    assert len(commands) == 2
    for command in commands:
        run = subprocess.run(
            [sys.executable, "-m", "statekit.cli", *command[1:]],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=900,
        )
        assert run.returncode == 0, f"{' '.join(command)}\n{run.stdout}\n{run.stderr}"
        if "--json" in command:
            report = json.loads(run.stdout)
            assert report["deterministic"] and report["seeds_differ"] and report["tasks_valid"], report
            assert report["rewind_order"] is True and report["incremental_digest"] is True, report
    draft = (tmp_path / "draft.toml").read_text()
    assert '"created_at" = "DECIDE: looks like an audit timestamp' in draft


def test_the_guide_django_excerpts_are_the_example_as_it_is() -> None:
    """Each ``# from: PATH`` block of the guide is a verbatim excerpt of that file of the repository."""
    excerpts = [body for _, body in _blocks() if body.startswith("# from: ")]
    assert len(excerpts) >= 3
    for body in excerpts:
        first, _, excerpt = body.partition("\n")
        source = (ROOT / first.removeprefix("# from: ").strip()).read_text()
        assert excerpt.strip("\n") in source, f"docs/WRAPPING.md's excerpt of {first} no longer matches it"
