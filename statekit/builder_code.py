"""A hash of the code that builds an adapter's worlds, so a changed builder is never served an old world.

A golden is cached under the adapter's ``fingerprint()``; a fingerprint written by hand (``{"builder":
"1"}``) stays the same when the builder changes, and the old world is then served without a word.
``builder_code(adapter)`` hashes the source files of the modules that define the adapter's classes
(every class of its type outside statekit) and those it names in ``builder_modules`` (the app's seed
script, say): ``SqlAdapter``'s default fingerprint includes it, and the world cache records it beside
each golden it builds and warns when a golden is served to different code under the same fingerprint.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import sys
import weakref
from pathlib import Path


def builder_modules(adapter: object) -> list[str]:
    """The modules whose code may build the adapter's worlds, sorted (statekit's own wrappers, such as
    ``AdapterWrapper``, are looked through to the adapter they wrap)."""
    adapter = _unwrapped(adapter)
    names = {
        cls.__module__
        for cls in type(adapter).__mro__
        if cls.__module__.split(".")[0] not in ("builtins", "abc", "typing", "statekit")
    }
    names.update(getattr(adapter, "builder_modules", ()))
    return sorted(names)


_COMPUTED: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
"""Each adapter's hash, computed once: its fingerprint and the world cache both ask for it."""


def builder_code(adapter: object) -> str:
    """sha256 (16 hex digits) of the builder modules' source files (a module without one: the source of
    the adapter's classes defined in it, where Python can find it), read once per adapter."""
    adapter = _unwrapped(adapter)
    try:
        return _COMPUTED[adapter]
    except KeyError:
        code = _COMPUTED[adapter] = _hash(adapter)
        return code
    except TypeError:  # an adapter that cannot be weakly referenced (``__slots__``): no memo
        return _hash(adapter)


def _hash(adapter: object) -> str:
    digest = hashlib.sha256()
    for name in builder_modules(adapter):
        digest.update(name.encode() + b"\0")
        source = _source_file(name)
        if source is not None:
            digest.update(source.read_bytes())
        else:  # no file (a notebook's __main__): the source of the adapter's classes defined there
            for cls in type(adapter).__mro__:
                if cls.__module__ == name:
                    with contextlib.suppress(OSError, TypeError):
                        digest.update(inspect.getsource(cls).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _unwrapped(adapter: object) -> object:
    while type(adapter).__module__.split(".")[0] == "statekit" and "inner" in vars(adapter):
        adapter = vars(adapter)["inner"]
    return adapter


def _source_file(name: str) -> Path | None:
    """Where module ``name``'s source is, found without running it (None: it has no file, as
    ``__main__`` in a notebook)."""
    module = sys.modules.get(name)
    if module is not None:
        found = getattr(module, "__file__", None)
    else:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        found = spec.origin if spec is not None else None
    return Path(found) if found and Path(found).is_file() else None
