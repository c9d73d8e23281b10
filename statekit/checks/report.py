"""What the checker found: one ``CheckReport`` per environment, a ``KindReport`` per task kind.

Every check answers true (passed), false (failed: ``problems`` says how) or null (not checked:
``notes`` says why). A check that exercised nothing is null, never true.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

NOT_CHECKED = "not checked: "
"""The prefix of a check's answer when it could not judge (nothing to judge with), as opposed to a
failure: reported as null, never as passed."""


@dataclass
class KindReport:
    """What ``check_kind`` found for one task kind's reference script."""

    seed: int
    deterministic: bool | None = None
    """Replays of the script gave equal digests, observations and rewards; None: not checked."""
    reset_restores_initial: bool | None = None
    """Resetting after the script gave back the initial digest; None: not checked (``notes``)."""
    ignored_writes: dict[str, str] | None = None
    """The spec's ignored tables the script wrote, with the spec's reasons: changes the digest is
    blind to. None: not checked (``notes`` says why)."""
    ignored_writes_seen_by: str | None = None
    """How the writes were seen (``statekit.checks.blind_spots``): the change journal, the ignored
    tables' contents hashed before and after, or "nothing ignored"."""
    problems: dict[str, str] = field(default_factory=dict)
    """``{check: the failure}`` for the checks above that failed."""
    notes: list[str] = field(default_factory=list)


@dataclass
class CheckReport:
    deterministic: bool = True
    seeds_differ: bool = True
    reset_restores_initial: bool = True
    coverage: bool | None = True
    """The digest spec covers every live column; None: not checked (``notes`` says why)."""
    tasks_valid: bool = True
    tasks_robust: bool | None = None
    """No exploit probe (``statekit.checks.probes``) beat any task kind's floor; None: not checked."""
    incremental_digest: bool | None = True
    """The digest updated step by step equals a full recompute; None: not checked (container mode:
    the harness inside computes both, and only the updated one is reachable)."""
    rewind_order: bool | None = None
    """A rewound world answers like a fresh clone; None: not checked (the strategy does not rewind)."""
    random_walk: bool | None = None
    """A seeded random walk over the tools replays identically and reset undoes it; None: not checked."""
    journal_integrity: bool | None = None
    """Every attack on the change journal (``statekit.checks.journal_attacks``), played through the
    application's own connection, left the next episode at exactly its golden (rewound exactly, or
    cloned); None: not checked (no journaled PostgreSQL world)."""
    journal_attacks: list[dict[str, Any]] = field(default_factory=list)
    """Each attack case: what it tried, what the server refused, how the next world was served."""
    kinds: dict[str, KindReport] = field(default_factory=dict)
    """Per task kind: its reference script replayed (determinism, reset) and the ignored tables it
    writes. A kind's failures also fail ``deterministic`` / ``reset_restores_initial``."""
    controls: dict[str, bool | None] = field(default_factory=dict)
    """Per control: proved (true), broken (false), or not checked (null: no probe task exercises it for
    this adapter, or removing it changed nothing; ``problems`` says which)."""
    problems: list[str] = field(default_factory=list)
    excluded_tasks: dict[str, str] = field(default_factory=dict)
    """Task kinds a pool must leave out, with why: a failing reference, or a probe that won."""
    exploits: list[dict[str, Any]] = field(default_factory=list)
    """Each winning probe run: kind, seed, policy, reward, floor and the actions that won."""
    notes: list[str] = field(default_factory=list)
    """What a check could not do (so it is not counted as passed)."""
    findings: list[str] = field(default_factory=list)
    """What the author should look at but is not a failure: each task kind that writes an ignored
    table (``ignored_writes: ...``)."""

    probe_runs: int = 0
    """How many probe episodes were played (``tasks_robust`` is judged on them)."""
    probes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per task kind, what each probe run did: policy, seed, calls, entities, whether it changed the
    world and reached the verifier, its reward."""
    unexercised: dict[str, str] = field(default_factory=dict)
    """Task kinds the probes did not put to the test (no run that changed the world reached the
    verifier), with why: ``tasks_robust`` is null for them, never true."""

    def record(self, name: str, problem: str | None) -> None:
        """Check ``name`` failed with ``problem`` (None: nothing to record)."""
        if problem:
            setattr(self, name, False)
            self.problems.append(f"{name}: {problem}")

    def kinds_summary(self) -> list[str]:
        """What a kind's check could not do, said once for the kinds it applies to ("every task kind"
        when it is adapter-wide) instead of once per kind."""
        summary: list[str] = []
        unwatched: dict[str, list[str]] = {}
        for kind, played in self.kinds.items():
            for note in played.notes:
                unwatched.setdefault(note, []).append(kind)
        for note, kinds in unwatched.items():
            every = len(kinds) == len(self.kinds) and len(kinds) > 1
            name, _, why = note.rpartition(NOT_CHECKED)
            which = "every task kind" if every else "task " + ", ".join(map(repr, kinds))
            summary.append(f"{name}not checked for {which}: {why}")
        return summary

    @property
    def ok(self) -> bool:
        checks = [self.deterministic, self.seeds_differ, self.reset_restores_initial]
        judged = [self.tasks_valid, self.tasks_robust is not False, self.incremental_digest is not False]
        judged += [self.rewind_order is not False, self.coverage is not False, self.random_walk is not False]
        judged += [self.journal_integrity is not False]
        return all([*checks, *judged]) and all(ok is not False for ok in self.controls.values())

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
