"""Composite: reset several resources together, e.g. a database and the app's upload directory.

An application's state is rarely in one place. ``Composite({"db": PostgresTemplate(...), "files":
CowFilesystem(...)})`` is one strategy whose World holds one World per part (``handle``) and, as
``location``, a JSON object of the parts' locations. It is all or nothing: a capture that fails
leaves no part's golden, a restore that fails discards what the other parts had restored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from statekit.digest.canonical import canonical_json
from statekit.errors import ConfigError, ResetError, RewindError, ServerDown
from statekit.strategies.base import Builder, Capabilities, Health, ResetStrategy, World

log = logging.getLogger(__name__)


class Composite(ResetStrategy):
    """Several strategies under one key; the builder fills every part in one call."""

    def __init__(self, parts: dict[str, ResetStrategy]) -> None:
        if not parts:
            raise ConfigError("Composite needs at least one part")
        self.parts = dict(parts)
        self.name = "composite(" + ",".join(f"{n}={p.name}" for n, p in self.parts.items()) + ")"
        self._closed = False

    @staticmethod
    def join(worlds: dict[str, World]) -> World:
        """One World over the parts' worlds (also what the builder receives)."""
        return World(
            id="+".join(w.id for w in worlds.values()),
            location=canonical_json({name: w.location for name, w in worlds.items()}),
            handle=dict(worlds),
        )

    @property
    def capabilities(self) -> Capabilities:
        """A composite rewinds when every part does."""
        return Capabilities(rewinds=all(part.capabilities.rewinds for part in self.parts.values()))

    def leaves(self) -> list[ResetStrategy]:
        return [leaf for part in self.parts.values() for leaf in part.leaves()]

    def has(self, key: str) -> bool:
        return all(part.has(key) for part in self.parts.values())

    def capture(self, key: str, source: Builder | World) -> None:
        present = [name for name, part in self.parts.items() if part.has(key)]
        if len(present) == len(self.parts):
            return
        if present:  # a crash between two parts' publishes: rebuild the whole world
            log.warning("golden %s exists only in parts %s; rebuilding every part", key, present)
            for name in present:
                self.parts[name].drop(key)
        published: list[str] = []
        try:
            if isinstance(source, World):
                worlds = self._part_worlds(source)
                for name, part in self.parts.items():
                    part.capture(key, worlds[name])
                    published.append(name)
            else:
                self._capture_nested(key, source, list(self.parts), {}, published)
            missing = [name for name, part in self.parts.items() if not part.has(key)]
            if missing:
                raise ResetError(
                    f"parts {missing} have no golden {key!r} after capture; another process may be "
                    "capturing the same key: retry"
                )
        except BaseException as exc:
            for name in published:
                self._quietly(f"dropping {name}'s golden {key}", self.parts[name].drop, key)
            if isinstance(exc, ResetError | KeyboardInterrupt):
                raise
            raise ResetError(f"building composite golden {key!r} failed: {exc}") from exc

    def _capture_nested(
        self, key: str, build: Builder, names: list[str], scratch: dict[str, World], published: list[str]
    ) -> None:
        """Each part's capture calls the next one's from inside its builder; the innermost builds.

        So ``build`` runs once, with every part's empty scratch world open at the same time, and the
        parts publish from the inside out only after it succeeded.
        """
        if not names:
            build(self.join({name: scratch[name] for name in self.parts}))
            return
        first, rest = names[0], names[1:]

        def build_part(world: World) -> None:
            scratch[first] = world
            self._capture_nested(key, build, rest, scratch, published)
            if len(scratch) < len(self.parts):
                # An inner part's golden appeared meanwhile (another process published it), so the
                # builder never ran and this part's scratch world is empty: it must not be published.
                inner = [name for name in self.parts if name not in scratch]
                raise ResetError(
                    f"parts {inner} of golden {key!r} were published by another builder while this "
                    "one built, so the world was not built here: retry"
                )

        self.parts[first].capture(key, build_part)
        if first in scratch:  # else another process published this part first: not ours to roll back
            published.append(first)

    def restore(self, key: str) -> World:
        worlds: dict[str, World] = {}
        try:
            for name, part in self.parts.items():
                worlds[name] = part.restore(key)
        except BaseException as exc:
            for name, world in worlds.items():
                self._quietly(f"rolling back {name}'s copy {world.id}", self.parts[name].discard, world)
            if isinstance(exc, KeyboardInterrupt | ServerDown):  # a server down says so, whatever the part
                raise
            failed = next(name for name in self.parts if name not in worlds)
            raise ResetError(
                f"restoring {key!r}: part {failed!r} failed ({exc}); discarded the copies of {list(worlds)}"
            ) from exc
        return self.join(worlds)

    def discard(self, world: World) -> None:
        worlds = self._part_worlds(world)
        problems = []
        for name, part in self.parts.items():
            try:
                part.discard(worlds[name])
            except Exception as exc:
                problems.append(f"{name}: {exc}")
        if problems:
            raise ResetError(f"discarding {world.id} failed in part(s): {'; '.join(problems)}")

    def recreate(self, world: World, key: str) -> World:
        """Each part rewound in place, or, where it cannot be, copied afresh in place (RewindError
        from a part that can do neither: the world is then discarded whole)."""
        fresh = {}
        for name, part_world in self._part_worlds(world).items():
            part = self.parts[name]
            try:
                part.rewind(part_world)
                fresh[name] = part_world
            except RewindError:
                fresh[name] = part.recreate(part_world, key)
        return self.join(fresh)

    def drop(self, key: str) -> None:
        for part in self.parts.values():
            part.drop(key)

    def footprint(self, key: str) -> int | None:
        sizes = [size for part in self.parts.values() if (size := part.footprint(key)) is not None]
        return sum(sizes) if sizes else None

    def prefetch(self, keys: list[str]) -> None:
        for part in self.parts.values():
            part.prefetch(keys)

    def mark(self, world: World) -> object:
        worlds = self._part_worlds(world)
        marks: dict[str, object] = {}
        try:
            for name, part in self.parts.items():
                marks[name] = part.mark(worlds[name])
        except BaseException:
            self.forget(marks)
            raise
        return marks

    def rewind(self, world: World, to: object = None) -> None:
        """Every part rewinds, or the world is not rewound (the caller then discards all of it)."""
        worlds = self._part_worlds(world)
        if to is not None and not (isinstance(to, dict) and set(to) == set(self.parts)):
            raise RewindError(f"that bookmark is not one of composite {self.name}")
        for name, part in self.parts.items():
            try:
                part.rewind(worlds[name], None if to is None else to[name])
            except RewindError as exc:
                raise RewindError(f"{name}: {exc.reason}") from exc

    def forget(self, mark: object) -> None:
        if isinstance(mark, dict):
            for name, part_mark in mark.items():
                if name in self.parts:
                    self._quietly(f"forgetting {name}'s bookmark", self.parts[name].forget, part_mark)

    def changes(self, world: World) -> Any:
        worlds = self._part_worlds(world)
        return {name: part.changes(worlds[name]) for name, part in self.parts.items()}

    def apply_changes(self, world: World, changes: Any) -> None:
        """Every part takes its changes, or the world goes back to its golden (the caller's to discard)."""
        worlds = self._part_worlds(world)
        if not (isinstance(changes, dict) and set(changes) == set(self.parts)):
            raise RewindError(f"those changes are not of composite {self.name}")
        for name, part in self.parts.items():
            try:
                part.apply_changes(worlds[name], changes[name])
            except RewindError as exc:
                raise RewindError(f"{name}: {exc.reason}") from exc

    def health(self, *, fresh: bool = False) -> Health:
        seen = [(name, part.health(fresh=fresh)) for name, part in self.parts.items()]
        down = next((f"{name}: {h.down}" for name, h in seen if h.down), None)
        return Health(down, max(h.restarts for _, h in seen))  # parts on one server share a watch

    def lost(self, world: World, *, fresh: bool = False) -> str | None:
        worlds = self._part_worlds(world)
        for name, part in self.parts.items():
            why = part.lost(worlds[name], fresh=fresh)
            if why:
                return f"{name}: {why}"
        return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for part in self.parts.values():
            part.close()

    def _part_worlds(self, world: World) -> dict[str, World]:
        handle = world.handle
        if not isinstance(handle, dict) or set(handle) != set(self.parts):
            raise ResetError(
                f"world {world.id!r} is not a Composite world of parts {list(self.parts)}; "
                "pass the World that Composite.restore returned"
            )
        return handle

    @staticmethod
    def _quietly(what: str, action: Callable[..., None], *args: object) -> None:
        """Cleanup after a failure must not hide the failure itself."""
        try:
            action(*args)
        except Exception:
            log.exception("%s failed", what)
