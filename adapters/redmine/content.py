"""What every world shares (Redmine's schema, its default data, REST switched on) and what a seed adds
(people, projects, memberships, issues with a history of updates), all written by Redmine itself:
its migrations and rake tasks for the first, its REST API for the second.

The build runs under statekit's virtual clock, which the Redmine process reads (libfaketime): the seed's
history is written from 60 days before the episodes' start forward, request by request.
"""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import psycopg

from statekit import ConfigError
from statekit.kit import clock
from statekit_examples.adapters.redmine.instance import ADMIN_KEY, RedmineInstance

HISTORY_DAYS = 60
STATUSES = {"New": 1, "In Progress": 2, "Resolved": 3, "Feedback": 4, "Closed": 5, "Rejected": 6}
"""Redmine's default statuses (``redmine:load_default_data``), by name."""
OPEN = ("New", "In Progress", "Resolved", "Feedback")
PRIORITIES = {"Low": 1, "Normal": 2, "High": 3, "Urgent": 4, "Immediate": 5}
TRACKERS = {"Bug": 1, "Feature": 2, "Support": 3}
ROLES = {"Manager": 3, "Developer": 4, "Reporter": 5}
LEAD = "lead"
"""The agent's login: the team lead, a Manager in every project."""
PEOPLE = [
    ("Ada", "Lovelace"), ("Alan", "Turing"), ("Grace", "Hopper"), ("Edsger", "Dijkstra"),
    ("Barbara", "Liskov"), ("Donald", "Knuth"), ("Frances", "Allen"), ("John", "Backus"),
    ("Margaret", "Hamilton"), ("Ken", "Thompson"), ("Radia", "Perlman"), ("Niklaus", "Wirth"),
]  # fmt: skip
PROJECTS = ["Billing", "Mobile app", "Website", "Data platform", "Support desk", "Payments"]
SUBJECTS = [
    "Login fails after password reset", "Export to CSV drops the last row", "Slow search on large lists",
    "Add dark mode", "Crash when the upload is empty", "Wrong totals in the monthly report",
    "Support single sign-on", "Timezone shown as UTC", "Broken link in the footer",
    "Allow bulk editing", "Email notifications arrive twice", "Improve the onboarding tour",
    "Pagination skips a page", "Add an audit log", "Session expires too early", "Typo on the pricing page",
    "Retry failed webhooks", "Rate limit the public API", "Cache the dashboard", "Archive old projects",
    "Sort order lost on reload", "Validate postcodes", "Dates printed in the wrong format",
    "Add keyboard shortcuts", "Memory grows after a day", "Translate the settings page",
]  # fmt: skip
NOTES = [
    "Reproduced on staging.", "Looking into it.", "Fixed on the branch, please verify.",
    "Needs more information from the customer.", "Verified, works for me.", "Blocked by the release.",
]  # fmt: skip


OUTBOX = """CREATE TABLE statekit_outbox (
    id serial PRIMARY KEY,
    message_id text NOT NULL,
    sender text NOT NULL,
    recipients text NOT NULL,
    subject text NOT NULL,
    sent text NOT NULL,
    body text NOT NULL
)"""
"""What the world's mail provider took from Redmine (``outbox.Outbox`` writes it), in the world's own
database: rewound and digested with Redmine's rows."""


def build_schema(instance: RedmineInstance, conninfo: str) -> None:
    """Redmine's migrations and default data (statuses, trackers, roles, workflows, priorities), then
    what the worlds need of its settings: the REST API on, e-mail on a new issue (plain text), the
    admin's key known; and the provider's outbox."""
    now = clock().now
    instance.rake(now, "db:migrate")
    instance.rake(now, "redmine:load_default_data")
    with psycopg.connect(conninfo, autocommit=False) as conn:
        conn.execute(
            "INSERT INTO settings (name, value, updated_on) VALUES ('rest_api_enabled', '1', %(t)s), "
            "('notified_events', '---' || chr(10) || '- issue_added' || chr(10), %(t)s), "
            "('plain_text_mail', '1', %(t)s), ('default_language', 'en', %(t)s)",
            {"t": _naive(now)},
        )
        conn.execute(OUTBOX)
        conn.execute("UPDATE users SET must_change_passwd = false WHERE login = 'admin'")
        conn.execute(
            "INSERT INTO tokens (user_id, action, value, created_on, updated_on) "
            "SELECT id, 'api', %(key)s, %(t)s, %(t)s FROM users WHERE login = 'admin'",
            {"key": ADMIN_KEY, "t": _naive(now)},
        )


