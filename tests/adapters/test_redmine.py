"""Redmine (Rails, Debian's package) wrapped as a process behind statekit's boundary: one puma per world
kept across rewinds (its connection ended by the rewind, ActiveRecord reconnecting with no failed
request), its clock the episode's, replays identical after the application restarts, and bad input or
a dead application an error observation. (Its check plan, controls included, runs as the plugin's
generated tests: ``statekit[redmine]``.)"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest

import statekit
from statekit.checks import check_deterministic, rollout
from statekit.kit import AdapterWrapper, EnvSettings, World
from statekit_examples.adapters.redmine import RedmineAdapter, Tracker
from statekit_examples.adapters.redmine.instance import REDMINE


class RealClockRedmine(AdapterWrapper):
    """Redmine reading the machine's clock whatever the controls say: what wrapping it without the
    boundary's clock would give. A wrapper, so it shares Redmine's fingerprint (its schema stage and
    cached worlds: the same worlds, only the attached application differs)."""

    def attach(self, world: World, settings: EnvSettings) -> Tracker:
        return self.inner.attach(world, EnvSettings(disabled_controls=frozenset({"clock"})))


@pytest.fixture(autouse=True)
def _redmine_is_left_as_installed() -> Iterator[None]:
    """No test writes into Redmine's package directory: each instance keeps what it makes (the schema
    ``db:migrate`` dumps included) in a directory of its own."""
    schema = REDMINE / "db" / "schema.rb"
    before = schema.stat().st_mtime_ns if schema.exists() else None
    yield
    assert (schema.stat().st_mtime_ns if schema.exists() else None) == before, f"{schema} was written"


@pytest.fixture(scope="module")
def env(pg_url: str) -> Iterator[statekit.Environment]:
    with statekit.make(RedmineAdapter, db_url=pg_url) as made:
        yield made


def _tracker(env: statekit.Environment) -> Tracker:
    app = env._starts._apps[env.world.id]  # what the adapter attached to the world the environment holds
    assert isinstance(app, Tracker)
    return app


def _replay(env: statekit.Environment, seed: int, kind: str) -> tuple[Any, ...]:
    observation, info = env.reset(seed=seed, options={"task": kind})
    seen: list[Any] = [observation]
    rewards = []
    *script, submit = env.adapter.reference_actions(env.task)
    for action in script:
        observation, reward, *_ = env.step(action)
        seen.append(observation)
        rewards.append(reward)
    done = env.state().digest
    seen.append(env.step(submit)[:2])
    return info["digest"], seen, rewards, done


def test_a_rewound_world_is_served_by_the_same_process_with_no_failed_request(
    env: statekit.Environment,
) -> None:
    _, first = env.reset(seed=7, options={"task": "close_resolved"})
    pid = _tracker(env).instance.process.pid
    before = env.step({"tool": "list_issues", "project": _project(env), "status": "all"})[0]
    *script, submit = env.adapter.reference_actions(env.task)
    for action in script:
        assert "error" not in env.step(action)[0]
    assert env.step(submit)[1] == 1.0
    _, again = env.reset(seed=7, options={"task": "close_resolved"})
    assert (again["world"], again["digest"]) == ("rewound", first["digest"])
    assert _tracker(env).instance.process.pid == pid, "the rewind kept the application process"
    after = env.step({"tool": "list_issues", "project": _project(env), "status": "all"})[0]
    assert after == before, "the first request after the rewind reads the rewound world, not an error"


def test_a_world_the_journal_cannot_rewind_is_copied_afresh_under_the_same_process(
    env: statekit.Environment,
) -> None:
    """A change the journal cannot express (here the application's role settings, which only a
    superuser may look at) makes the world cloned again in place: same database and URL, so the
    same Redmine reconnects to it, and its first request answers from the golden."""
    _, first = env.reset(seed=7, options={"task": "close_resolved"})
    tracker = _tracker(env)
    pid = tracker.instance.process.pid
    before = env.step({"tool": "list_issues", "project": _project(env), "status": "all"})[0]
    with psycopg.connect(tracker.conninfo, autocommit=True) as app:
        app.execute("ALTER ROLE CURRENT_USER SET search_path = pg_temp, public")
        app.execute("UPDATE issues SET subject = 'changed' WHERE id = 1")
    _, again = env.reset(seed=7, options={"task": "close_resolved"})
    assert (again["world"], again["digest"]) == ("recopied", first["digest"])
    assert _tracker(env) is tracker and tracker.instance.process.pid == pid
    after = env.step({"tool": "list_issues", "project": _project(env), "status": "all"})[0]
    assert after == before


def test_the_application_stamps_the_episode_clock(env: statekit.Environment) -> None:
    env.reset(seed=8, options={"task": "escalate_overdue"})
    action = env.adapter.reference_actions(env.task)[0]
    when = env.state().clock  # the step runs at this time; the clock ticks after it
    env.step(action)
    issue = env.step({"tool": "read_issue", "id": action["id"]})[0]
    assert _instant(issue["journals"][-1]["created_on"]) == _instant(when)
    assert issue["updated_on"] == issue["journals"][-1]["created_on"]


def test_replays_are_identical_after_the_application_restarts(env: statekit.Environment, pg_url: str) -> None:
    """A second environment starts its own Redmine on its own copy of the world: same seed, same actions,
    same digests, observations and rewards."""
    here = _replay(env, 8, "file_bug")
    with statekit.make(RedmineAdapter, db_url=pg_url) as other:
        there = _replay(other, 8, "file_bug")
        assert _tracker(other).instance.process.pid != _tracker(env).instance.process.pid
    assert here == there
    assert here[1][-1] == ({"submitted": True}, 1.0)


def _outbox(tracker: Tracker) -> list[tuple[str, str]]:
    with psycopg.connect(tracker.conninfo) as conn:
        return conn.execute("SELECT recipients, subject FROM statekit_outbox ORDER BY message_id").fetchall()


def test_a_new_issue_is_mailed_inside_the_boundary_and_rewound_with_the_world(
    env: statekit.Environment, pg_url: str
) -> None:
    """Redmine mails the team over SMTP within the step; statekit's provider keeps the mail in the
    world, so the digest sees it and the rewind takes it back. With the boundary's network off the
    mail leaves for the machine's own port (nothing answers there) and the world keeps none."""
    env.reset(seed=8, options={"task": "file_bug"})
    tracker = _tracker(env)
    assert _outbox(tracker) == []
    create, _ = env.adapter.reference_actions(env.task)
    before = env.state().digest
    created = env.step(create)[0]["created"]
    mailed = _outbox(tracker)
    assert mailed and all(subject.endswith(f"#{created}] (New) {create['subject']}") for _, subject in mailed)
    assert len({to for to, _ in mailed}) == len(mailed), "one message per member of the team"
    assert env.state().digest != before
    env.reset(seed=8, options={"task": "file_bug"})
    assert _outbox(tracker) == [], "rewound with the world"
    with statekit.make(RedmineAdapter, db_url=pg_url, disable_controls=("egress",)) as off:
        off.reset(seed=8, options={"task": "file_bug"})
        assert off.step(create)[0] == {"created": created}, "the step itself succeeds"
        assert _tracker(off).mail is None and _outbox(_tracker(off)) == []


