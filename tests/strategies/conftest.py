"""Real filesystems for the copy-on-write tests: the default one, plus XFS and btrfs on loop devices.

Every case names a filesystem and a ``CowFilesystem`` method that this kind of machine supports.
Outside CI a case this machine cannot run (not root, no loop devices, no mkfs) is skipped with the
reason; in CI (``CI=true``) it is a failure, because CI provisions all of them (``scripts/test.sh``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from statekit.errors import ConfigError
from statekit.strategies.cow_fs import CowFilesystem, mounts_under
from statekit.testing.loopfs import loop_filesystem, loop_filesystem_problem

IN_CI = os.environ.get("CI") == "true"

CASES = [
    ("default", "overlay"),
    ("default", "copy"),
    ("xfs", "reflink"),
    ("btrfs", "reflink"),
    ("btrfs", "btrfs"),
]
"""(filesystem, method) pairs that must work; "default" is wherever pytest's tmp_path lives."""


def case_id(case: tuple[str, str]) -> str:
    return f"{case[1]}-on-{case[0]}"


def unavailable(reason: str) -> NoReturn:
    """Skip locally; fail in CI, where every case is provisioned and must run."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: this case must run, so it fails instead of skipping)")
    pytest.skip(reason)


def _loop_mount(kind: str) -> Iterator[Path]:
    problem = loop_filesystem_problem(kind)
    if problem:
        unavailable(f"no {kind} loop filesystem: {problem}")
    with loop_filesystem(kind, size_mb=400) as mount_point:
        yield mount_point


@pytest.fixture(scope="session")
def xfs_mount() -> Iterator[Path]:
    """An XFS filesystem made with reflink=1, for the whole session."""
    yield from _loop_mount("xfs")


@pytest.fixture(scope="session")
def btrfs_mount() -> Iterator[Path]:
    """A btrfs filesystem, for the whole session."""
    yield from _loop_mount("btrfs")


@pytest.fixture
def fs_root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A fresh directory on the filesystem named by the test's ``fs`` parameter."""
    kind = request.param if hasattr(request, "param") else "default"
    if kind == "default":
        root = tmp_path / "cow"
    else:
        mount_point: Path = request.getfixturevalue(f"{kind}_mount")
        root = mount_point / uuid.uuid4().hex[:12]
    yield root
    for point in mounts_under(root):  # only left by a failed test; never delete through a mount
        subprocess.run(["umount", "--lazy", point], check=False)
    shutil.rmtree(root, ignore_errors=True)


def make_cow(root: Path, method: str) -> CowFilesystem:
    """A CowFilesystem with ``method``, or skip/fail (see ``unavailable``) if it does not work here."""
    try:
        return CowFilesystem(root, method=method)
    except ConfigError as exc:
        unavailable(str(exc))
