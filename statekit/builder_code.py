"""A hash of the code that builds an adapter's worlds, so a changed builder is never served an old world.

A golden is cached under the adapter's ``fingerprint()``; a fingerprint written by hand (``{"builder":
"1"}``) stays the same when the builder changes, and the old world is then served without a word.
``builder_code(adapter)`` hashes the source files of the modules that define the adapter's classes
(every class of its type outside statekit) and those it names in ``builder_modules`` (the app's seed
script, say): ``SqlAdapter``'s default fingerprint includes it, and the world cache records it beside
each golden it builds and warns when a golden is served to different code under the same fingerprint.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path


def builder_modules(adapter: object) -> list[str]:
    """The modules whose code may build the adapter's worlds, sorted (statekit's own wrappers, such as
    ``AdapterWrapper``, are looked through to the adapter they wrap)."""
    while type(adapter).__module__.split(".")[0] == "statekit" and "inner" in vars(adapter):
        adapter = vars(adapter)["inner"]
    names = {
        cls.__module__
        for cls in type(adapter).__mro__
        if cls.__module__.split(".")[0] not in ("builtins", "abc", "typing", "statekit")
    }
    names.update(getattr(adapter, "builder_modules", ()))
    return sorted(names)


def builder_code(adapter: object) -> str:
    """sha256 (16 hex digits) of the builder modules' source files (a module without one counts by name)."""
    digest = hashlib.sha256()
    for name in builder_modules(adapter):
        module = sys.modules.get(name) or importlib.import_module(name)
        digest.update(name.encode() + b"\0")
        source = getattr(module, "__file__", None)
        if source and Path(source).is_file():
            digest.update(Path(source).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]
