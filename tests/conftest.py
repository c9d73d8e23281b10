"""Session-wide real services: one private PostgreSQL cluster for the whole test run.

The cluster is statekit's own embedded default (``SharedCluster``) under a throwaway
``STATEKIT_HOME``, so environments made without a URL in tests (the pytest plugin's generated tests,
``statekit.make``) and the fixtures below share one server. Set ``STATEKIT_TEST_PG_URL`` to use an
existing server instead (an admin URL, e.g. to the ``postgres`` database).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from statekit.postgres import PostgresServer, SharedCluster
from statekit.postgres.cluster import EmbeddedCluster

_HOME = tempfile.mkdtemp(prefix="statekit-test-home-")
os.environ["STATEKIT_HOME"] = _HOME
os.environ["STATEKIT_PG_LINGER"] = (
    "0"  # commands run by tests stop their servers (one test lingers on purpose)
)


@atexit.register
def _remove_home() -> None:
    """Every user of the test cluster is this process, and it is exiting: stop the server, delete it."""
    cluster_dir = Path(_HOME) / "pg"
    if (cluster_dir / "data").exists():
        EmbeddedCluster(cluster_dir).stop_server()
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresServer]:
    """A running PostgreSQL server; the embedded default unless STATEKIT_TEST_PG_URL is set."""
    url = os.environ.get("STATEKIT_TEST_PG_URL")
    if url:
        yield PostgresServer(url)
        return
    shared = SharedCluster()
    server = shared.acquire()
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
