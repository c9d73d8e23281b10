"""The design's rules, checked on the code itself (docs/ARCHITECTURE.md, "The map"): layers that only
import downwards, small modules, two public faces with no name in common, and callers that ask a
strategy or an adapter what it can do instead of checking its class."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import statekit
import statekit.kit
from statekit.adapter import Adapter
from statekit.strategies.base import ResetStrategy

PACKAGE = Path(statekit.__file__).parent
MAX_LINES = 500
LAYERS: dict[int, tuple[str, ...]] = {
    1: ("contract", "world", "entropy", "errors", "settings", "memo", "builder_code"),
    2: (
        "determinism",
        "digest",
        "postgres",
        "strategies",
        "seeds",
        "web_app",
        "django_project",
        "kept",
        "process_app",
        "sinkhole",
        "mail",
        "abandoned",
    ),
    3: (
        "adapter",
        "registry",
        "capabilities",
        "sql_adapter",
        "collateral",
        "tools",
        "cache",
        "builds",
        "envspec",
        "goldens",
        "servers",
    ),
    4: ("env", "forks", "transfer", "warm", "live", "referee", "make", "container_mode", "client"),
    5: (
        "checks",
        "harness",
        "gym",
        "ray",
        "rollouts",
        "assay",
        "cli",
        "integrations",
        "pytest_plugin",
        "testing",
        "kit",
        "divergence",
        "__init__",
    ),
}
"""Each module (or package) of ``statekit`` by layer: the map in docs/ARCHITECTURE.md."""

ELSEWHERE = {
    "statekit.integrations.verifiers": ".venv-verifiers",
    "statekit.integrations.nemo_gym": ".venv-nemo-gym",
}
"""Modules that import only where their framework is installed, a venv of its own (verifiers' pins
clash with the dev venv's; NeMo Gym needs Python 3.12): checked by their AST here, imported by
tests/integrations/test_verifiers.py and test_nemo_gym.py."""


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        out.append((".".join(("statekit", *parts)).removesuffix(".__init__"), path))
    return out


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else "__init__"
    found = [layer for layer, names in LAYERS.items() if top in names]
    assert found, f"{module} is in no layer: add it to LAYERS and to the map in docs/ARCHITECTURE.md"
    return found[0]


def _imports(path: Path) -> set[str]:
    """The statekit modules ``path`` imports when it is imported (not under TYPE_CHECKING, not inside a
    function: those are deferred on purpose)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("statekit"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("statekit")}
    return found


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    upward = [
        f"{module} (layer {_layer(module)}) imports {dep} (layer {_layer(dep)})"
        for module, path in _modules()
        for dep in sorted(_imports(path))
        if dep != "statekit" and _layer(dep) > _layer(module)
    ]
    assert not upward, "\n".join(upward)


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(PACKAGE)): n
        for _, path in _modules()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"split these modules (at most {MAX_LINES} lines each): {long}"


def test_the_user_face_and_the_authors_face_share_no_name() -> None:
    shared = set(statekit.__all__) & set(statekit.kit.__all__)
    assert not shared, f"names on both faces: {sorted(shared)}"


def test_no_caller_checks_a_strategy_or_adapter_class_outside_its_module() -> None:
    """``isinstance(x, Rewinding)`` leaks a strategy's class to its callers; they ask
    ``strategy.capabilities`` (and an adapter's capabilities are protocols) instead."""
    found = []
    for module_name, path in _modules():
        if module_name.endswith("__main__"):
            continue
        module = None if module_name in ELSEWHERE else importlib.import_module(module_name)
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id not in ("isinstance", "issubclass") or len(node.args) != 2:
                continue
            targets, names = [node.args[1]], []
            while targets:
                target = targets.pop()
                if isinstance(target, ast.Tuple):
                    targets += target.elts
                elif isinstance(target, ast.BinOp):
                    targets += [target.left, target.right]
                elif isinstance(target, ast.Name | ast.Attribute):
                    names.append(target.id if isinstance(target, ast.Name) else target.attr)
            for name in names:
                cls = getattr(module, name, None)
                if (
                    inspect.isclass(cls)
                    and issubclass(cls, Adapter | ResetStrategy)
                    and cls.__module__ != module_name
                ):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: isinstance(..., {name})")
    assert not found, "\n".join(found)


def test_the_example_worlds_install_under_one_name_of_their_own() -> None:
    """Outside the checkout, ``adapters`` and ``examples`` are a user's names, not ours."""
    probe = (
        "import importlib.metadata as m, importlib.util as u, json\n"
        "print(u.find_spec('adapters'), u.find_spec('examples'))\n"
        "print(json.dumps([e.value for e in m.entry_points(group='statekit_adapters')]))\n"
        "import statekit_examples.adapters.claims_app, statekit_examples.apps.claims_app.models\n"
    )
    outside = subprocess.run(
        [sys.executable, "-c", probe], cwd="/", capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert outside[0] == "None None"
    assert all(value.startswith("statekit_examples.adapters.") for value in json.loads(outside[1]))
