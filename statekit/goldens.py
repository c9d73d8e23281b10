"""Ship a golden world between machines: export it as bytes on one, load it on another.

A seed's golden is built once per cluster, not once per node: the node that built it exports it,
the others load the export under the same key instead of running the application's seed script.
Only the strategies' public verbs are used: ``restore`` hands out a copy to read (the golden itself
is never touched), ``capture`` with a builder that fills the scratch world publishes the import
exactly as a local build would (atomically, and not at all if the golden appeared meanwhile).

One codec per strategy class, in a registry:

| strategy | export | import |
| --- | --- | --- |
| ``InMemory`` | the copy's dict, pickled | a deep copy into the scratch dict |
| ``PostgresTemplate`` | ``pg_dump --format=custom`` of the copy | ``pg_restore`` into the scratch database |
| ``CowFilesystem`` | a tar of the copy's tree | extracted into the scratch tree |
| ``Composite`` | one export per part, from one restore | each part's import into its scratch part |
| ``Prewarmed``, ``Rewinding`` | its inner strategy's | its inner strategy's |

A strategy without a codec (containers, or one added later) exports ``None``: each node then
builds its own golden, which determinism makes identical, only slower.
"""

from __future__ import annotations

import copy
import io
import os
import pickle
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statekit.errors import ResetError
from statekit.postgres.cluster import find_pg_bindir
from statekit.postgres.server import to_conninfo
from statekit.strategies.base import Builder, ResetStrategy, World
from statekit.strategies.composite import Composite
from statekit.strategies.cow_fs import CowFilesystem
from statekit.strategies.memory import InMemory
from statekit.strategies.pg_template import PostgresTemplate

GOLDEN_FORMAT = 1


@dataclass(frozen=True)
class GoldenExport:
    """A golden world as bytes: which key, which strategy made it, and each part's payload."""

    key: str
    strategy: str
    body: Any
    format: int = GOLDEN_FORMAT

    @property
    def size(self) -> int:
        return len(pickle.dumps(self.body))


@dataclass(frozen=True)
class Codec:
    """``dump(strategy, copy)`` reads a restored copy; ``load(strategy, body)`` returns a builder."""

    dump: Callable[[Any, World], Any]
    load: Callable[[Any, Any], Builder]


CODECS: dict[type[ResetStrategy], Codec] = {}


def codec_for(strategy: ResetStrategy) -> tuple[ResetStrategy, Codec] | None:
    """The strategy that holds the data (a wrapper's innermost one) and its codec, or None."""
    strategy = strategy.storage
    for cls in type(strategy).__mro__:
        found = CODECS.get(cls)
        if found is not None:
            return strategy, found
    return None


def export_golden(strategy: ResetStrategy, key: str) -> GoldenExport | None:
    """The golden under ``key`` as bytes, or None when this strategy cannot ship its goldens."""
    found = codec_for(strategy)
    if found is None:
        return None
    inner, codec = found
    world = inner.restore(key)
    try:
        return GoldenExport(key=key, strategy=inner.name, body=codec.dump(inner, world))
    finally:
        inner.discard(world)


def import_golden(strategy: ResetStrategy, export: GoldenExport) -> None:
    """Publish ``export`` as this strategy's golden under its key (kept as is if one exists)."""
    if export.format != GOLDEN_FORMAT:
        raise ResetError(f"golden export format {export.format} is not {GOLDEN_FORMAT}: rebuild it here")
    found = codec_for(strategy)
    if found is None:
        raise ResetError(f"strategy {strategy.name!r} cannot load shipped goldens; build it here instead")
    inner, codec = found
    if inner.name != export.strategy:
        raise ResetError(
            f"golden {export.key} was exported by strategy {export.strategy!r}, this one is {inner.name!r}"
        )
    inner.capture(export.key, codec.load(inner, export.body))


# -- codecs ----------------------------------------------------------------------------------------
def _memory_dump(strategy: InMemory, world: World) -> Any:
    return copy.deepcopy(world.handle)


def _memory_load(strategy: InMemory, body: Any) -> Builder:
    def build(world: World) -> None:
        world.handle.update(copy.deepcopy(body))

    return build


def _pg_tool(name: str) -> str:
    return str(find_pg_bindir() / name)


def _pg_run(command: list[str], *, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(command, input=stdin, capture_output=True, check=False)
    if done.returncode != 0:
        raise ResetError(f"{Path(command[0]).name} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _pg_dump(strategy: PostgresTemplate, world: World) -> bytes:
    """The copy's schema and rows; owners and grants are left out (each node has its own roles)."""
    command = [_pg_tool("pg_dump"), "--format=custom", "--no-owner", "--no-privileges"]
    return _pg_run([*command, f"--dbname={strategy.server.conninfo(world.id)}"])  # statekit's rights


def _pg_load(strategy: PostgresTemplate, body: bytes) -> Builder:
    def build(world: World) -> None:
        command = [_pg_tool("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error"]
        _pg_run([*command, "--single-transaction", f"--dbname={to_conninfo(world.location)}"], stdin=body)

    return build


def _tree_dump(strategy: CowFilesystem, world: World) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for entry in sorted(os.listdir(world.location)):
            tar.add(os.path.join(world.location, entry), arcname=entry)
    return buffer.getvalue()


def _tree_load(strategy: CowFilesystem, body: bytes) -> Builder:
    def build(world: World) -> None:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r") as tar:
            tar.extractall(world.location, filter="data")

    return build


def _composite_dump(strategy: Composite, world: World) -> dict[str, Any]:
    body = {}
    for name, part in strategy.parts.items():
        found = codec_for(part)
        if found is None:
            raise ResetError(f"part {name!r} ({part.name}) cannot ship its goldens")
        inner, codec = found
        body[name] = codec.dump(inner, world.handle[name])
    return body


def _composite_load(strategy: Composite, body: dict[str, Any]) -> Builder:
    loaders = {}
    for name, part in strategy.parts.items():
        found = codec_for(part)
        if found is None:
            raise ResetError(f"part {name!r} ({part.name}) cannot load shipped goldens")
        inner, codec = found
        loaders[name] = codec.load(inner, body[name])

    def build(world: World) -> None:
        for name, load in loaders.items():
            load(world.handle[name])

    return build


CODECS[InMemory] = Codec(_memory_dump, _memory_load)
CODECS[PostgresTemplate] = Codec(_pg_dump, _pg_load)
CODECS[CowFilesystem] = Codec(_tree_dump, _tree_load)
CODECS[Composite] = Codec(_composite_dump, _composite_load)
