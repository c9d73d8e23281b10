"""A directory copy's changes since its golden as JSON data, and applying them to another copy of the
same golden: the files part of an episode that moves (``CowFilesystem.changes``, ``statekit.transfer``).

Which paths changed comes from the copy-on-write method: an overlay copy's upper directory holds
exactly them, in O(changes) (a whiteout marks a deletion, an opaque directory hides the golden's
entries); a reflink or plain copy compares its entries' identities with those taken when it was
restored (``filesystems.changed_since``, a walk of the tree).
Each changed path is then described as the copy shows it: deleted, a directory, a symbolic link, or a
file with its bytes (base64). Applying deletes first (deepest first), then makes directories (parents
first), then writes links and files, never outside the copy.
"""

from __future__ import annotations

import base64
import os
import shutil
import stat
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path

from statekit.errors import RewindError

Entry = list[object]
"""``["delete", path]``, ``["dir", path, mode, replaced]``, ``["link", path, target]`` or
``["file", path, mode, b64]``."""
OPAQUE = "trusted.overlay.opaque"


def overlay_changed(upper: Path) -> tuple[list[bytes], set[bytes]]:
    """Relative paths an overlay copy changed (its upper directory's entries), and the directories
    among them that replaced the golden's (opaque: the golden's entries under them are hidden)."""
    base = os.fsencode(upper)
    changed: list[bytes] = []
    replaced: set[bytes] = set()
    for current, dirs, files in os.walk(base):
        for name in (*dirs, *files):
            path = os.path.join(current, name)
            changed.append(os.path.relpath(path, base))
            if name in dirs and _opaque(path):
                replaced.add(changed[-1])
    return changed, replaced


def _opaque(path: bytes) -> bool:
    try:
        return os.getxattr(path, OPAQUE, follow_symlinks=False) == b"y"
    except OSError:
        return False


def describe(copy: Path, changed: Iterable[bytes], replaced: AbstractSet[bytes] = frozenset()) -> list[Entry]:
    """Each changed path as the copy shows it now (see the module); a directory in ``replaced`` is
    marked so applying removes the golden's first."""
    base = os.fsencode(copy)
    out: list[Entry] = []
    for rel in changed:
        try:
            name = rel.decode()
        except UnicodeDecodeError as exc:
            raise RewindError(f"a file name that is not UTF-8 cannot move: {rel!r}") from exc
        path = os.path.join(base, rel)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            out.append(["delete", name])
            continue
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            out.append(["dir", name, mode, rel in replaced])
        elif stat.S_ISLNK(st.st_mode):
            try:
                out.append(["link", name, os.readlink(path).decode()])
            except UnicodeDecodeError as exc:
                raise RewindError(
                    f"the link {name} points at a name that is not UTF-8: it cannot move"
                ) from exc
        elif stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                out.append(["file", name, mode, base64.b64encode(f.read()).decode()])
        else:
            raise RewindError(f"{name} is neither a file, a directory nor a link: it cannot move")
    return out


def apply(copy: Path, entries: list[Entry]) -> None:
    """Make ``copy`` (a fresh copy of the golden ``entries`` were described against) hold them. Each
    path is checked against the copy as it is at that moment (an earlier entry may have made a link),
    and nothing is written through a link: a link or an entry of another kind is replaced."""
    root = os.path.realpath(copy)
    try:
        parsed = [(str(e[0]), str(e[1]), e[2:]) for e in entries]
        for _, name, _ in parsed:
            _inside(root, name)  # all refused before anything is written
    except (IndexError, TypeError, ValueError) as exc:
        raise RewindError(f"not a directory's changes: {exc}") from exc
    try:
        for kind, name, _ in sorted(parsed, key=lambda e: -len(e[1])):
            if kind == "delete":
                _remove(_inside(root, name))
        for kind, name, rest in sorted(parsed, key=lambda e: len(e[1])):
            path = _inside(root, name)
            if kind == "dir":
                if (
                    rest[1] is True
                    or os.path.islink(path)
                    or (os.path.lexists(path) and not os.path.isdir(path))
                ):
                    _remove(path)  # a directory that replaced the golden's, or an entry that became one
                os.makedirs(path, exist_ok=True)
                os.chmod(path, int(str(rest[0])))
            elif kind == "link":
                _remove(path)
                os.symlink(str(rest[0]), path)
            elif kind == "file":
                if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
                    _remove(path)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(base64.b64decode(str(rest[1]), validate=True))
                    os.fchmod(f.fileno(), int(str(rest[0])))
            elif kind != "delete":
                raise RewindError(f"unknown kind of change {kind!r}")
    except (OSError, ValueError, IndexError) as exc:
        raise RewindError(f"applying the changes to {copy} failed: {exc}") from exc


def _inside(root: str, name: str) -> str:
    """``name`` under ``root``, refused when it (or a link on its way) leads outside."""
    path = os.path.normpath(os.path.join(root, name))
    parent = os.path.realpath(os.path.dirname(path))
    if os.path.isabs(name) or not (parent == root or parent.startswith(root + os.sep)) or path == root:
        raise ValueError(f"{name!r} is not a path inside the copy")
    return path


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