def fill(instance: RedmineInstance, seed: int) -> None:
    """Seed ``seed``'s people, projects and issues, through the REST API of ``instance`` (serving)."""
    draw = random.Random(f"redmine-world:{seed}")
    today = (clock().now + timedelta(hours=1)).date()  # the episodes' day
    clock().advance(-timedelta(days=HISTORY_DAYS))
    people = draw.sample(PEOPLE, 6)
    logins = [LEAD] + [first.lower() for first, _ in people[1:]]
    users = {}
    for login, (first, last) in zip(logins, people, strict=True):
        answer = _post(instance, "/users.json", {"user": {
            "login": login, "firstname": first, "lastname": last, "mail": f"{login}@example.org",
            "password": f"statekit-{login}", "mail_notification": "none",
        }})  # fmt: skip
        users[login] = answer["user"]["id"]
    projects = {}
    for name in draw.sample(PROJECTS, 2):
        identifier = name.lower().replace(" ", "-")
        answer = _post(instance, "/projects.json", {"project": {
            "name": name, "identifier": identifier, "is_public": False,
            "tracker_ids": list(TRACKERS.values()), "enabled_module_names": ["issue_tracking"],
        }})  # fmt: skip
        projects[identifier] = answer["project"]["id"]
        members = [LEAD, *draw.sample(logins[1:], 4)]
        for login in members:
            role = "Manager" if login == LEAD else draw.choice(["Developer", "Developer", "Reporter"])
            _post(instance, f"/projects/{identifier}/memberships.json",
                  {"membership": {"user_id": users[login], "role_ids": [ROLES[role]]}})  # fmt: skip
        _issues(instance, draw, identifier, {login: users[login] for login in members}, today)
        clock().advance(timedelta(hours=1))
    for login in logins[1:]:  # from now on the team hears of every new issue in its projects
        _put(instance, f"/users/{users[login]}.json", {"user": {"mail_notification": "all"}})


def _issues(
    instance: RedmineInstance, draw: random.Random, project: str, members: dict[str, int], today: date
) -> None:
    """A project's issues over the history: each reported by a member (``members``: login to user id),
    most assigned, some updated."""
    subjects = draw.sample(SUBJECTS, 12)
    slot = timedelta(days=2)  # an issue a slot, its updates within it: 2 projects fill 48 of the 60 days
    for subject in subjects:
        start = clock().now
        reporter = draw.choice(list(members))
        assignee = draw.choice([*members, None])
        due = today + timedelta(days=draw.randint(-20, 25)) if draw.random() < 0.7 else None
        fields: dict[str, Any] = {
            "project_id": project,
            "tracker_id": TRACKERS[draw.choice(list(TRACKERS))],
            "subject": subject,
            "description": f"{subject}. Reported by {reporter}.",
            "priority_id": PRIORITIES[draw.choice(["Low", "Normal", "Normal", "High"])],
            "start_date": (clock().now.date()).isoformat(),
        }
        if assignee:
            fields["assigned_to_id"] = members[assignee]
        if due:
            fields["due_date"] = max(due, clock().now.date()).isoformat()
        issue = _post(instance, "/issues.json", {"issue": fields}, user=reporter)["issue"]["id"]
        for _ in range(draw.randint(0, 2)):
            clock().advance(timedelta(hours=draw.randint(2, 20)))
            update = {"notes": draw.choice(NOTES), "status_id": STATUSES[draw.choice(list(STATUSES))]}
            _put(instance, f"/issues/{issue}.json", {"issue": update}, user=LEAD)  # a Manager: any status
        clock().advance(start + slot - clock().now)


def _post(instance: RedmineInstance, path: str, body: Any, *, user: str | None = None) -> Any:
    return _checked(instance.call("POST", path, body=body, user=user), path).json()


def _put(instance: RedmineInstance, path: str, body: Any, *, user: str | None = None) -> None:
    _checked(instance.call("PUT", path, body=body, user=user), path)


def _checked(answer: httpx.Response, path: str) -> httpx.Response:
    if answer.status_code >= 400:
        raise ConfigError(
            f"building the Redmine world: {path} answered {answer.status_code}: {answer.text[:500]}"
        )
    return answer


def _naive(moment: datetime) -> datetime:
    """Redmine stores UTC timestamps without a zone."""
    return moment.astimezone(UTC).replace(tzinfo=None)
