"""Session-wide real services, and how the suite is spread over processes.

Each test process (the README's test command runs several, with pytest-xdist) has a private
PostgreSQL cluster for its whole run: statekit's own embedded default (``EmbeddedPostgres``) under a
throwaway ``STATEKIT_HOME``, so environments made without a URL in tests (the pytest plugin's
generated tests, ``statekit.make``) and the fixtures below share one server. Set
``STATEKIT_TEST_PG_URL`` to use an existing server instead (an admin URL, e.g. to the ``postgres``
database).

``NEEDS`` names the tests that wait for a set-up step the README's test command runs beside them
(the Docker engine and base image, the side venvs): see ``scripts/test.sh``.

``GROUPS`` keeps tests that share a machine-wide resource in one process, one after another (a
pytest-xdist scheduler of our own, ``pytest_xdist_make_scheduler``): the code sandbox's uids and
cgroups, Ray clusters, Docker image builds. ``SLOW`` marks the system tests a contributor's quick run
leaves out (``scripts/test.sh --quick``: ``-m "not slow"`` and the quick check plan).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from statekit.postgres import EmbeddedPostgres, PostgresServer, roles
from statekit.postgres.cluster import PgCluster
from statekit.postgres.watch import stop_watching

_HOME = tempfile.mkdtemp(prefix="statekit-test-home-")
os.environ["STATEKIT_HOME"] = _HOME
_OWNS_SHARED = "STATEKIT_TEST_SHARED" not in os.environ  # the first process: xdist's, or a serial run
if _OWNS_SHARED:  # (made only here: every other process would leave one of its own behind)
    os.environ["STATEKIT_TEST_SHARED"] = tempfile.mkdtemp(prefix="statekit-test-shared-")
_SHARED = Path(os.environ["STATEKIT_TEST_SHARED"])
# The code environment's task validation is keyed by content and safe to share between processes
# (a lock makes them take turns): every test process of a run validates the task store once, together.
(Path(_HOME) / "code_env").mkdir()
(_SHARED / "code_env-validation").mkdir(exist_ok=True)
(Path(_HOME) / "code_env" / "validation").symlink_to(_SHARED / "code_env-validation")
os.environ["STATEKIT_PG_LINGER"] = (
    "0"  # commands run by tests stop their servers (one test lingers on purpose)
)


@atexit.register
def _remove_home() -> None:
    """Every user of the test cluster is this process, and it is exiting: stop the server, delete it.
    The server watches stop first (they would take the stop for a crash, start the server again
    and leave its lock files behind)."""
    stop_watching()
    cluster_dir = Path(_HOME) / "pg"
    if (cluster_dir / "data").exists():
        PgCluster(cluster_dir).stop_server()
    shutil.rmtree(_HOME, ignore_errors=True)
    if _OWNS_SHARED:
        shutil.rmtree(_SHARED, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresServer]:
    """A running PostgreSQL server; the embedded default unless STATEKIT_TEST_PG_URL is set."""
    url = os.environ.get("STATEKIT_TEST_PG_URL")
    if url:
        yield PostgresServer(url)
        return
    shared = EmbeddedPostgres()
    server = shared.acquire()
    with server.admin() as conn:  # as statekit closes them on a server it runs, whichever test is first
        roles.close_server(conn)
    yield server
    shared.release()


@pytest.fixture(scope="session")
def pg_url(pg_cluster: PostgresServer) -> str:
    """The admin URL of the session's server (what ``statekit.make(db_url=...)`` takes)."""
    return pg_cluster.admin_url


