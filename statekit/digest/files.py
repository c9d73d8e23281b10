"""Digest a directory tree (an upload directory, a cache) like a table: one canonical row per entry.

Rows are ordered by relative path (byte order, whatever the locale) and carry what a reader can
observe: the entry's type, a file's size and SHA-256, a symlink's target text, and directories
(so an empty directory the application creates still shows). Owners, modes and timestamps are
left out: copies made by different reset methods differ in them while holding the same state.

Mix the result into a database digest with ``combine``::

    tables = {**postgres_digest(url, spec).tables, **file_tables({"uploads": upload_dir})}
    digest = combine(tables)        # the table is named "files:uploads"

For an overlay copy (``CowFilesystem``), ``directory_digest`` updates a previous digest from the
copy's upper directory, which holds exactly what changed since the golden: O(changed entries).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statekit.digest.compute import Digest, TableDigest, combine, encode_row, hash_rows
from statekit.digest.dump import TableDump
from statekit.digest.multiset import MultisetHash
from statekit.errors import SpecError

TABLE_PREFIX = "files:"


def _relative_paths(root: Path) -> list[bytes]:
    """Every entry under ``root`` as a relative path in bytes, sorted (bytes sort the same everywhere)."""
    found: list[bytes] = []
    base = os.fsencode(root)
    for current, dirs, files in os.walk(base):  # os.walk does not follow symlinked directories
        for name in (*dirs, *files):
            found.append(os.path.relpath(os.path.join(current, name), base))
    return sorted(found)


def entry_row(root: str | Path, rel: bytes) -> dict[str, Any] | None:
    """The canonical row of one entry (a relative path in bytes), or None if it does not exist."""
    path = os.path.join(os.fsencode(root), rel)
    shown = rel.decode("utf-8", "backslashreplace")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(path).decode("utf-8", "backslashreplace")
        return {"path": shown, "type": "symlink", "target": target}
    if stat.S_ISDIR(info.st_mode):
        return {"path": shown, "type": "dir"}
    if stat.S_ISREG(info.st_mode):
        with open(path, "rb") as f:
            sha = hashlib.file_digest(f, "sha256").hexdigest()
        return {"path": shown, "type": "file", "size": info.st_size, "sha256": sha}
    raise SpecError(f"{root}: {shown} is a device, socket or pipe; only files, dirs, symlinks digest")


def file_rows(root: str | Path) -> Iterator[dict[str, Any]]:
    """Canonical rows for the tree at ``root``, streamed: only the list of paths is held in memory."""
    root = Path(root)
    if not root.is_dir():
        raise SpecError(f"cannot digest {root}: not a directory")
    for rel in _relative_paths(root):
        row = entry_row(root, rel)
        if row is not None:
            yield row


def file_tables(roots: Mapping[str, str | Path]) -> dict[str, TableDigest]:
    """``{"files:NAME": TableDigest}`` for each named directory, ready to merge into ``combine``."""
    return {f"{TABLE_PREFIX}{name}": hash_rows(file_rows(root)) for name, root in sorted(roots.items())}


def file_dump(root: str | Path) -> TableDump:
    """The rows of ``file_rows`` as a dump table keyed by path (for ``statekit dump``/``diff``)."""
    return TableDump(
        key=["path"], ordered=True, rows=[{"key": [r["path"]], "row": r} for r in file_rows(root)]
    )


@dataclass(frozen=True)
class FilesResume:
    """The golden tree a copy came from, and that tree's hash: the base of every update."""

    golden: str
    acc: MultisetHash


def _overlay_changes(upper: Path, golden: Path) -> set[bytes]:
    """Relative paths whose entry may differ from the golden: everything in the upper dir, plus the
    golden's entries under a deleted (whiteout) or opaque (replaced) directory."""
    changed: set[bytes] = set()
    base, lower = os.fsencode(upper), os.fsencode(golden)
    for current, dirs, files in os.walk(base):
        for name in (*dirs, *files):
            path = os.path.join(current, name)
            rel = os.path.relpath(path, base)
            changed.add(rel)
            info = os.lstat(path)
            hides_lower = stat.S_ISCHR(info.st_mode) and info.st_rdev == 0  # a whiteout
            if stat.S_ISDIR(info.st_mode):
                try:
                    hides_lower = os.getxattr(path, b"trusted.overlay.opaque", follow_symlinks=False) == b"y"
                except OSError:
                    hides_lower = False
            below = os.path.join(lower, rel)
            if hides_lower and os.path.isdir(below) and not os.path.islink(below):
                for inner, inner_dirs, inner_files in os.walk(below):
                    changed.update(
                        os.path.relpath(os.path.join(inner, n), lower) for n in (*inner_dirs, *inner_files)
                    )
    return changed


def directory_digest(
    name: str,
    root: str | Path,
    *,
    golden: str | Path | None = None,
    upper: str | Path | None = None,
    since: Digest | None = None,
) -> Digest:
    """The digest of one directory as table ``files:NAME``.

    For an overlay copy give its ``golden`` (lower) and ``upper`` directories: the result then
    carries what a later call needs (``since``) to update it from the upper directory alone.
    """
    table = f"{TABLE_PREFIX}{name}"
    resume = since.resume.get(table) if since is not None and isinstance(since.resume, dict) else None
    if upper is None or golden is None:
        return combine({table: hash_rows(file_rows(root))})
    if not (isinstance(resume, FilesResume) and resume.golden == str(golden)):
        base = hash_rows(file_rows(golden)).acc  # once per copy: every later call starts from it
        assert base is not None
        resume = FilesResume(str(golden), base)
    acc = resume.acc.copy()
    for rel in _overlay_changes(Path(upper), Path(golden)):
        before, after = entry_row(golden, rel), entry_row(root, rel)
        if before is not None:
            acc.remove(encode_row(before))
        if after is not None:
            acc.add(encode_row(after))
    return combine({table: TableDigest.of(acc)}, resume={table: resume})
