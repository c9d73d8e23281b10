"""The public checker: the determinism checks every statekit environment must pass.

``check_env(env)`` runs a ``CheckPlan`` and reports each check by name, with the nearest difference
when one fails (not just "not equal"); ``rollout`` plays a script. The CLI (``statekit check``), the
pytest plugin (``statekit.pytest_plugin``: one test per step) and ``statekit demo`` render the same
plan. Modules: ``plan`` (the steps), ``rollouts``, ``episodes`` (checks that play episodes),
``controls`` (each control proved by removing it), ``probes`` and ``arguments`` (exploit probes),
``walk``, ``blind_spots`` (ignored tables a task writes), ``journal_attacks``, ``report``.
"""

from __future__ import annotations

from statekit.checks.controls import (
    check_controls,
    check_env_controls,
    controls_not_checked,
    controls_to_check,
)
from statekit.checks.episodes import (
    check_deterministic,
    check_incremental_digest,
    check_kind,
    check_random_walk,
    check_reset_restores,
    check_rewind_order,
    check_seeds_differ,
    check_task,
    coverage_not_checked,
)
from statekit.checks.plan import CheckPlan, Step, check_env
from statekit.checks.probes import DEFAULT_PROBES, ProbeReport, ProbeRun, ProbeSettings, check_exploits
from statekit.checks.report import NOT_CHECKED, CheckReport, KindReport
from statekit.checks.rollouts import (
    Action,
    Rollout,
    first_difference,
    fresh_digest,
    play,
    probe_rollout,
    reference_script,
    rollout,
)

__all__ = [
    "DEFAULT_PROBES",
    "NOT_CHECKED",
    "Action",
    "CheckPlan",
    "CheckReport",
    "KindReport",
    "ProbeReport",
    "ProbeRun",
    "ProbeSettings",
    "Rollout",
    "Step",
    "check_controls",
    "check_deterministic",
    "check_env",
    "check_env_controls",
    "check_exploits",
    "check_incremental_digest",
    "check_kind",
    "check_random_walk",
    "check_reset_restores",
    "check_rewind_order",
    "check_seeds_differ",
    "check_task",
    "controls_not_checked",
    "controls_to_check",
    "coverage_not_checked",
    "first_difference",
    "fresh_digest",
    "play",
    "probe_rollout",
    "reference_script",
    "rollout",
]
