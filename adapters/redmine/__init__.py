"""Redmine, an issue tracker written in Ruby on Rails (Debian's ``redmine`` package), as a statekit
environment: an application statekit cannot patch, run behind the process boundary
(``statekit.kit.AppProcess``) and reached only through its REST API.

- Schema stage: Redmine's own migrations and default data (``rake``), REST switched on, e-mail on a
  new issue, and the outbox table of the world's mail provider.
- A seed's world: people, two projects, memberships and issues with a history of updates, written
  through the REST API by a puma serving the world, its clock the build's virtual clock.
- A world attached: one puma per world behind the boundary (libfaketime clock following the
  episode's, no network but a loopback, a fixed host name), kept across rewinds: the rewind ends its
  database connection and ActiveRecord reconnects at the next request (it verifies a pooled
  connection when it checks it out), so no request fails.
- Its mail: Redmine sends over SMTP to a port of its boundary's loopback, where statekit plays the
  team's mail provider (``statekit.kit.SmtpService``) and keeps each message in the world
  (``outbox.Outbox``), delivered within the request that sends it.
- Episodes: the team lead (a Manager in every project) working the tracker through REST tools.

Each part of the boundary is switched off by the control it stands for (``clock``, ``egress``,
``host``), so ``statekit check redmine`` proves the ones a task exercises.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import httpx

from statekit.kit import (
    JSON,
    Boundary,
    CheckHints,
    DigestSpec,
    EnvSettings,
    Episode,
    Expectation,
    Outcome,
    SchemaStage,
    SmtpService,
    SqlAdapter,
    Task,
    Tool,
    World,
    clock,
)
from statekit_examples.adapters.redmine import content, tasks
from statekit_examples.adapters.redmine.content import LEAD, PRIORITIES, STATUSES, TRACKERS
from statekit_examples.adapters.redmine.instance import MAIL_PORT, MAIL_PROVIDER, RedmineInstance, installed
from statekit_examples.adapters.redmine.outbox import Outbox

SPEC_PATH = Path(__file__).with_name("redmine.toml")
OBJECT: dict[str, JSON] = {"type": "object", "additionalProperties": False}
ISSUE_ID: dict[str, JSON] = {"type": "integer", "minimum": 1}
PROJECT: dict[str, JSON] = {"type": "string", "minLength": 1, "description": "the project's identifier"}
USER_ID: dict[str, JSON] = {"type": "integer", "minimum": 1}
DATE: dict[str, JSON] = {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
CHANGES: dict[str, JSON] = {
    "status": {"enum": list(STATUSES)},
    "priority": {"enum": list(PRIORITIES)},
    "assigned_to": USER_ID,
    "due_date": DATE,
    "notes": {"type": "string", "maxLength": 2000},
}
TOOLS = [
    Tool("list_projects", "The projects you are a member of: identifier and name.", OBJECT, read_only=True),
    Tool(
        "list_members",
        "A project's members: user id, name and roles.",
        {**OBJECT, "properties": {"project": PROJECT}, "required": ["project"]},
        read_only=True,
    ),
    Tool(
        "list_issues",
        "A project's issues (open by default), oldest first: id, tracker, subject, status, priority, "
        "assignee and due date.",
        {
            **OBJECT,
            "properties": {
                "project": PROJECT,
                "status": {"enum": ["open", "closed", "all"]},
                "assigned_to": USER_ID,
            },
            "required": ["project"],
        },
        read_only=True,
    ),
    Tool(
        "read_issue",
        "One issue in full, with its history of changes and notes.",
        {**OBJECT, "properties": {"id": ISSUE_ID}, "required": ["id"]},
        read_only=True,
    ),
    Tool(
        "update_issue",
        "Change an issue's status, priority, assignee or due date, and/or add a note.",
        {**OBJECT, "properties": {"id": ISSUE_ID, **CHANGES}, "required": ["id"]},
    ),
    Tool(
        "create_issue",
        "Report a new issue in a project.",
        {
            **OBJECT,
            "properties": {
                "project": PROJECT,
                "tracker": {"enum": list(TRACKERS)},
                "subject": {"type": "string", "minLength": 1, "maxLength": 255},
                "description": {"type": "string", "maxLength": 5000},
                **{k: v for k, v in CHANGES.items() if k != "notes"},
            },
            "required": ["project", "tracker", "subject"],
        },
    ),
    Tool("submit", "Finish the task.", OBJECT),
]


@dataclass
class Tracker:
    """What a world keeps across its episodes: its Redmine, the database the verifiers read, and its
    mail provider (None with the boundary's network off: the mail then leaves for the machine)."""

    instance: RedmineInstance
    conninfo: str
    mail: SmtpService | None = None
    outbox: Outbox | None = None

    def close(self) -> None:
        """Stop its mail provider (which closes the port's socket), then end Redmine. Safe to call twice."""
        try:
            if self.mail is not None:
                self.mail.close()
        finally:
            self.instance.close()
            if self.outbox is not None:
                self.outbox.close()


class LeadEpisode(Episode):
    """The team lead on one world: every tool is one REST call as the lead."""

    def __init__(self, tracker: Tracker, task: tasks.LeadTask, today: date) -> None:
        self.tracker, self.task, self.lead_task, self.today, self.tools = tracker, task, task, today, TOOLS

    def observe(self) -> JSON:
        return {"task": self.task.prompt, "you": f"{LEAD} (team lead)", "today": self.today.isoformat()}

    def call(self, tool: str, arguments: dict[str, JSON]) -> Outcome:
        if tool == "submit":
            return Outcome({"submitted": True}, done=True)
        try:
            return Outcome(TOOL_CALLS[tool](self.tracker.instance, arguments))
        except RedmineRefused as refused:
            return Outcome({"error": str(refused)})
        except httpx.TransportError as exc:
            return Outcome({"error": f"the tracker did not answer ({type(exc).__name__}): {exc}"})

    def score(self) -> float:
        return tasks.score(self.lead_task, self.tracker.conninfo)

    def expected_changes(self) -> Expectation:
        return tasks.expected(self.lead_task, self.tracker.conninfo)


class RedmineRefused(Exception):
    """Redmine answered a tool's call with an error (4xx): what it said becomes the observation."""


def _as_lead(instance: RedmineInstance, method: str, path: str, body: Any = None) -> Any:
    answer = instance.call(method, path, user=LEAD, body=body)
    if answer.status_code == 404:
        raise RedmineRefused(f"not found: {path.split('?')[0]}")
    if answer.status_code >= 400:
        try:
            errors = answer.json().get("errors") or [answer.text]
        except ValueError:
            errors = [answer.text[:200] or answer.reason_phrase]
        raise RedmineRefused(f"{answer.status_code}: " + "; ".join(str(e) for e in errors))
    return answer.json() if answer.content.strip() else None


def _name(value: Any) -> Any:
    return value["name"] if isinstance(value, dict) else value


def _list_projects(instance: RedmineInstance, arguments: dict[str, JSON]) -> JSON:
    found = _as_lead(instance, "GET", "/projects.json?limit=100")["projects"]
    return {"projects": [{"identifier": p["identifier"], "name": p["name"]} for p in found]}


def _list_members(instance: RedmineInstance, arguments: dict[str, JSON]) -> JSON:
    found = _as_lead(instance, "GET", f"/projects/{arguments['project']}/memberships.json?limit=100")
    return {
        "members": [
            {"user_id": m["user"]["id"], "name": m["user"]["name"], "roles": [r["name"] for r in m["roles"]]}
            for m in found["memberships"]
            if "user" in m
        ]
    }


def _list_issues(instance: RedmineInstance, arguments: dict[str, JSON]) -> JSON:
    status = {"open": "o", "closed": "c", "all": "*"}[str(arguments.get("status", "open"))]
    query = f"project_id={arguments['project']}&status_id={status}&sort=id&limit=100"
    if "assigned_to" in arguments:
        query += f"&assigned_to_id={arguments['assigned_to']}"
    found = _as_lead(instance, "GET", f"/issues.json?{query}")
    return {
        "issues": [
            {
                "id": i["id"],
                "tracker": _name(i["tracker"]),
                "subject": i["subject"],
                "status": _name(i["status"]),
                "priority": _name(i["priority"]),
                "assigned_to": i.get("assigned_to"),
                "due_date": i.get("due_date"),
            }
            for i in found["issues"]
        ],
        "total": found["total_count"],
    }


def _read_issue(instance: RedmineInstance, arguments: dict[str, JSON]) -> JSON:
    issue = _as_lead(instance, "GET", f"/issues/{arguments['id']}.json?include=journals")["issue"]
    keep = (
        *("id", "project", "tracker", "status", "priority", "author", "assigned_to", "subject"),
        *("description", "start_date", "due_date", "done_ratio", "created_on", "updated_on", "closed_on"),
    )
    shown: dict[str, JSON] = {k: issue[k] for k in keep if k in issue}
    shown["journals"] = [
        {
            "user": j["user"]["name"],
            "notes": j.get("notes") or "",
            "created_on": j["created_on"],
            "details": [
                {"field": d["name"], "old": d.get("old_value"), "new": d.get("new_value")}
                for d in j["details"]
            ],
        }
        for j in issue.get("journals", [])
    ]
    return shown


def _fields(arguments: dict[str, JSON]) -> dict[str, JSON]:
    fields: dict[str, JSON] = {}
    if "status" in arguments:
        fields["status_id"] = STATUSES[str(arguments["status"])]
    if "priority" in arguments:
        fields["priority_id"] = PRIORITIES[str(arguments["priority"])]
    if "tracker" in arguments:
        fields["tracker_id"] = TRACKERS[str(arguments["tracker"])]
    if "assigned_to" in arguments:
        fields["assigned_to_id"] = arguments["assigned_to"]
    for name in ("due_date", "notes", "subject", "description"):
        if name in arguments:
            fields[name] = arguments[name]
    return fields


def _update_issue(instance: RedmineInstance, arguments: dict[str, JSON]) -> JSON:
    fields = _fields(arguments)
    if not fields:
        raise RedmineRefused("nothing to change: name a status, priority, assignee, due date or note")
    _as_lead(instance, "PUT", f"/issues/{arguments['id']}.json", {"issue": fields})
    issue = _as_lead(instance, "GET", f"/issues/{arguments['id']}.json")["issue"]
    wanted = {"status": "status", "priority": "priority"}
    unchanged = [k for k, field in wanted.items() if k in arguments and _name(issue[field]) != arguments[k]]
    if unchanged:  # Redmine drops a change its workflow does not allow, silently: say so
        raise RedmineRefused(
            f"Redmine did not allow changing {', '.join(unchanged)} of issue {arguments['id']}"
        )
    return {
        "updated": arguments["id"],
        "status": _name(issue["status"]),
        "priority": _name(issue["priority"]),
    }


def _create_issue(instance: RedmineInstance, arguments: dict[str, JSON]) -> JSON:
    fields = {"project_id": arguments["project"], **_fields(arguments)}
    created = _as_lead(instance, "POST", "/issues.json", {"issue": fields})["issue"]
    return {"created": created["id"]}


TOOL_CALLS = {
    "list_projects": _list_projects,
    "list_members": _list_members,
    "list_issues": _list_issues,
    "read_issue": _read_issue,
    "update_issue": _update_issue,
    "create_issue": _create_issue,
}


class RedmineAdapter(SqlAdapter, SchemaStage, CheckHints):
    """Redmine's migrations once per fingerprint; a seed's tracker on a copy; episodes as its team lead."""

    name = "redmine"
    spec = DigestSpec.load(SPEC_PATH) if SPEC_PATH.exists() else None
    database_prefix = "skrm"
    builder_modules = (
        "statekit_examples.adapters.redmine.content",
        "statekit_examples.adapters.redmine.instance",
    )
    deterministic_start = True  # choosing the task only reads the world
    probe_tasks = {  # each change is a journal entry stamped by Redmine's clock; a new issue is mailed
        "clock": "close_resolved",
        "egress": "file_bug",
    }
    unprobed = {
        "ids": "Redmine draws no id from statekit's generators (it is not Python): its ids are sequences, "
        "which the journal rewinds; what it draws from the kernel (Ruby's SecureRandom: a password's salt, "
        "API keys) no seed reaches, so those columns are out of the digest (redmine.toml says which)",
        "host": "Redmine reads the host name only to name an e-mail's Message-ID when the sender address "
        "has no domain, which a mail provider refuses (this world's sender, Redmine's default, has one); "
        "nothing else of it reads the host name, so no task's result depends on it",
        "db_clock": "Redmine stamps rows with Ruby's clock (the boundary's), never the database's now()",
    }

    def __init__(self, *, smtp: tuple[str, int] = MAIL_PROVIDER) -> None:
        self.smtp = smtp
        """Where an attached Redmine sends its mail: the world's provider (default), or a host no
        recording stands for, whose every attempt the boundary names and refuses."""

    def fingerprint(self) -> dict[str, str]:
        return {**super().fingerprint(), "redmine": installed()}

    def build_schema(self, world: World) -> None:
        with RedmineInstance(self.database_url(world)) as instance:
            content.build_schema(instance, self.conninfo(world))

    def build_world(self, world: World, seed: int) -> None:
        with RedmineInstance(self.database_url(world)) as instance:
            instance.serve(clock().now)
            clock().follow(instance.process.set_clock)
            content.fill(instance, seed)

    def attach(self, world: World, settings: EnvSettings) -> Tracker:
        boundary = Boundary(
            clock=settings.control_on("clock"),
            network=settings.control_on("egress"),
            hostname=Boundary().hostname if settings.control_on("host") else None,
        )
        url = self.database_url(world)
        instance = RedmineInstance(url, boundary=boundary, services=(MAIL_PORT,), smtp=self.smtp)
        tracker = Tracker(instance, self.conninfo(world))
        try:
            instance.serve(clock().now)  # attached under the seed's controls; episodes move it
            listener = instance.process.listener(MAIL_PORT)
            if listener is not None:
                tracker.outbox = Outbox(tracker.conninfo)
                tracker.mail = SmtpService(listener, tracker.outbox.keep)
        except BaseException:
            tracker.close()
            raise
        return tracker

    def detach(self, app: Any) -> None:
        app.close()

    def task_kinds(self) -> list[str]:
        return list(tasks.KINDS)

    def start_episode(
        self,
        world: World,
        *,
        seed: int,
        options: dict[str, JSON],
        task: Task | None,
        app: Any,
        settings: EnvSettings,
    ) -> Episode:
        assert isinstance(app, Tracker)
        clock().follow(app.instance.process.set_clock)  # the process reads this episode's clock
        today = clock().now.date()
        if task is None:
            kind = settings.task_kind(seed, options, tasks.KINDS)
            task = tasks.choose(kind, seed, app.conninfo, today)
        assert isinstance(task, tasks.LeadTask)
        return LeadEpisode(app, task, today)

    def reference_actions(self, task: Task) -> list[dict[str, JSON]]:
        assert isinstance(task, tasks.LeadTask)
        return tasks.reference(task)


__all__ = ["RedmineAdapter"]
