"""The agent's hands: five tools over the working directory, each a function in one registry.

Every path an agent names is confined to the working directory: an absolute path, a ``..``
component, or a symlink whose target lies outside is an error observation, as is a missing file, a
directory where a file was meant, a name the filesystem cannot hold (over 255 bytes), or content
over the size bound. Outputs are cut to a bound
(``max_chars``) and say so. Nothing here raises for anything the agent did; only the environment
failing (the sandbox) raises, and statekit turns that into an ``environment_error`` observation.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statekit.kit import Tool

MAX_WRITE_BYTES = 100_000
MAX_LISTED = 500
NAME_MAX = 255
"""Bytes in one file name (Linux's limit); the schema's 300 characters are for whole paths."""
PATH_ERRORS = frozenset({errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.ELOOP})
"""Errors of ``OSError`` the path alone explains: the agent's doing, an error observation, not a crash."""

_PATH = {
    "type": "string",
    "minLength": 1,
    "maxLength": 300,
    "description": "relative to the working directory",
}
TOOLS = [
    Tool(
        "list_files",
        "List every file in the working directory (relative paths, sorted).",
        {"type": "object", "additionalProperties": False},
    ),
    Tool(
        "view_file",
        "Read a file of the working directory.",
        {
            "type": "object",
            "properties": {"path": _PATH},
            "required": ["path"],
            "additionalProperties": False,
        },
    ),
    Tool(
        "write_file",
        "Create or overwrite a file of the working directory with new content.",
        {
            "type": "object",
            "properties": {"path": _PATH, "content": {"type": "string", "maxLength": MAX_WRITE_BYTES}},
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    ),
    Tool(
        "run_tests",
        "Run the visible tests (test_*.py) in the sandbox and show their output.",
        {"type": "object", "additionalProperties": False},
    ),
    Tool(
        "submit",
        "Submit the working directory as your solution. Ends the episode; hidden tests decide the reward.",
        {"type": "object", "additionalProperties": False},
    ),
]


class ToolError(Exception):
    """Something the agent asked for that cannot be done: becomes ``{"error": {code, message}}``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Workspace:
    """The working directory as the tools see it."""

    root: Path
    max_chars: int

    def resolve(self, path: str) -> Path:
        """``path`` inside the working directory, or a ToolError saying why it is refused."""
        if "\0" in path:
            raise ToolError("invalid_path", "paths cannot contain NUL characters")
        for part in Path(path).parts:
            if len(part.encode()) > NAME_MAX:
                raise ToolError(
                    "name_too_long",
                    f"{part[:40]!r}... is {len(part.encode())} bytes; a file name holds at most {NAME_MAX}",
                )
        if os.path.isabs(path):
            raise ToolError(
                "path_outside_workdir", f"{path!r} is absolute; use a path relative to the working directory"
            )
        parts = Path(path).parts
        if ".." in parts:
            raise ToolError("path_outside_workdir", f"{path!r} climbs out of the working directory ('..')")
        root = self.root.resolve()
        target = (root / path).resolve()  # follows symlinks: one that points outside shows here
        if target != root and root not in target.parents:
            raise ToolError(
                "path_outside_workdir", f"{path!r} resolves outside the working directory (a symlink)"
            )
        return target

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root.resolve()))

    def cut(self, text: str) -> tuple[str, bool]:
        if len(text) <= self.max_chars:
            return text, False
        return text[: self.max_chars] + f"\n[... truncated: {len(text)} characters in all]", True


def list_files(ws: Workspace, arguments: dict[str, Any]) -> dict[str, Any]:
    root = ws.root.resolve()
    found = []
    for current, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            found.append(os.path.relpath(os.path.join(current, name), root))
    found.sort()
    body: dict[str, Any] = {"files": found[:MAX_LISTED]}
    if len(found) > MAX_LISTED:
        body["truncated"] = True
    return body


def view_file(ws: Workspace, arguments: dict[str, Any]) -> dict[str, Any]:
    path = ws.resolve(str(arguments["path"]))
    try:
        info = path.lstat()
    except FileNotFoundError:
        raise ToolError("not_found", f"no file {arguments['path']!r}; list_files shows what exists") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError("is_a_directory", f"{arguments['path']!r} is a directory; list_files shows its files")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError("not_a_regular_file", f"{arguments['path']!r} is not a regular file")
    content, truncated = ws.cut(path.read_bytes().decode("utf-8", errors="replace"))
    body: dict[str, Any] = {"path": ws.relative(path), "content": content}
    if truncated:
        body["truncated"] = True
    return body


def write_file(ws: Workspace, arguments: dict[str, Any]) -> dict[str, Any]:
    path = ws.resolve(str(arguments["path"]))
    data = str(arguments["content"]).encode("utf-8", errors="surrogatepass")
    if len(data) > MAX_WRITE_BYTES:
        raise ToolError("too_large", f"content is {len(data)} bytes; the limit is {MAX_WRITE_BYTES}")
    if path == ws.root.resolve() or path.is_dir():
        raise ToolError("is_a_directory", f"{arguments['path']!r} is a directory")
    root = ws.root.resolve()
    for parent in reversed(path.relative_to(root).parents[:-1]):
        folder = root / parent
        if folder.exists() and not folder.is_dir():
            raise ToolError("not_a_directory", f"{ws.relative(folder)!r} is a file, not a directory")
        folder.mkdir(mode=0o755, exist_ok=True)
        folder.chmod(0o755)  # the sandbox's uid reads it; the umask must not decide that
    path.write_bytes(data)
    path.chmod(0o644)
    return {"path": ws.relative(path), "bytes": len(data)}


Handler = Callable[[Workspace, dict[str, Any]], dict[str, Any]]
HANDLERS: dict[str, Handler] = {"list_files": list_files, "view_file": view_file, "write_file": write_file}
"""The file tools; ``run_tests`` and ``submit`` need the sandbox and the episode (``CodeEpisode``)."""
