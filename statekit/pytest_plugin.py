"""A pytest plugin: the check plan (``statekit.checks.CheckPlan``) as tests, for the adapters a project
names.

In ``pyproject.toml``::

    [tool.pytest.ini_options]
    statekit_adapters = ["claims_app"]
    statekit_seeds = "7,8"
    statekit_plan = "full"        # or "quick": determinism, seeds, reset, coverage only

Each step of the plan becomes one test, named by its node id ``statekit[ADAPTER]::TEST``:
``test_reset_is_deterministic``, ``test_seeds_differ``, ``test_reset_restores_initial``,
``test_digest_covers_the_schema``, ``test_incremental_digest``, ``test_random_walk_replays``,
``test_task_kind[KIND]``, ``test_rewound_world_answers_like_a_clone``, ``test_journal_resists_attacks``,
``test_rewards_resist_exploits[KIND]`` and ``test_controls_do_the_work``; each runs exactly what
``statekit check`` runs for that step (the full plan with two replays where the command line makes three,
and the probes on the first seed) and fails with the checker's own message. ``statekit_probe_entities``
and ``statekit_probe_walk`` set how hard the probes push. A database URL can be given with
``--statekit-db-url`` (else the embedded default starts). The header of the run prints each adapter's
``EnvSpec``.

The generated tests join directory runs (``pytest``, ``pytest tests/``), not runs of named files. Each
is selected by its node id, alone or beside files: ``pytest 'statekit[claims_app]::test_seeds_differ'``;
a prefix selects a group (``'statekit[claims_app]'``: all of one adapter's,
``'statekit[claims_app]::test_rewards_resist_exploits'``: every kind's probes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from statekit.capabilities import probe_tasks
from statekit.checks import CheckPlan, CheckReport, ProbeSettings, Step
from statekit.env import Environment
from statekit.envspec import EnvSpec

NODE_ID = re.compile(r"statekit\[[^\]]+\](::.*)?")
"""A generated test's node id, or a prefix of one (pytest would take it for a path and refuse it)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "statekit_adapters", "adapters to generate the check plan's tests for", type="linelist", default=[]
    )
    parser.addini("statekit_seeds", "two seeds for the check plan", default="7,8")
    parser.addini("statekit_plan", "the check plan: full (statekit check's) or quick", default="full")
    defaults = ProbeSettings()
    parser.addini(
        "statekit_probe_entities",
        "entities per tool in the every_entity probe",
        default=str(defaults.entities),
    )
    parser.addini("statekit_probe_walk", "steps of the random-walk probe", default=str(defaults.walk_steps))
    parser.addoption("--statekit-db-url", default=None, help="PostgreSQL admin URL for generated tests")


def plan_of(config: pytest.Config) -> CheckPlan:
    """The plan the ini options describe."""
    seeds = tuple(int(s) for s in str(config.getini("statekit_seeds")).split(","))
    if len(seeds) != 2:
        raise pytest.UsageError("statekit_seeds must name exactly two seeds, e.g. '7,8'")
    kind = str(config.getini("statekit_plan")).strip()
    if kind == "quick":
        return CheckPlan.quick(seeds)
    if kind != "full":
        raise pytest.UsageError(f"statekit_plan must be 'full' or 'quick', not {kind!r}")
    probes = ProbeSettings(
        entities=int(config.getini("statekit_probe_entities")),
        walk_steps=int(config.getini("statekit_probe_walk")),
    )
    return CheckPlan(seeds=seeds, repeats=2, probes=probes, probe_seeds=seeds[:1])


class _Specs:
    """Each adapter's ``EnvSpec`` for the session, and the environment the generated tests of one adapter
    share while they run one after another, as ``statekit check`` runs the plan's steps on one
    environment: an application process attached to a world (Redmine's puma: seconds to boot) starts
    once, not once a step. It is closed when the next test is not another step of the same adapter (an
    environment left open would keep the egress guard on for the other tests of the process) and
    after a step that failed (the next one starts from a fresh environment)."""

    def __init__(self, db_url: str | None) -> None:
        self.db_url = db_url
        self._open: tuple[str, Environment] | None = None

    def spec(self, adapter: str) -> EnvSpec:
        return EnvSpec(adapter, db_url=self.db_url)

    def env(self, adapter: str) -> Environment:
        """The open environment of ``adapter`` (another adapter's is closed first)."""
        if self._open is not None and self._open[0] != adapter:
            self.close()
        if self._open is None:
            self._open = (adapter, self.spec(adapter).make())
        return self._open[1]

    def close(self) -> None:
        opened, self._open = self._open, None
        if opened is not None:
            opened[1].close()