@pytest.fixture
def fresh_db_url(pg_cluster: PostgresServer) -> Iterator[str]:
    """The URL of a brand-new empty database, dropped after the test."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    url = pg_cluster.create_database(name)
    yield url
    pg_cluster.drop_database(name)


GROUPS = {
    "code_env": ("tests/code_env/", "statekit[code_env]"),
    "ray": ("tests/ray/",),
    "wagtail": ("tests/adapters/test_wagtail_site.py::", "statekit[wagtail_site]"),  # its schema stage once
    "redmine": ("tests/adapters/test_redmine.py::", "statekit[redmine]"),  # its schema stage once
    "verifiers": ("tests/integrations/test_verifiers.py::",),  # its module fixture runs every vf-eval once
    "claims_server": (  # the modules using ``claims_server``: `statekit serve claims_app` once per mode
        "tests/harness/test_http_claims.py::",
        "tests/harness/test_concurrency.py::",
        "tests/harness/test_gym.py::",
        "tests/harness/test_mcp.py::",
        "tests/harness/test_openenv.py::",  # and openenv's import (gradio, ~3 CPU-s) paid once
    ),
    "docker": (
        "tests/containers/",
        "tests/docker/",
        "tests/assay/test_claims_assay.py::",  # one claims image read (tests/assay/helpers.py) ...
        "tests/assay/test_adapters_ship.py::",  # ... for both files
    ),
}
"""Per group, the node ids (by prefix) whose tests run in one process, one at a time (a module
fixture that is costly to run twice counts too: split over processes, each would run it)."""

SLOW = (
    "tests/code_env/",
    "tests/adapters/test_wagtail_site.py::",
    "tests/adapters/test_redmine.py::",
    "tests/ray/",
    "tests/containers/",
    "tests/docker/",
    "tests/assay/test_adapters_ship.py::",
    "tests/assay/test_claims_assay.py::",
    "tests/postgres/test_server_death.py::",
    "tests/postgres/test_journal_crash.py::",
    "tests/harness/test_serve_cli.py::",
    "tests/harness/test_workers.py::",
    "tests/harness/test_concurrency.py::",
    "tests/harness/test_fuzz.py::",
    "tests/core/test_linger.py::",
    "tests/adapters/test_claims_rewind.py::test_random_episodes",
    "tests/adapters/test_claims_cache.py::",
    "tests/docs/",
    "tests/testing/test_plugin.py::",
    "tests/integrations/test_trl.py::test_grpo_trains_on_claims_seeds_each_group_from_one_world",
    "tests/integrations/test_verifiers.py::",
    "tests/integrations/test_nemo_gym.py::",
    "statekit[code_env]",
    "statekit[redmine]",
    "statekit[wagtail_site]",  # a CMS's migrations (its schema stage) first: 12 s of a quick run
    # long single tests: property runs, two-process and subprocess checks, whole check plans
    "tests/postgres/test_journal.py::test_rewind_restores_every_row_and_sequence_and_the_digest_stays_exact",
    "tests/determinism/test_controls.py::test_separate_processes_times_zones_and_hash_seeds_agree",
    "tests/determinism/test_ids_and_host.py::test_check_controls_proves_clock_and_ids_on_the_wild_app",
    "tests/digest/test_diff.py::test_drift_names_a_new_model_column",
    "tests/digest/test_diff.py::test_diverge_reports_the_first_diverging_step",
    "tests/adapters/test_claims_adapter.py::test_digest_is_the_same_from_two_fresh_processes",
    "tests/adapters/test_claims_exploits.py::test_probes_catch_a_claims_verifier_that_checks_only_the_target",
    "tests/adapters/test_claims_rewind.py::test_changes_read_from_the_journal_equal_the_full_dump_diff",
    "tests/testing/test_rewind_checks.py::test_an_ordered_read_passes_and_check_env_reports_it",
    "tests/testing/test_check_kinds.py::test_every_kind_is_replayed_and_the_ignored_tables_it_writes_are_reported",
    "tests/core/test_probes.py::test_the_pytest_plugin_generates_the_probes_per_task_kind",
    "tests/harness/test_mcp.py::test_openenv_validate_passes_every_criterion",
)
"""Node-id prefixes of the slow system tests (real Docker, Ray clusters, killed servers, served
subprocesses, the code sandbox, long property runs). The harness tests' ``2-workers`` mode (worker
processes) is slow too: the quick run drives the harness in-process."""


NEEDS = {
    "docker": (*GROUPS["docker"], "tests/code_env/test_container.py::"),
    "verifiers": ("tests/integrations/test_verifiers.py::", "tests/integrations/test_nemo_gym.py::"),
    "nemo-gym": ("tests/integrations/test_nemo_gym.py::",),
}
"""Per set-up step of ``scripts/test.sh`` still running when the tests start, the node ids (by prefix)
of the tests that need it: each waits for the step to end, and fails with its log if it failed."""
SETUP_TIMEOUT = 15 * 60
"""How long a test waits for a set-up step; its own timeout (pytest-timeout's, which counts the wait)
is lengthened by as much."""
_SETUP_FAILED: dict[str, str] = {}
"""Steps found failed (or not done in time), with why: the next test that needs one fails at once."""


def _wait_for_setup(step: str) -> None:
    """Wait for ``scripts/test.sh``'s set-up step (nothing to wait for outside that script, or for a
    step it did not start)."""
    if step in _SETUP_FAILED:
        pytest.fail(_SETUP_FAILED[step])
    folder = os.environ.get("STATEKIT_TEST_SETUP")
    if not folder or not (Path(folder) / f"{step}.log").exists():
        return
    done, deadline = Path(folder) / f"{step}.rc", time.monotonic() + SETUP_TIMEOUT
    while not done.exists() or not done.read_text().strip():
        if time.monotonic() > deadline:
            _SETUP_FAILED[step] = f"set-up step {step!r} did not end within {SETUP_TIMEOUT} s"
            pytest.fail(_SETUP_FAILED[step])
        time.sleep(0.5)
    if done.read_text().strip() != "0":
        log = (Path(folder) / f"{step}.log").read_text(errors="replace")[-4000:]
        _SETUP_FAILED[step] = f"set-up step {step!r} failed (scripts/test.sh):\n{log}"
        pytest.fail(_SETUP_FAILED[step])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before its fixtures: a test that needs a set-up step still running waits for it."""
    for step, prefixes in NEEDS.items():
        if item.nodeid.startswith(prefixes):
            _wait_for_setup(step)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the slow tests, and run the groups first: each is a long chain in one process, and
    starting it last would leave the other processes idle at the end of the run."""
    needing = tuple(prefix for prefixes in NEEDS.values() for prefix in prefixes)
    for item in items:
        if item.nodeid.startswith(SLOW) or "[2-workers" in item.nodeid:
            item.add_marker(pytest.mark.slow)
        if item.nodeid.startswith(needing):
            own = item.get_closest_marker("timeout")
            base = float(own.args[0]) if own and own.args else float(item.config.getini("timeout") or 0)
            if base:
                item.add_marker(pytest.mark.timeout(base + SETUP_TIMEOUT), append=False)
    grouped = tuple(prefix for prefixes in GROUPS.values() for prefix in prefixes)
    long = (*SLOW, "statekit[")  # the slow ones and the plugin's generated ones next, the many short last
    items.sort(key=lambda item: (not item.nodeid.startswith(grouped), not item.nodeid.startswith(long)))


@pytest.hookimpl(optionalhook=True)  # a serial run (-p no:xdist) has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Spread tests one by one over the processes, except each group of ``GROUPS``: a group's tests go
    to one process, in order (xdist's own ``loadgroup`` needs markers it reads from node ids, which
    pytest 9 no longer lets it rewrite)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return next((name for name, prefixes in GROUPS.items() if nodeid.startswith(prefixes)), nodeid)

    return GroupScheduling(config, log)