def test_mail_sent_to_a_provider_no_recording_stands_for_is_named_and_refused(pg_url: str) -> None:
    """A Redmine configured to mail through a provider on the internet: the boundary resolves the name,
    resets the connection at its sinkhole, and the step says where Redmine tried to go."""
    with statekit.make(RedmineAdapter(smtp=("smtp.mailgun.example", 587)), db_url=pg_url) as env:
        env.reset(seed=8, options={"task": "file_bug"})
        create, _ = env.adapter.reference_actions(env.task)
        observation, *_ = env.step(create)
        tracker = _tracker(env)
        assert observation["error"]["code"] == "egress_blocked", observation
        assert observation["error"]["destinations"] == ["smtp.mailgun.example:587"]
        assert set(tracker.instance.process.refused) == {"smtp.mailgun.example:587"}
        assert _outbox(tracker) == [], "nothing reached the world's own provider"
        assert env.step({"tool": "list_projects"})[0]["projects"], "the environment goes on"


def test_bad_input_is_an_error_observation_and_the_world_goes_on(env: statekit.Environment) -> None:
    env.reset(seed=7, options={"task": "reassign"})
    project = _project(env)
    answers = [
        env.step({"tool": "update_issue", "id": 9999, "status": "Closed"})[0],
        env.step({"tool": "update_issue", "id": 1})[0],
        env.step({"tool": "list_issues", "project": "no-such-project"})[0],
        env.step(
            {"tool": "create_issue", "project": project, "tracker": "Bug", "subject": "x", "assigned_to": 1}
        )[0],
        env.step({"tool": "update_issue", "id": 1, "due_date": "2025-02-30"})[0],
    ]
    assert [sorted(a) for a in answers] == [["error"]] * 5, answers
    assert answers[0]["error"] == "not found: /issues/9999.json"
    assert "Assignee is invalid" in answers[3]["error"]
    assert "Due date is not a valid date" in answers[4]["error"]
    assert env.step({"tool": "list_projects"})[0]["projects"], "the application still answers"
    changed = {
        (c.table, c.after["login"] if c.table == "users" else c.after["user_id"])
        for c in env.changes().changes
    }
    lead = env.step({"tool": "list_members", "project": project})[0]["members"][0]["user_id"]
    assert changed == {("user_preferences", lead)}, "nothing but the projects Redmine remembers the lead used"


def test_a_dead_application_is_an_error_observation_not_a_crash(pg_url: str) -> None:
    with statekit.make(RedmineAdapter, db_url=pg_url) as env:
        env.reset(seed=7, options={"task": "reassign"})
        pid = _tracker(env).instance.process.pid
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)
        observation, reward, *_ = env.step({"tool": "list_projects"})
    assert reward == 0.0
    assert observation["error"].startswith("the tracker did not answer"), observation


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _project(env: statekit.Environment) -> str:
    return str(env.step({"tool": "list_projects"})[0]["projects"][0]["identifier"])


def test_an_application_on_the_real_clock_is_caught_naming_its_columns(pg_url: str) -> None:
    """Each step that stamps the real time is reported (``info["determinism"]``, which the control check
    reports), naming the columns; and replays differ."""
    with statekit.make(RealClockRedmine(RedmineAdapter()), db_url=pg_url) as env:
        env.reset(seed=7, options={"task": "close_resolved"})
        script = env.adapter.reference_actions(env.task)
        played = rollout(env, seed=7, actions=script, options={"task": "close_resolved"})
        assert check_deterministic(env, 7, script, repeats=2) is not None
    assert played.noted, "the real time went unreported"
    assert "the real time was written to" in played.noted[0]
    assert "issues.updated_on" in played.noted[0] and "journals.created_on" in played.noted[0]
