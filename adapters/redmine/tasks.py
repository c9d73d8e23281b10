"""Task kinds for the team lead on the issue tracker: how each is found in a world, posed, verified and
solved.

The hidden facts (which issues, whom to assign) stay in ``Task.facts``; verifiers read the world's
database, never the transcript. Each kind declares what it may change (its issues, the journal
entries Redmine writes for each change, the sequences new rows draw from); statekit holds any other
change against the reward.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import psycopg
from psycopg.rows import dict_row

from statekit.kit import JSON, SEQUENCES_PREFIX, Allow, Expectation, Task
from statekit_examples.adapters.redmine.content import LEAD, PRIORITIES, STATUSES, SUBJECTS, TRACKERS

MAX_STEPS = 20
KINDS = ("close_resolved", "reassign", "escalate_overdue", "file_bug")


@dataclass(frozen=True)
class LeadTask(Task):
    """A Task plus the hidden facts its verifier checks."""

    facts: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


def choose(kind: str, seed: int, conninfo: str, today: date) -> LeadTask:
    """Seed ``seed``'s task of ``kind``, found in the world at ``conninfo`` on ``today``."""
    draw = random.Random(f"redmine-task:{kind}:{seed}")
    with psycopg.connect(conninfo, row_factory=dict_row) as conn:
        return FINDERS[kind](draw, seed, conn, today)


def _rows(conn: psycopg.Connection[Any], query: str, **params: Any) -> list[dict[str, Any]]:
    return conn.execute(query, params).fetchall()


OPEN_ISSUES = (
    "SELECT i.id, i.project_id, p.name AS project, i.assigned_to_id, i.due_date, i.priority_id "
    "FROM issues i JOIN projects p ON p.id = i.project_id JOIN issue_statuses s ON s.id = i.status_id "
    "WHERE NOT s.is_closed ORDER BY i.id"
)


def _close_resolved(draw: random.Random, seed: int, conn: psycopg.Connection[Any], today: date) -> LeadTask:
    resolved = _rows(
        conn, OPEN_ISSUES.replace("WHERE", "WHERE i.status_id = %(s)s AND"), s=STATUSES["Resolved"]
    )
    project = draw.choice(sorted({r["project"] for r in resolved}))
    ids = [r["id"] for r in resolved if r["project"] == project]
    prompt = (
        f"In the {project} project, close every issue whose status is Resolved (set its status to Closed), "
        "and change nothing else; then submit."
    )
    return LeadTask(f"close_resolved-{seed}", "close_resolved", prompt, MAX_STEPS, {"issues": ids})


def _reassign(draw: random.Random, seed: int, conn: psycopg.Connection[Any], today: date) -> LeadTask:
    assigned = [r for r in _rows(conn, OPEN_ISSUES) if r["assigned_to_id"] is not None]
    members = _rows(
        conn,
        "SELECT m.project_id, u.id, u.firstname || ' ' || u.lastname AS name FROM members m "
        "JOIN users u ON u.id = m.user_id WHERE u.login <> %(lead)s ORDER BY m.project_id, u.id",
        lead=LEAD,
    )
    member = {(m["project_id"], m["id"]) for m in members}
    options = sorted(
        {
            (r["project_id"], r["project"], r["assigned_to_id"])
            for r in assigned
            if (r["project_id"], r["assigned_to_id"]) in member
        }
    )
    project_id, project, leaving = draw.choice(options)
    names = {m["id"]: m["name"] for m in members}
    others = [m["id"] for m in members if m["project_id"] == project_id and m["id"] != leaving]
    successor = draw.choice(others)
    ids = [r["id"] for r in assigned if r["project_id"] == project_id and r["assigned_to_id"] == leaving]
    prompt = (
        f"{names[leaving]} is leaving the {project} project: assign each of their open issues in it to "
        f"{names[successor]}, and change nothing else; then submit."
    )
    facts = {"issues": ids, "to": successor}
    return LeadTask(f"reassign-{seed}", "reassign", prompt, MAX_STEPS, facts)


def _escalate_overdue(draw: random.Random, seed: int, conn: psycopg.Connection[Any], today: date) -> LeadTask:
    late = [r for r in _rows(conn, OPEN_ISSUES) if r["due_date"] is not None and r["due_date"] < today]
    project = draw.choice(sorted({r["project"] for r in late}))
    ids = [r["id"] for r in late if r["project"] == project and r["priority_id"] != PRIORITIES["Urgent"]]
    prompt = (
        f"In the {project} project, raise the priority of every open issue whose due date has passed to "
        "Urgent, and change nothing else; then submit."
    )
    return LeadTask(f"escalate_overdue-{seed}", "escalate_overdue", prompt, MAX_STEPS, {"issues": ids})


def _file_bug(draw: random.Random, seed: int, conn: psycopg.Connection[Any], today: date) -> LeadTask:
    members = _rows(
        conn,
        "SELECT p.id AS project_id, p.identifier, p.name AS project, u.id, "
        "u.firstname || ' ' || u.lastname AS name FROM members m JOIN users u ON u.id = m.user_id "
        "JOIN projects p ON p.id = m.project_id "
        "WHERE u.login <> %(lead)s ORDER BY p.id, u.id",
        lead=LEAD,
    )
    taken = {r["subject"] for r in _rows(conn, "SELECT subject FROM issues")}
    subject = draw.choice(sorted(set(SUBJECTS) - taken))
    member = draw.choice(members)
    prompt = (
        f"Report a bug in the {member['project']} project titled {subject!r}, with priority High, assigned "
        f"to {member['name']}; change nothing else, then submit."
    )
    facts = {"project": member["project_id"], "identifier": member["identifier"], "subject": subject,
             "to": member["id"]}  # fmt: skip
    return LeadTask(f"file_bug-{seed}", "file_bug", prompt, MAX_STEPS, facts)


