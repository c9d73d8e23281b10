"""The operating system's side of copy-on-write directories: commands, mounts, reflinks, btrfs
subvolumes and syncing a tree back, for ``statekit.strategies.cow_fs``."""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from statekit.digest.files import walk
from statekit.errors import ResetError

log = logging.getLogger(__name__)

MNT_DETACH = 2
OVERLAY_UNSAFE = re.compile(r"[\s,:\\]")  # separators in overlayfs mount options


Identity = tuple[int, int, int, int, int]
"""(inode, ctime_ns, mtime_ns, size, mode) of an entry: any write, chmod, rename or replace changes it."""


def run(*command: str) -> None:
    """Run a tool; its stderr becomes the ResetError's message (stdout chatter is dropped)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise ResetError(f"{command[0]} is not installed") from exc
    if done.returncode != 0:
        raise ResetError(f"`{' '.join(command)}` failed: {(done.stderr or done.stdout).strip()}")


def identities(root: Path) -> dict[bytes, Identity]:
    """Every entry under ``root`` with its identity, keyed by relative path (bytes)."""
    base = os.fsencode(root)
    out: dict[bytes, Identity] = {}
    for current, dirs, files in walk(base):
        for name in (*dirs, *files):
            path = os.path.join(current, name)
            st = os.lstat(path)
            out[os.path.relpath(path, base)] = (
                st.st_ino,
                st.st_ctime_ns,
                st.st_mtime_ns,
                st.st_size,
                st.st_mode,
            )
    return out


def changed_since(copy: Path, manifest: dict[bytes, Identity]) -> tuple[set[bytes], set[bytes]]:
    """Entries of ``copy`` whose identity changed since ``manifest`` was taken (written, replaced or
    added), and those gone since."""
    now = identities(copy)
    return {path for path, ident in now.items() if manifest.get(path) != ident}, set(manifest) - set(now)


def sync_tree(
    source: Path, copy: Path, manifest: dict[bytes, Identity], method: str
) -> dict[bytes, Identity]:
    """Make ``copy`` equal ``source`` again, touching only entries whose identity changed since the
    ``manifest`` was taken (an entry's ctime moves on every write, chmod or rename; it cannot be set back).
    Returns the copy's new manifest."""
    before = manifest
    stale, missing = changed_since(copy, manifest)
    src, dst = os.fsencode(source), os.fsencode(copy)
    for path in sorted(stale, key=len, reverse=True):  # deepest first: a new dir's children go first
        target = os.path.join(dst, path)
        if os.path.isdir(target) and not os.path.islink(target):
            if path in before and stat.S_ISDIR(before[path][4]):
                shutil.copystat(os.path.join(src, path), target, follow_symlinks=False)
                continue  # a directory that only gained or lost entries: those are handled one by one
            shutil.rmtree(target)
        elif os.path.lexists(target):
            os.unlink(target)
    for path in sorted((stale | missing) & set(before), key=len):  # parents first
        origin, target = os.path.join(src, path), os.path.join(dst, path)
        if os.path.lexists(target):
            continue
        if os.path.isdir(origin) and not os.path.islink(origin):
            os.mkdir(target)
            shutil.copystat(origin, target, follow_symlinks=False)
        elif method == "reflink" and not os.path.islink(origin):
            run("cp", "-a", "--reflink=always", "--", os.fsdecode(origin), os.fsdecode(target))
        else:
            shutil.copy2(origin, target, follow_symlinks=False)
    return identities(copy)


def is_btrfs_subvolume(path: Path) -> bool:
    """On btrfs, a subvolume's root directory is always inode 256 (ask only about btrfs paths)."""
    try:
        return path.stat().st_ino == 256 and path.is_dir()
    except FileNotFoundError:
        return False


libc = ctypes.CDLL(None, use_errno=True)


def mount_overlay(lower: Path, upper: Path, work: Path, target: Path) -> None:
    """mount(2) directly: a reset should not pay for starting mount(8)."""
    # pinned, whatever the kernel's defaults: a renamed directory or a metadata-only copy-up would
    # leave content in the lower layer that the upper one (what the digest reads) does not show
    options = f"lowerdir={lower},upperdir={upper},workdir={work},redirect_dir=off,metacopy=off"
    if libc.mount(b"overlay", os.fsencode(target), b"overlay", 0, options.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mounting overlayfs at {target} failed: {os.strerror(err)}")


def umount(target: Path) -> None:
    """Unmount; a busy mount (a process still inside it) is detached lazily so discard never hangs, and
    one already unmounted by another process is done."""
    if libc.umount2(os.fsencode(target), 0) == 0:
        return
    err = ctypes.get_errno()
    if err == errno.EINVAL and not os.path.ismount(target):
        return  # another process (a sweeping harness worker) unmounted it first
    if err == errno.EBUSY:
        log.warning("%s is busy; detaching it lazily", target)
        if libc.umount2(os.fsencode(target), MNT_DETACH) == 0:
            return
        err = ctypes.get_errno()
    raise ResetError(f"unmounting {target} failed: {os.strerror(err)}")


def mountinfo() -> list[tuple[str, str, str]]:
    """(mount point, filesystem type, superblock options) of every mount in this namespace."""
    mounts = []
    with open("/proc/self/mountinfo") as lines:
        for line in lines:
            head, _, tail = line.partition(" - ")
            fields, more = head.split(), tail.split()
            if len(fields) < 5 or len(more) < 3:
                continue
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            mounts.append((point, more[0], more[2]))
    return mounts


def filesystem_type(path: Path) -> str:
    """The type of the filesystem ``path`` lives on (``ext4``, ``xfs``, ``btrfs``, ``overlay``...)."""
    best, kind = "", "unknown"
    for point, fstype, _ in mountinfo():
        inside = str(path) == point or str(path).startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fstype
    return kind


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path``, deepest first (the order they must be unmounted in)."""
    top = str(path)
    points = {point for point, _, _ in mountinfo() if point == top or point.startswith(top + "/")}
    return sorted(points, key=len, reverse=True)


def overlay_lowerdirs() -> set[str]:
    """The lower directories of every overlay mounted in this mount namespace."""
    lowers: set[str] = set()
    for _, fstype, options in mountinfo():
        if fstype != "overlay":
            continue
        for option in options.split(","):
            if option.startswith("lowerdir="):
                lowers.update(option.removeprefix("lowerdir=").split(":"))
    return lowers
