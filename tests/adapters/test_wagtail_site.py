"""A Django application from PyPI (Wagtail, a CMS) wrapped with the kit's ``DjangoProject``: worlds built
on a schema stage of its migrations (the stage itself: tests/core/test_schema_stage.py), Django
pointed at each world per thread, reconnected and its caches cleared across rewinds, and an adapter
that forgets to reconnect told what to do. (Its check plan runs as the plugin's generated tests:
``statekit[wagtail_site]``.)"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import statekit
from statekit.errors import STALE_CONNECTION_HINT
from statekit.kit import DjangoProject, databases_entry
from statekit_examples.adapters.wagtail_site import PROJECT, WagtailAdapter


class Forgetful(WagtailAdapter):
    """Keeps Django's connections across rewinds (no ``on_rewind``, episodes that close nothing), as a
    first wrapper might."""

    def fingerprint(self) -> dict[str, str]:
        return WagtailAdapter().fingerprint()  # it builds the same worlds: the cached ones serve

    def on_rewind(self, app: Any) -> None:
        pass

    def start_episode(self, world: statekit.kit.World, **kwargs: Any) -> statekit.kit.Episode:
        episode = super().start_episode(world, **kwargs)
        episode.close = lambda: None  # type: ignore[method-assign]
        return episode


def _titles(env: statekit.Environment) -> list[str]:
    observation, *_ = env.step({"tool": "list_pages"})
    return [article["title"] for article in observation["articles"]]


def test_two_worlds_served_from_one_process_and_two_threads_stay_apart(pg_url: str) -> None:
    """Django keeps one connection per thread; each environment's steps reach its own world even when
    one thread serves both, or both are stepped at once."""
    with statekit.make(WagtailAdapter, db_url=pg_url) as a, statekit.make(WagtailAdapter, db_url=pg_url) as b:
        a.reset(seed=7, options={"task": "archive"})
        b.reset(seed=8, options={"task": "archive"})
        alone = {7: _titles(a), 8: _titles(b)}
        assert alone[7] != alone[8]
        seen: dict[int, list[list[str]]] = {7: [], 8: []}

        def read(env: statekit.Environment, seed: int) -> None:
            for _ in range(5):
                seen[seed].append(_titles(env))

        threads = [threading.Thread(target=read, args=(env, seed)) for env, seed in ((a, 7), (b, 8))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == {7: [alone[7]] * 5, 8: [alone[8]] * 5}
        recorded = {entry.seed for entry in a.cache.entries()}
    assert {-1, 7, 8} <= recorded, "the seeds' worlds were built on the schema stage's golden (seed -1)"


def test_a_rewound_world_is_served_again_with_fresh_connections_and_caches(pg_url: str) -> None:
    with statekit.make(WagtailAdapter, db_url=pg_url) as env:
        _, first = env.reset(seed=7, options={"task": "fix_title"})
        before = _titles(env)
        *script, submit = env.adapter.reference_actions(env.task)
        for action in script:
            env.step(action)
        assert _titles(env) != before
        assert env.step(submit)[1] == 1.0
        _, again = env.reset(seed=7, options={"task": "fix_title"})
        assert (again["world"], again["digest"]) == ("rewound", first["digest"])
        assert _titles(env) == before, "the step after a rewind reads the rewound world, not an error"


def _session(env: statekit.Environment) -> tuple[int, bool]:
    """This thread's Django backend on the environment's world, and whether a temporary table an
    earlier episode's session made is there; makes one for the next look."""
    from django.db import connection

    with PROJECT.on(env.adapter.database_url(env.world)), connection.cursor() as cursor:  # type: ignore[attr-defined]
        cursor.execute("SELECT pg_backend_pid(), to_regclass('pg_temp.scratch') IS NOT NULL")
        pid, leftover = cursor.fetchone()
        cursor.execute("CREATE TEMP TABLE IF NOT EXISTS scratch (x int)")
    return pid, leftover


def test_the_connection_to_a_world_is_reset_and_kept_across_its_rewinds(pg_url: str) -> None:
    """Each episode's session is reset at its end (what it made is gone) but its backend serves the
    world's next episode, also when episodes alternate between two worlds: no reconnect."""
    with statekit.make(WagtailAdapter, db_url=pg_url) as env:
        seen: dict[int, list[tuple[int, bool, list[str]]]] = {7: [], 8: []}
        for _ in range(3):
            for seed in (7, 8):
                _, info = env.reset(seed=seed, options={"task": "fix_title"})
                pid, leftover = _session(env)
                seen[seed].append((pid, leftover, _titles(env)))
                for action in env.adapter.reference_actions(env.task)[:-1]:
                    env.step(action)
        assert info["world"] == "rewound"
    for runs in seen.values():
        assert len({pid for pid, _, _ in runs}) == 1, f"the world's backend changed: {runs}"
        assert not any(leftover for _, leftover, _ in runs), "a session's temporary table outlived it"
        assert len({tuple(titles) for _, _, titles in runs}) == 1
    assert seen[7][0][0] != seen[8][0][0]


def test_an_adapter_that_keeps_django_connected_across_a_rewind_is_told_the_fix(pg_url: str) -> None:
    with statekit.make(Forgetful, db_url=pg_url) as env:
        env.reset(seed=7, options={"task": "archive"})
        _titles(env)  # this thread's connection is now open on the world
        env.reset(seed=7, options={"task": "archive"})
        observation, reward, _, truncated, _ = env.step({"tool": "list_pages"})
    assert (reward, truncated, observation["error"]["code"]) == (0.0, True, "environment_error")
    assert "terminating connection" in observation["error"]["message"]
    assert STALE_CONNECTION_HINT in observation["error"]["message"]
    assert "DjangoProject" in STALE_CONNECTION_HINT


def test_a_world_url_becomes_a_django_database_entry() -> None:
    entry = databases_entry("postgresql+psycopg://app:s3cret@/skwag_7?host=/run/statekit/pg&port=5433")
    assert entry | {"OPTIONS": {}} == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "skwag_7",
        "USER": "app",
        "PASSWORD": "s3cret",
        "HOST": "/run/statekit/pg",
        "PORT": "5433",
        "OPTIONS": {},
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": False,
    }
    assert databases_entry("postgresql://u@db.internal:6543/x")["HOST"] == "db.internal"
    with pytest.raises(statekit.ConfigError, match="must be PostgreSQL"):
        databases_entry("sqlite:///tmp/x.db")


def test_a_second_django_project_in_the_same_process_is_refused() -> None:
    assert PROJECT.settings_module == "statekit_examples.apps.wagtail_site.settings"
    with pytest.raises(statekit.ConfigError, match="one Django project per process"):
        DjangoProject("someone_else.settings").setup()
