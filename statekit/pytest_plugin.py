"""A pytest plugin: determinism tests generated for the adapters a project names.

In ``pyproject.toml``::

    [tool.pytest.ini_options]
    statekit_adapters = ["claims_app"]
    statekit_seeds = "7,8"

For each adapter it adds ``test_reset_is_deterministic``, ``test_seeds_differ`` and
``test_reset_restores_initial``, each with exactly the assertions of the determinism checks, using the
adapter's reference script for the first seed's task, and per task kind
``test_rewards_resist_exploits[KIND]``: the checker's exploit probes (``statekit.testing.probes``) on
the first seed, none of which may beat the kind's floor. ``statekit_probe_entities`` and
``statekit_probe_walk`` set how hard they push (the probes' step budget stays the checker's). A
database URL can be given with ``--statekit-db-url`` (else the embedded default starts).

The generated tests join directory runs (``pytest``, ``pytest tests/``), not runs of named files. Each
is selected by its node id, alone or beside files: ``pytest 'statekit[claims_app]::test_seeds_differ'``;
a prefix selects a group (``'statekit[claims_app]'``: all of one adapter's,
``'statekit[claims_app]::test_rewards_resist_exploits'``: every kind's probes).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import statekit
from statekit.testing import (
    ProbeSettings,
    check_deterministic,
    check_exploits,
    check_reset_restores,
    check_seeds_differ,
    reference_script,
)

CHECKS = ("test_reset_is_deterministic", "test_seeds_differ", "test_reset_restores_initial")
EXPLOITS = "test_rewards_resist_exploits"
NODE_ID = re.compile(r"statekit\[[^\]]+\](::.*)?")
"""A generated test's node id, or a prefix of one (pytest would take it for a path and refuse it)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "statekit_adapters", "adapters to generate determinism tests for", type="linelist", default=[]
    )
    parser.addini("statekit_seeds", "two seeds for the determinism tests", default="7,8")
    defaults = ProbeSettings()
    parser.addini(
        "statekit_probe_entities",
        "entities per tool in the every_entity probe",
        default=str(defaults.entities),
    )
    parser.addini("statekit_probe_walk", "steps of the random-walk probe", default=str(defaults.walk_steps))
    parser.addoption("--statekit-db-url", default=None, help="PostgreSQL admin URL for generated tests")


class _EnvPool:
    """One environment per adapter for the whole session (its goldens are reused across checks)."""

    def __init__(self, db_url: str | None) -> None:
        self.db_url = db_url
        self.envs: dict[str, statekit.Environment] = {}

    def get(self, adapter: str) -> statekit.Environment:
        if adapter not in self.envs:
            self.envs[adapter] = statekit.make(adapter, db_url=self.db_url)
        return self.envs[adapter]

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.envs.clear()


class StatekitCheck(pytest.Item):
    """One generated determinism test (or, with ``kind``, the exploit probes of one task kind)."""

    def __init__(
        self, *, adapter: str, check: str, seeds: tuple[int, int], kind: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.adapter = adapter
        self.check = check
        self.seeds = seeds
        self.kind = kind

    def runtest(self) -> None:
        pool: _EnvPool = self.config.stash[_POOL]
        env = pool.get(self.adapter)
        a, b = self.seeds
        if self.kind is not None:
            _resist_exploits(env, self.kind, a, self.config)
            return
        script = reference_script(env, a)
        _RUNNERS[self.check](env, a, b, script)

    def reportinfo(self) -> tuple[Any, int, str]:
        return self.path, 0, f"statekit[{self.adapter}]::{self.check}"


def _passes(problem: str | None) -> None:
    """A check's own verdict: None passes, a string is the failure it names."""
    assert problem is None, problem


def _deterministic(env: statekit.Environment, a: int, b: int, script: list[dict[str, Any]]) -> None:
    _passes(check_deterministic(env, a, script, repeats=2))


def _seeds_differ(env: statekit.Environment, a: int, b: int, script: list[dict[str, Any]]) -> None:
    _passes(check_seeds_differ(env, [a, b], script))


def _restores(env: statekit.Environment, a: int, b: int, script: list[dict[str, Any]]) -> None:
    """The world after reset is hashed afresh: a pool handing out used copies fails here."""
    _passes(check_reset_restores(env, a, script))


def _resist_exploits(env: statekit.Environment, kind: str, seed: int, config: pytest.Config) -> None:
    settings = ProbeSettings(
        entities=int(config.getini("statekit_probe_entities")),
        walk_steps=int(config.getini("statekit_probe_walk")),
    )
    report = check_exploits(env, seeds=[seed], kinds=[kind], settings=settings)
    assert report.runs, f"no probe ran on task {kind!r}: {report.notes}"
    assert not report.exploits, "\n".join(run.describe() for run in report.exploits)


_RUNNERS: dict[str, Callable[[statekit.Environment, int, int, list[dict[str, Any]]], None]] = {
    "test_reset_is_deterministic": _deterministic,
    "test_seeds_differ": _seeds_differ,
    "test_reset_restores_initial": _restores,
}
_POOL = pytest.StashKey[_EnvPool]()
_SELECTED = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_POOL] = _EnvPool(config.getoption("--statekit-db-url"))
    # Node ids of generated tests are not paths: take them out of the arguments pytest collects from
    # (it would refuse them) and select those tests when they are generated.
    config.stash[_SELECTED] = [arg for arg in config.args if NODE_ID.fullmatch(arg)]
    if config.stash[_SELECTED]:
        config.args = [arg for arg in config.args if not NODE_ID.fullmatch(arg)]