class StatekitCheck(pytest.Item):
    """One step of the check plan on one adapter."""

    def __init__(self, *, adapter: str, step: Step, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.adapter = adapter
        self.step = step

    def runtest(self) -> None:
        report = CheckReport()
        specs = self.config.stash[_SPECS]
        env = specs.env(self.adapter)
        try:
            self.step.run(env, report)
            declared = probe_tasks(env.adapter)
        except BaseException:
            specs.close()
            raise
        if report.problems:
            specs.close()
        assert not report.problems, "\n".join(report.problems)
        if self.step.name.startswith("tasks_robust"):
            assert report.probe_runs, f"no probe ran on {self.step.name}: {report.notes}"
            if report.unexercised:  # honest null: no probe put the reward to the test
                pytest.skip("; ".join(f"{k}: not exercised: {why}" for k, why in report.unexercised.items()))
        if self.step.name == "controls":  # a control a task is said to exercise must be proved
            unproved = [name for name in declared if report.controls.get(name) is not True]
            assert not unproved, f"controls {unproved} have a probe task but were not proved: {report.notes}"

    def reportinfo(self) -> tuple[Any, int, str]:
        return self.path, 0, f"statekit[{self.adapter}]::{self.step.test}"


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Close the shared environment unless the next test is another step of the same adapter."""
    if not isinstance(item, StatekitCheck):
        return
    if not (isinstance(nextitem, StatekitCheck) and nextitem.adapter == item.adapter):
        item.config.stash[_SPECS].close()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SPECS in config.stash:
        config.stash[_SPECS].close()


_SPECS = pytest.StashKey[_Specs]()
_SELECTED = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SPECS] = _Specs(config.getoption("--statekit-db-url"))
    # Node ids of generated tests are not paths: take them out of the arguments pytest collects from
    # (it would refuse them) and select those tests when they are generated.
    config.stash[_SELECTED] = [arg for arg in config.args if NODE_ID.fullmatch(arg)]
    if config.stash[_SELECTED]:
        config.args = [arg for arg in config.args if not NODE_ID.fullmatch(arg)]


def pytest_report_header(config: pytest.Config) -> list[str]:
    adapters = config.getini("statekit_adapters")
    if not adapters or _SPECS not in config.stash:
        return []
    return [
        f"statekit plan {config.getini('statekit_plan')}: {config.stash[_SPECS].spec(a).describe()}"
        for a in adapters
    ]


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    """The generated tests are added before any other plugin marks, orders or deselects tests."""
    _generate(session, config, items)
    yield


def _generate(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    adapters = config.getini("statekit_adapters")
    selected = config.stash.get(_SELECTED, [])
    if not adapters or (_only_files_named(config) and not selected):
        if selected:
            raise pytest.UsageError(f"{selected[0]}: no statekit_adapters are configured (pytest ini)")
        return
    plan = plan_of(config)
    generated = []
    for adapter in adapters:
        for step in _steps(plan, adapter):
            name = f"statekit[{adapter}]::{step.test}"
            if _wanted(name, selected):
                generated.append(
                    StatekitCheck.from_parent(session, name=name, nodeid=name, adapter=adapter, step=step)
                )
    for wanted in selected:
        if not any(_wanted(item.nodeid, [wanted]) for item in generated):
            known = sorted(
                {f"statekit[{a}]::{step.test.split('[')[0]}" for a in adapters for step in _steps(plan, a)}
            )
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


def _steps(plan: CheckPlan, adapter: str) -> list[Step]:
    """The plan's steps for ``adapter``, known without a world (resolving an adapter builds nothing).
    An adapter that cannot be resolved gets the steps that need no task kinds: they fail, saying why."""
    try:
        resolved = EnvSpec(adapter).resolve_adapter()
    except Exception:
        return plan.steps([])
    try:
        return plan.steps(resolved.task_kinds())
    finally:
        resolved.close()


def _only_files_named(config: pytest.Config) -> bool:
    """``pytest path/to/test_x.py`` runs just that file; the generated tests join directory runs."""
    paths = [arg.split("::")[0] for arg in config.args]
    return bool(paths) and all(Path(p).is_file() for p in paths)