FINDERS: dict[str, Callable[[random.Random, int, psycopg.Connection[Any], date], LeadTask]] = {
    "close_resolved": _close_resolved,
    "reassign": _reassign,
    "escalate_overdue": _escalate_overdue,
    "file_bug": _file_bug,
}


def score(task: LeadTask, conninfo: str) -> float:
    """1 when the task's issues are as it asked (the rest of the tracker is collateral's business)."""
    facts = task.facts
    with psycopg.connect(conninfo, row_factory=dict_row) as conn:
        if task.kind == "file_bug":
            found = _rows(
                conn,
                "SELECT tracker_id, priority_id, assigned_to_id, u.login FROM issues i JOIN users u "
                "ON u.id = i.author_id WHERE project_id = %(p)s AND subject = %(s)s",
                p=facts["project"], s=facts["subject"],
            )  # fmt: skip
            want = {"tracker_id": TRACKERS["Bug"], "priority_id": PRIORITIES["High"],
                    "assigned_to_id": facts["to"], "login": LEAD}  # fmt: skip
            return 1.0 if found == [want] else 0.0
        issues = {
            r["id"]: r
            for r in _rows(conn, "SELECT * FROM issues WHERE id = ANY(%(ids)s)", ids=facts["issues"])
        }
    if not facts["issues"] or len(issues) != len(facts["issues"]):
        return 0.0
    wanted: Callable[[dict[str, Any]], bool] = {
        "close_resolved": lambda r: r["status_id"] == STATUSES["Closed"],
        "reassign": lambda r: r["assigned_to_id"] == facts.get("to"),
        "escalate_overdue": lambda r: r["priority_id"] == PRIORITIES["Urgent"],
    }[task.kind]
    return 1.0 if all(wanted(r) for r in issues.values()) else 0.0


def expected(task: LeadTask, conninfo: str) -> Expectation:
    """What the task may change: its issues, the journal entries (and their details) Redmine writes
    for each change of them, a new issue's row and its mail, the lead watching them, the lead's preferences
    (Redmine keeps the projects one last worked in there) and the sequences new rows draw from."""
    facts = task.facts
    with psycopg.connect(conninfo, row_factory=dict_row) as conn:
        if task.kind == "file_bug":
            found = _rows(conn, "SELECT id FROM issues WHERE project_id = %(p)s AND subject = %(s)s",
                          p=facts["project"], s=facts["subject"])  # fmt: skip
            issues = {r["id"] for r in found}
        else:
            issues = set(facts["issues"])
        lead = _rows(conn, "SELECT id FROM users WHERE login = %(lead)s", lead=LEAD)[0]["id"]
        journals = {
            r["id"]
            for r in _rows(
                conn,
                "SELECT id FROM journals WHERE journalized_type = 'Issue' AND journalized_id = ANY(%(ids)s)",
                ids=sorted(issues),
            )
        }
    return Expectation(
        (
            Allow.changed("issues", where=lambda row: row["id"] in issues),
            *(
                (Allow.added("issues", where=lambda row: row["id"] in issues),)
                if task.kind == "file_bug"
                else ()
            ),
            Allow.added("journals", where=lambda row: row["id"] in journals),
            Allow.added("journal_details", where=lambda row: row["journal_id"] in journals),
            # Redmine makes the lead a watcher of each issue the lead changes or reports ...
            Allow.added(
                "watchers",
                where=lambda row: (
                    row["watchable_type"] == "Issue"
                    and row["watchable_id"] in issues
                    and row["user_id"] == lead
                ),
            ),
            # a new issue is mailed to the team (the project's members who hear of every event)
            Allow.added(
                "statekit_outbox",
                where=lambda row: any(row["message_id"].startswith(f"redmine.issue-{i}.") for i in issues),
            ),
            # ... and remembers the projects the lead last worked in (its "recently used" list)
            Allow.any("user_preferences", where=lambda row: row["user_id"] == lead),
            Allow.changed(f"{SEQUENCES_PREFIX}public"),
        )
    )


def reference(task: LeadTask) -> list[dict[str, JSON]]:
    """A script that solves ``task`` with the lead's tools."""
    facts = task.facts
    changes: dict[str, dict[str, JSON]] = {
        "close_resolved": {"status": "Closed"},
        "reassign": {"assigned_to": facts.get("to")},
        "escalate_overdue": {"priority": "Urgent"},
    }
    change = changes.get(task.kind, {})
    if task.kind == "file_bug":
        steps: list[dict[str, JSON]] = [
            {"tool": "create_issue", "project": facts["identifier"], "tracker": "Bug",
             "subject": facts["subject"], "priority": "High", "assigned_to": facts["to"]}
        ]  # fmt: skip
    else:
        steps = [{"tool": "update_issue", "id": i, **change} for i in facts["issues"]]
    return [*steps, {"tool": "submit"}]
