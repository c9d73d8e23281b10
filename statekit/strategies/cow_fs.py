"""CowFilesystem: reset a directory tree (uploads, a SQLite file, a cache) by copy-on-write cloning.

Layout under ``root`` (every part on the same filesystem, so a rename publishes atomically)::

    goldens/<key>        one golden tree per key (a btrfs subvolume for the ``btrfs`` method)
    building/<name>      a golden being built; renamed to goldens/<key> when complete
    copies/<name>        restored copies, handed out as ``World.location`` (overlay: the mount point)
    upper/<name>         the overlay method's private upper and work directories, one per copy
    marks/<name>         bookmarks of copies (an overlay upper dir, or a btrfs snapshot)
    trash/<key>.<token>  dropped goldens that a mounted overlay copy may still read from

Methods, picked by probing ``root`` for real (``method="auto"``) in this order:

- ``btrfs``: goldens are subvolumes; a restore is ``btrfs subvolume snapshot`` (constant time).
- ``reflink``: ``cp -a --reflink=always``; files share extents until written (XFS with
  ``reflink=1``, btrfs). Time grows with the number of files, not their size.
- ``overlay``: a restore mounts overlayfs with the golden as the read-only lower layer and a fresh
  empty upper; writes copy a file up on first change. Needs root (or ``CAP_SYS_ADMIN``).
- ``copy``: ``shutil.copytree``; works anywhere, costs a full copy per reset.

Copies are named with ``statekit.strategies.naming`` so the copies, builds and overlay mounts of a
dead process are swept when a new ``CowFilesystem`` starts on the same root.

Rewinding a copy in place (``rewind``) costs what changed: an overlay copy is unmounted, its upper
directory emptied (or replaced by a bookmark's) and mounted again at the same path; a btrfs copy is
re-snapshotted at the same path; a reflink or plain copy is synced from its golden file by file, for
the entries whose identity (inode, ctime, mtime, size, mode) changed since it was restored. Bookmarks
(``mark``) need overlay (a copy of the upper directory) or btrfs (a snapshot).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

from statekit.entropy import true_token
from statekit.errors import ConfigError, ResetError, RewindError
from statekit.strategies import tree_changes
from statekit.strategies.base import Builder, Capabilities, ResetStrategy, World
from statekit.strategies.filesystems import (
    OVERLAY_UNSAFE,
    Identity,
    changed_since,
    filesystem_type,
    identities,
    is_btrfs_subvolume,
    libc,
    mount_overlay,
    mounts_under,
    overlay_lowerdirs,
    run,
    sync_tree,
    umount,
)
from statekit.strategies.naming import CopyNamer, check_key, snapshot_owner

log = logging.getLogger(__name__)

METHODS = ("btrfs", "reflink", "overlay", "copy")
"""In the order ``auto`` tries them: the cheapest restore first."""

_HOW_TO_ENABLE = {
    "btrfs": "root on a btrfs filesystem with btrfs-progs installed (apt-get install btrfs-progs)",
    "reflink": "a filesystem with reflink support: XFS made with `mkfs.xfs -m reflink=1`, or btrfs",
    "overlay": "root (CAP_SYS_ADMIN), a kernel with overlayfs, and an upper filesystem it accepts "
    "(ext4, XFS, btrfs; not overlayfs itself)",
    "copy": "nothing",
}


@dataclass
class CowCopy:
    """What a copy's ``World.handle`` holds: where its golden is and, for overlay, its upper dir.

    ``upper`` holds exactly what changed since the golden (overlay), which is what an incremental
    files digest reads; ``manifest`` is a reflink or plain copy's entry identities at its last reset.
    """

    key: str
    golden: Path
    method: str
    upper: Path | None = None
    manifest: dict[bytes, Identity] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class _FilesMark:
    world_id: str
    path: Path | None
    """The saved state (an upper dir, a snapshot); None: the golden itself."""


class CowFilesystem(ResetStrategy):
    """Golden directory trees under ``root``, restored by the cheapest clone the filesystem offers."""

    def __init__(self, root: str | Path, *, method: str = "auto", prefix: str = "skfs") -> None:
        self.root = Path(root).resolve()
        self.names = CopyNamer(prefix)
        self._goldens = self.root / "goldens"
        self._building = self.root / "building"
        self._copies = self.root / "copies"
        self._upper = self.root / "upper"
        self._marks = self.root / "marks"
        self._trash = self.root / "trash"
        for folder in (self._goldens, self._building, self._copies, self._upper, self._marks, self._trash):
            folder.mkdir(parents=True, exist_ok=True)
        self._live: dict[str, str] = {}  # copy name -> key, for close()
        self._lock = threading.Lock()
        self._closed = False
        self._on_btrfs = filesystem_type(self.root) == "btrfs"
        self.swept = self.sweep_orphans()
        self.rejected: dict[str, str] = {}
        """Methods tried before the chosen one, each with why it did not work here."""
        self.method = self._choose(method)
        self.name = f"cow({self.method})"

    # -- choosing a method ----------------------------------------------------------------------
    def probe(self, method: str) -> str | None:
        """Try ``method`` for real on a tiny tree under ``root``; None if it works, else why not."""
        if method not in METHODS:
            raise ConfigError(f"unknown CowFilesystem method {method!r}; choose from {list(METHODS)}")
        if method == "overlay" and OVERLAY_UNSAFE.search(str(self.root)):
            return f"root {self.root} has whitespace, ',', ':' or '\\', which overlayfs options cannot carry"
        scratch = self._copies / self.names.episode()  # an episode name, so a crash mid-probe is swept
        try:
            scratch.mkdir()
            golden = scratch / "golden"
            self._new_tree(golden, method)
            (golden / "probe.txt").write_text("golden")
            clone = scratch / "clone"
            if method == "overlay":
                (scratch / "upper").mkdir()
                (scratch / "work").mkdir()
                clone.mkdir()
                mount_overlay(golden, scratch / "upper", scratch / "work", clone)
            else:
                self._clone_tree(golden, clone, method)
            (clone / "probe.txt").write_text("changed")
            if (golden / "probe.txt").read_text() != "golden":
                return "writing to the clone changed the golden"
            return None
        except (OSError, ResetError) as exc:
            return str(exc)
        finally:
            self._remove_tree(scratch)

    def _choose(self, method: str) -> str:
        if method == "auto":
            for candidate in METHODS:
                reason = self.probe(candidate)
                if reason is None:
                    log.debug(
                        "CowFilesystem at %s uses %s; rejected: %s", self.root, candidate, self.rejected
                    )
                    return candidate
                self.rejected[candidate] = reason
            raise ConfigError(f"no method works at {self.root}: {self.rejected}")
        reason = self.probe(method)
        if reason is not None:
            raise ConfigError(
                f"CowFilesystem method {method!r} does not work at {self.root}: {reason}. "
                f"It needs {_HOW_TO_ENABLE[method]}; or use method='auto' to pick what works."
            )
        return method

    # -- the strategy's verbs -------------------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        """Every method rewinds a copy (a plain copy by syncing it back); bookmarks need overlay or btrfs."""
        return Capabilities(rewinds=True)

    def has(self, key: str) -> bool:
        return (self._goldens / check_key(key)).is_dir()

    def capture(self, key: str, source: Builder | World) -> None:
        golden = self._goldens / check_key(key)
        if golden.is_dir():
            return
        scratch = self._building / self.names.building(key)
        self._remove_tree(scratch)
        try:
            if isinstance(source, World):
                self._clone_tree(Path(source.location), scratch, self._capture_method())
            else:
                self._new_tree(scratch, self.method)
                source(World(id=scratch.name, location=str(scratch)))
            try:
                os.rename(scratch, golden)
            except OSError:
                if not golden.is_dir():
                    raise
                self._remove_tree(scratch)  # another process published this key first
        except BaseException as exc:
            self._remove_tree(scratch)
            if isinstance(exc, ResetError | KeyboardInterrupt):
                raise
            raise ResetError(f"building golden {key!r} under {self._goldens} failed: {exc}") from exc

    def restore(self, key: str) -> World:
        golden = self._goldens / check_key(key)
        if not golden.is_dir():
            raise ResetError(f"no golden tree under key {key!r} in {self._goldens}; capture it first")
        name = self.names.episode()
        copy = self._copies / name
        with self._lock:
            self._live[name] = key
        handle = CowCopy(key=key, golden=golden, method=self.method)
        try:
            self._remove_tree(copy)  # a leftover of a dead process that had our pid (cp would nest into it)
            if self.method == "overlay":
                upper = self._upper / name
                (upper / "upper").mkdir(parents=True)
                (upper / "work").mkdir()
                copy.mkdir()
                mount_overlay(golden, upper / "upper", upper / "work", copy)
                handle.upper = upper / "upper"
            else:
                self._clone_tree(golden, copy, self.method)
                if self.method != "btrfs":
                    handle.manifest = identities(copy)
        except BaseException as exc:
            self._forget(name)
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise ResetError(f"restoring {key!r} into {copy} with {self.method} failed: {exc}") from exc
        return World(id=name, location=str(copy), handle=handle)

    def discard(self, world: World) -> None:
        if "/" in world.id or not world.id.startswith(f"{self.names.prefix}_e_"):
            raise ResetError(f"world {world.id!r} was not restored by a CowFilesystem with this prefix")
        self._forget(world.id)
        self._purge_trash()

    def drop(self, key: str) -> None:
        """Move the golden to trash; it is deleted once no overlay copy reads from it."""
        golden = self._goldens / check_key(key)
        if not golden.is_dir():
            return
        with contextlib.suppress(FileNotFoundError):  # a concurrent drop got there first
            os.rename(golden, self._trash / f"{key}.{true_token(4)}")
        self._purge_trash()

    def footprint(self, key: str) -> int | None:
        """Disk blocks of the golden tree, as ``du`` counts them (a hard-linked file once)."""
        golden = self._goldens / check_key(key)
        if not golden.is_dir():
            return None
        seen: set[tuple[int, int]] = set()
        total = 0
        for folder, dirs, files in os.walk(golden):
            for name in (folder, *(os.path.join(folder, entry) for entry in (*dirs, *files))):
                try:
                    info = os.lstat(name)
                except FileNotFoundError:  # dropped meanwhile
                    continue
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    total += info.st_blocks * 512
        return total

    # -- rewinding in place ---------------------------------------------------------------------
    def _copy_of(self, world: World) -> CowCopy:
        if not isinstance(world.handle, CowCopy) or not (self._copies / world.id).exists():
            raise RewindError(f"world {world.id!r} is not a live copy of this CowFilesystem")
        return world.handle

    def mark(self, world: World) -> object:
        handle = self._copy_of(world)
        saved = self._marks / self.names.episode()
        if self.method == "overlay":
            assert handle.upper is not None
            if not any(os.scandir(handle.upper)):
                return _FilesMark(world.id, None)  # nothing changed: the bookmark is the golden itself
            run("cp", "-a", "--", str(handle.upper), str(saved))
        elif self.method == "btrfs":
            run("btrfs", "subvolume", "snapshot", str(self._copies / world.id), str(saved))
        else:
            raise RewindError(f"bookmarks of a directory need overlay or btrfs, not {self.method}")
        return _FilesMark(world.id, saved)

    def forget(self, mark: object) -> None:
        if isinstance(mark, _FilesMark) and mark.path is not None:
            self._remove_tree(mark.path)

    def rewind(self, world: World, to: object = None) -> None:
        handle = self._copy_of(world)
        if to is not None and not (isinstance(to, _FilesMark) and to.world_id == world.id):
            raise RewindError(f"that bookmark belongs to another world than {world.id!r}")
        saved = None if to is None else to.path
        source = handle.golden if saved is None else saved
        copy = self._copies / world.id
        try:
            if self.method == "overlay":
                self._rewind_overlay(copy, handle, saved)
            elif self.method == "btrfs":
                run("btrfs", "subvolume", "delete", str(copy))
                run("btrfs", "subvolume", "snapshot", str(source), str(copy))
            else:
                handle.manifest = sync_tree(source, copy, handle.manifest, self.method)
        except RewindError:
            raise
        except (OSError, ResetError) as exc:
            raise RewindError(f"rewinding {copy} failed: {exc}") from exc

    def changes(self, world: World) -> object:
        """What the copy changed since its golden (``tree_changes``): from its overlay upper directory,
        or its restore-time manifest; a btrfs copy keeps neither."""
        handle = self._copy_of(world)
        copy = self._copies / world.id
        if handle.upper is not None:
            return tree_changes.describe(copy, *tree_changes.overlay_changed(handle.upper))
        if self.method == "btrfs":
            raise RewindError("a btrfs copy cannot tell its changes without a full comparison")
        stale, missing = changed_since(copy, handle.manifest)
        return tree_changes.describe(copy, sorted(stale | missing))

    def apply_changes(self, world: World, changes: object) -> None:
        self._copy_of(world)
        if not isinstance(changes, list):
            raise RewindError("not a directory's changes")
        tree_changes.apply(self._copies / world.id, changes)

    def _rewind_overlay(self, copy: Path, handle: CowCopy, saved: Path | None) -> None:
        """Unmount, empty the upper dir (or put the bookmark's back), mount again at the same path.
        An empty upper dir means nothing changed since the golden: then there is nothing to do."""
        assert handle.upper is not None
        if saved is None and not any(os.scandir(handle.upper)):
            return
        if libc.umount2(os.fsencode(copy), 0) != 0:
            err = ctypes.get_errno()
            raise RewindError(f"cannot unmount {copy} to rewind it: {os.strerror(err)} (is it in use?)")
        work = handle.upper.parent / "work"
        shutil.rmtree(handle.upper)
        shutil.rmtree(work)
        if saved is None:
            handle.upper.mkdir()
        else:
            run("cp", "-a", "--", str(saved), str(handle.upper))
        work.mkdir()
        mount_overlay(handle.golden, handle.upper, work, copy)

    def close(self) -> None:
        """Discard the copies still handed out: a mount must not outlive the strategy that made it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            names = list(self._live)
        for name in names:
            self._forget(name)
        self._purge_trash()

    # -- orphans --------------------------------------------------------------------------------
    def sweep_orphans(self) -> list[str]:
        """Unmount and delete the copies, builds and snapshot goldens of dead processes on this host.

        Returns their names. Copies go first: an overlay copy may read a snapshot golden as its lower
        layer. The world cache's goldens have no owner and stay.
        """
        swept = []
        for folder in (self._copies, self._upper, self._marks, self._building):
            for entry in sorted(os.listdir(folder)):
                if self.names.is_orphan(entry):
                    log.warning("removing orphan %s", folder / entry)
                    self._remove_tree(folder / entry)
                    swept.append(entry)
        for entry in sorted(os.listdir(self._goldens)):
            owner = snapshot_owner(entry)
            if owner is not None and not owner.is_alive():
                log.warning("dropping the snapshot golden %s of a dead process", entry)
                self.drop(entry)
                swept.append(entry)
        self._purge_trash()
        return sorted(set(swept))

    # -- internals ------------------------------------------------------------------------------
    def _capture_method(self) -> str:
        """How to copy a live copy into a new golden: an overlay's merged view is copied in full."""
        return "copy" if self.method == "overlay" else self.method

    def _forget(self, name: str) -> None:
        """Unmount and delete one copy (and its overlay upper); safe on one already gone."""
        self._remove_tree(self._copies / name)
        self._remove_tree(self._upper / name)
        with self._lock:
            self._live.pop(name, None)

    def _purge_trash(self) -> None:
        """Delete dropped goldens that no mounted overlay still uses as its lower layer."""
        entries = os.listdir(self._trash)
        if not entries:
            return
        in_use = overlay_lowerdirs()
        for entry in entries:
            key = entry.split(".", 1)[0]
            if str(self._goldens / key) not in in_use:
                self._remove_tree(self._trash / entry)

    def _new_tree(self, path: Path, method: str) -> None:
        """An empty directory to build in: a subvolume for btrfs, so it can be snapshotted later."""
        if method == "btrfs":
            run("btrfs", "subvolume", "create", str(path))
        else:
            path.mkdir()

    def _clone_tree(self, src: Path, dst: Path, method: str) -> None:
        """Make ``dst`` (which must not exist) an independent copy of ``src``."""
        if method == "btrfs":
            if self._on_btrfs and is_btrfs_subvolume(src):
                run("btrfs", "subvolume", "snapshot", str(src), str(dst))
            else:  # e.g. a live world that came from elsewhere: share extents where possible
                run("btrfs", "subvolume", "create", str(dst))
                run("cp", "-a", "--reflink=auto", "--", f"{src}/.", str(dst))
        elif method == "reflink":
            run("cp", "-a", "--reflink=always", "--", str(src), str(dst))
        else:
            shutil.copytree(src, dst, symlinks=True)

    def _remove_tree(self, path: Path) -> None:
        """Unmount what is mounted at or below ``path``, then delete; a subvolume goes whole (no walk).

        Unmounting first matters: deleting through a mounted overlay would delete from its layers.
        """
        if not os.path.lexists(path):
            return
        for point in mounts_under(path):
            while os.path.ismount(point):
                umount(Path(point))
        if self._on_btrfs and is_btrfs_subvolume(path):
            with contextlib.suppress(ResetError):  # e.g. nested subvolumes: the walk below handles them
                run("btrfs", "subvolume", "delete", str(path))
                return
        shutil.rmtree(path, ignore_errors=True)
        if os.path.lexists(path):
            raise ResetError(f"could not delete {path}; remove it by hand (is something still using it?)")


__all__ = ["METHODS", "CowCopy", "CowFilesystem", "filesystem_type", "mounts_under"]
