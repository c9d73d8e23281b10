"""Throwaway XFS and btrfs filesystems on loop devices, to test and benchmark ``CowFilesystem``.

A sparse image file, ``mkfs``, ``mount -o loop``; unmounted and deleted on exit. Needs root,
``/dev/loop-control`` and ``mkfs.xfs`` (xfsprogs) or ``mkfs.btrfs`` (btrfs-progs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MKFS = {
    "xfs": ["mkfs.xfs", "-q", "-m", "reflink=1"],
    "btrfs": ["mkfs.btrfs", "-q"],
}
PACKAGES = {"xfs": "xfsprogs", "btrfs": "btrfs-progs"}
_SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])


def loop_filesystem_problem(kind: str) -> str | None:
    """Why a ``kind`` loop filesystem cannot be made here, or None if it can."""
    if kind not in MKFS:
        return f"unknown filesystem {kind!r}; choose from {sorted(MKFS)}"
    if os.geteuid() != 0:
        return "loop mounts need root"
    if not os.path.exists("/dev/loop-control"):
        return "no /dev/loop-control: this kernel or container has no loop devices"
    for tool in (MKFS[kind][0], "mount", "umount"):
        if shutil.which(tool, path=_SBIN) is None:
            return f"{tool} is not installed (apt-get install {PACKAGES[kind]})"
    return None


@contextmanager
def loop_filesystem(kind: str, *, size_mb: int = 300) -> Iterator[Path]:
    """Yield the mount point of a fresh ``kind`` filesystem; unmount and delete it afterwards."""
    problem = loop_filesystem_problem(kind)
    if problem:
        raise RuntimeError(f"cannot make a {kind} loop filesystem: {problem}")
    work = Path(tempfile.mkdtemp(prefix=f"statekit-{kind}-"))
    image, mount_point = work / "image", work / "mnt"
    mount_point.mkdir()
    try:
        with image.open("wb") as f:
            f.truncate(size_mb * 1024 * 1024)  # sparse: costs no disk until written
        _run([*MKFS[kind], str(image)])
        _run(["mount", "-o", "loop", str(image), str(mount_point)])  # the loop device auto-clears
        try:
            yield mount_point
        finally:
            _unmount(mount_point)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _unmount(mount_point: Path) -> None:
    """Unmount everything at and below ``mount_point`` (leftover overlay copies first)."""
    done = subprocess.run(["umount", "-R", str(mount_point)], capture_output=True, text=True, check=False)
    if done.returncode != 0 and os.path.ismount(mount_point):
        _run(["umount", "-R", "--lazy", str(mount_point)])


def _run(command: list[str]) -> None:
    tool = shutil.which(command[0], path=_SBIN) or command[0]
    done = subprocess.run([tool, *command[1:]], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(command)}` failed: {(done.stderr or done.stdout).strip()}")
