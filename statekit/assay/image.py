"""Read files out of a container image without running anything in it.

A container is created (never started) from the image and its flattened filesystem is streamed
through ``docker export`` into a streaming tar reader that keeps only the files asked for. Nothing
in the image executes, so an image with no shell or no Python is read the same way, and the files
read are exactly what ships (layers already applied, deleted files gone). The container carries
statekit's owner label, so a crash mid-read leaves it to ``ContainerPerEpisode``'s sweep.
"""

from __future__ import annotations

import io
import re
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from statekit.errors import ConfigError
from statekit.strategies.container import OWNER_LABEL
from statekit.strategies.naming import Owner

DIST_METADATA = re.compile(
    r"(?:(?:.+/)?site-packages|usr/local/lib/python3[^/]*/dist-packages)/[^/]+\.dist-info/METADATA"
)
"""Wheels pip installed: into a virtualenv or a CPython's site-packages, or (Debian's pip) into
/usr/local/lib/python3.X/dist-packages. /usr/lib/python3/dist-packages is dpkg's: its packages count."""
DOC_DIR = re.compile(r"usr/share/doc/([^/]+)")


@dataclass
class ImageFiles:
    files: dict[str, bytes] = field(default_factory=dict)
    doc_links: dict[str, str] = field(default_factory=dict)
    """``/usr/share/doc/PKG`` directories that are symlinks, to the directory they point at."""


class _ChunkReader(io.RawIOBase):
    """The Docker SDK's export generator as a file object tarfile can stream from."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(target), len(self._buffer))
        target[:size] = self._buffer[:size]
        self._buffer = self._buffer[size:]
        return size


def read_files(client: Any, image: str, wanted: Callable[[str], bool]) -> ImageFiles:
    """The files of ``image`` for which ``wanted(path)`` is true (paths without a leading slash)."""
    try:
        container = client.containers.create(
            image,
            entrypoint=["/nonexistent"],  # never started; an entrypoint keeps create from needing a CMD
            network_disabled=True,
            labels={OWNER_LABEL: Owner.current().label},
        )
    except Exception as exc:
        raise ConfigError(f"cannot create a container from image {image} to read it: {exc}") from exc
    found = ImageFiles()
    try:
        stream = io.BufferedReader(_ChunkReader(iter(container.export(chunk_size=1 << 20))), 1 << 20)
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                name = member.name.removeprefix("./").lstrip("/")
                doc = DOC_DIR.fullmatch(name)
                if doc and member.issym():
                    found.doc_links[doc.group(1)] = member.linkname.rstrip("/").rsplit("/", 1)[-1]
                elif member.isfile() and wanted(name):
                    handle = tar.extractfile(member)
                    if handle is not None:
                        found.files[name] = handle.read()
    finally:
        container.remove(force=True)
    return found