def pytest_unconfigure(config: pytest.Config) -> None:
    if _POOL in config.stash:
        config.stash[_POOL].close()


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    adapters = config.getini("statekit_adapters")
    selected = config.stash.get(_SELECTED, [])
    if not adapters or (_only_files_named(config) and not selected):
        if selected:
            raise pytest.UsageError(f"{selected[0]}: no statekit_adapters are configured (pytest ini)")
        return
    seeds = tuple(int(s) for s in str(config.getini("statekit_seeds")).split(","))
    if len(seeds) != 2:
        raise pytest.UsageError("statekit_seeds must name exactly two seeds, e.g. '7,8'")
    generated = []
    for adapter in adapters:
        for check in CHECKS:
            name = f"statekit[{adapter}]::{check}"
            if _wanted(name, selected):
                generated.append(
                    StatekitCheck.from_parent(
                        session, name=name, nodeid=name, adapter=adapter, check=check, seeds=seeds
                    )
                )
        probes = f"statekit[{adapter}]::{EXPLOITS}"
        if selected and not any(probes.startswith(s) or s.startswith(probes) for s in selected):
            continue  # the adapter's task kinds are not asked when none of its probe tests is wanted
        for kind in _task_kinds(adapter):
            name = f"{probes}[{kind}]"
            if _wanted(name, selected):
                generated.append(
                    StatekitCheck.from_parent(
                        session,
                        name=name,
                        nodeid=name,
                        adapter=adapter,
                        check=EXPLOITS,
                        seeds=seeds,
                        kind=kind,
                    )
                )
    for wanted in selected:
        if not any(_wanted(item.nodeid, [wanted]) for item in generated):
            known = [f"statekit[{a}]::{test}" for a in adapters for test in (*CHECKS, f"{EXPLOITS}[KIND]")]
            raise pytest.UsageError(
                f"{wanted}: no such generated test; the statekit_adapters generate {', '.join(known)}. "
                "Name one (`pytest --collect-only -q` lists them) or a prefix: statekit[ADAPTER], "
                "statekit[ADAPTER]::TEST"
            )
    items.extend(generated)


def _wanted(nodeid: str, selected: list[str]) -> bool:
    """Whether ``nodeid`` is selected: every generated test when none is named, else one named or
    under a named prefix (a test's node id, an adapter's ``statekit[NAME]``, a test with ``[KIND]``s)."""
    if not selected:
        return True
    return any(nodeid == s or nodeid.startswith((f"{s}::", f"{s}[")) for s in selected)


def _task_kinds(adapter: str) -> list[str]:
    """The adapter's task kinds, known without a world (resolving an adapter builds nothing). An
    adapter that cannot be resolved has none here: its determinism tests fail, saying why."""
    try:
        resolved = statekit.resolve_adapter(adapter)
    except Exception:
        return []
    try:
        return list(resolved.task_kinds())
    finally:
        resolved.close()


def _only_files_named(config: pytest.Config) -> bool:
    """``pytest path/to/test_x.py`` runs just that file; the generated tests join directory runs."""
    paths = [arg.split("::")[0] for arg in config.args]
    return bool(paths) and all(Path(p).is_file() for p in paths)


def generated_items(items: list[pytest.Item]) -> Iterator[StatekitCheck]:
    """The generated tests among ``items`` (for plugin self-tests)."""
    return (item for item in items if isinstance(item, StatekitCheck))
