"""statekit's own code never reads the entropy or the clock that the controls patch.

While one session steps, its controls patch the process's entropy and clock for every thread, so
what another thread draws at that moment comes from the episode's streams. statekit's own names,
draws and timestamps must come from ``true_random_bytes`` and its kin, or from clocks the controls
leave alone (``time.monotonic``, a file's mtime): a cache holder named from ``secrets`` once
repeated across sessions and let a golden in use be evicted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import statekit

PACKAGE = Path(statekit.__file__).parent

PATCHED = {
    ("secrets", "*"),
    ("uuid", "uuid1"),
    ("uuid", "uuid4"),
    ("os", "urandom"),
    ("random", "random"),
    ("random", "randint"),
    ("random", "randrange"),
    ("random", "choice"),
    ("random", "choices"),
    ("random", "shuffle"),
    ("random", "sample"),
    ("random", "uniform"),
    ("random", "getrandbits"),
    ("random", "randbytes"),
    ("random", "SystemRandom"),
    ("time", "time"),
    ("time", "time_ns"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
}
"""Calls that read what the ids and clock controls patch (``module.name`` as written)."""

EXEMPT = {
    "determinism": "the controls themselves, and the true sources beside them",
    "testing/ledger.py": "an example application: it draws ids and times like one, on purpose",
    "postgres/linger.py": "runs in its own process, where no control is ever active",
}


def _exempt(path: Path) -> bool:
    rel = path.relative_to(PACKAGE).as_posix()
    return any(rel == name or rel.startswith(f"{name}/") for name in EXEMPT)


def _patched_calls(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        if isinstance(owner, ast.Name):
            name = owner.id
        elif isinstance(owner, ast.Attribute):
            name = owner.attr
        else:
            continue
        if (name, node.func.attr) in PATCHED or (name, "*") in PATCHED:
            found.append((node.lineno, f"{name}.{node.func.attr}"))
        elif name == "random" and node.func.attr == "Random" and not node.args:
            found.append((node.lineno, "random.Random() (seeded from the OS)"))
    return found


def test_statekit_draws_no_patched_entropy_or_time_outside_the_controls() -> None:
    offenders = [
        f"{path.relative_to(PACKAGE)}:{line}: {call}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if not _exempt(path)
        for line, call in _patched_calls(ast.parse(path.read_text()))
    ]
    assert offenders == [], "use statekit.determinism.ids.true_* or time.monotonic:\n" + "\n".join(offenders)


def test_the_scan_finds_what_it_looks_for() -> None:
    sample = "secrets.token_hex(8)\nt = time.time()\nrandom.Random()\nrandom.Random('x')\n"
    assert [call for _, call in _patched_calls(ast.parse(sample))] == [
        "secrets.token_hex",
        "time.time",
        "random.Random() (seeded from the OS)",
    ]
