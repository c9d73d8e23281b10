"""Digest a directory tree (an upload directory, a cache) like a table: one canonical row per entry.

Rows are ordered by relative path (byte order, whatever the locale) and carry what a reader can
observe: the entry's type, a file's size and SHA-256, a symlink's target text, and directories
(so an empty directory the application creates still shows). Owners, modes and timestamps are
left out: copies made by different reset methods differ in them while holding the same state.

Mix the result into a database digest with ``combine``::

    tables = {**postgres_digest(url, spec).tables, **file_tables({"uploads": upload_dir})}
    digest = combine(tables)        # the table is named "files:uploads"
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from statekit.digest.compute import TableDigest, hash_rows
from statekit.digest.dump import TableDump
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


def file_rows(root: str | Path) -> Iterator[dict[str, Any]]:
    """Canonical rows for the tree at ``root``, streamed: only the list of paths is held in memory."""
    root = Path(root)
    if not root.is_dir():
        raise SpecError(f"cannot digest {root}: not a directory")
    for rel in _relative_paths(root):
        path = os.path.join(os.fsencode(root), rel)
        shown = rel.decode("utf-8", "backslashreplace")
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(path).decode("utf-8", "backslashreplace")
            yield {"path": shown, "type": "symlink", "target": target}
        elif stat.S_ISDIR(info.st_mode):
            yield {"path": shown, "type": "dir"}
        elif stat.S_ISREG(info.st_mode):
            with open(path, "rb") as f:
                sha = hashlib.file_digest(f, "sha256").hexdigest()
            yield {"path": shown, "type": "file", "size": info.st_size, "sha256": sha}
        else:
            raise SpecError(f"{root}: {shown} is a device, socket or pipe; only files, dirs, symlinks digest")


def file_tables(roots: Mapping[str, str | Path]) -> dict[str, TableDigest]:
    """``{"files:NAME": TableDigest}`` for each named directory, ready to merge into ``combine``."""
    return {f"{TABLE_PREFIX}{name}": hash_rows(file_rows(root)) for name, root in sorted(roots.items())}


def file_dump(root: str | Path) -> TableDump:
    """The rows of ``file_rows`` as a dump table keyed by path (for ``statekit dump``/``diff``)."""
    return TableDump(
        key=["path"], ordered=True, rows=[{"key": [r["path"]], "row": r} for r in file_rows(root)]
    )
