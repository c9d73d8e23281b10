"""``DrainJobs`` with a ``JobQueue`` drains only when a job can be due, and changes nothing else:
the claims episodes below play the same with it as with a drain after every call."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

import statekit
from statekit.kit import DrainJobs
from statekit.postgres.journal import Journal


def _drains(env: statekit.Environment) -> list[int]:
    """Count the application's drains (each entry: how many jobs it ran)."""
    episode: Any = env._live.episode  # type: ignore[union-attr]
    ran: list[int] = []
    real = episode.worker.run_pending

    def counted() -> int:
        ran.append(real())
        return ran[-1]

    episode.worker.run_pending = counted
    return ran


def _always_drain(env: statekit.Environment) -> None:
    """The episode's jobs control without its queue: a drain after every call."""
    episode: Any = env._live.episode  # type: ignore[union-attr]
    (jobs,) = [c for c in episode.controls if isinstance(c, DrainJobs)]
    assert jobs.queue is not None, "the claims episode drains through a JobQueue"
    jobs.queue = None


def test_a_step_drains_only_when_the_queue_changed_or_a_job_came_due(pg_url: str) -> None:
    with statekit.make("claims_app", db_url=pg_url) as env:
        env.reset(seed=7, options={"task": "file_new_claim"})
        ran = _drains(env)
        env.step({"tool": "list_claims", "limit": 1})
        assert len(ran) == 1, "the first call drains: nothing is known of the queue yet"
        for _ in range(3):
            env.step({"tool": "list_claims", "limit": 1})
        assert len(ran) == 1, "reads that enqueue nothing, with nothing due, cost no drain"
        for action in env.adapter.reference_actions(env.task)[:-1]:  # filing a claim enqueues its fraud job
            env.step(action)
        assert len(ran) > 1 and sum(ran) >= 1, "the step that enqueued a job drained and ran it"


@pytest.mark.parametrize("seed", [7, 8])
def test_every_task_plays_the_same_as_with_a_drain_after_every_call(pg_url: str, seed: int) -> None:
    """Same observations, rewards and digests, step by step, for every task kind's reference play
    with waits between (a job retried later comes due while the clock moves)."""
    with statekit.make("claims_app", db_url=pg_url) as env:
        for kind in env.adapter.task_kinds():
            if (seed, kind) == (8, "pay_approved"):
                continue  # seed 8 poses no pay_approved
            runs = []
            for always in (False, True):
                env.reset(seed=seed, options={"task": kind})
                if always:
                    _always_drain(env)
                script = env.adapter.reference_actions(env.task)
                played = []
                wait = {"tool": "wait", "hours": 30}
                for action in [wait, *script[:-1], wait, script[-1]]:
                    obs, reward, terminated, truncated, _ = env.step(action)
                    played.append((obs, reward, terminated, truncated, env.state().digest))
                runs.append(played)
            assert runs[0] == runs[1], f"seed {seed}, task {kind}"


def test_a_job_queued_for_later_runs_once_the_clock_reaches_it(pg_url: str) -> None:
    """A job due in two hours (written beside the application, as a retry's backoff would be) is not
    run by the reads before it is due, and is run by the first call after the clock passed it: the
    same world, step by step, as draining after every call gives."""
    runs = []
    for always in (False, True):
        with statekit.make("claims_app", db_url=pg_url) as env:
            env.reset(seed=7)
            if always:
                _always_drain(env)
            ran = _drains(env)
            journal = env.world.handle["db"].handle
            assert isinstance(journal, Journal)
            due = env.state().clock
            with psycopg.connect(journal.conninfo, autocommit=True) as conn:
                conn.execute(
                    "INSERT INTO jobs (kind, payload, status, run_after, attempts, created_at) "
                    "VALUES ('sla_sweep', '{}', 'queued', %s::timestamptz + %s, 0, %s)",
                    (due, timedelta(hours=2), due),
                )
            played = []
            for action in [
                {"tool": "list_claims", "limit": 1},
                {"tool": "list_claims", "limit": 1},
                {"tool": "wait", "hours": 3},
                {"tool": "list_claims", "limit": 1},
                {"tool": "list_claims", "limit": 1},
            ]:
                played.append((env.step(action)[0], env.state().digest, list(ran)))
            runs.append(played)
    queued, always = runs
    assert [p[:2] for p in queued] == [p[:2] for p in always]
    assert queued[-1][2] == [0, 1], "one drain before (nothing due), one once the clock passed the job"
