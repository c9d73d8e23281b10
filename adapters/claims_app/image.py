"""The claims environment image: built offline on the local base image, tagged by its content hash.

Wheels come from ``images/claims-requirements.txt`` (exact pins), downloaded on the host into the
build context, so the build itself needs no network. The tag is a hash of everything that decides
the image's content (Dockerfile, pins, base image id, source files), so a rebuild happens exactly
when something changed; callers pin the resulting image id, never the tag.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from statekit import ConfigError
from statekit.kit import image_on_base

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "statekit/claims-env"
DOCKERFILE = ROOT / "images" / "claims.Dockerfile"
REQUIREMENTS = ROOT / "images" / "claims-requirements.txt"
# statekit_examples holds two links (to adapters/ and examples/): copied as links, so the adapter finds
# digests/ and replay_cassettes/ beside its real directory, as in the repository.
SOURCES = ("statekit", "statekit_examples", "adapters", "examples", "digests", "replay_cassettes")


def _source_files() -> list[Path]:
    files = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append(path)
    return files


def content_hash(base_id: str) -> str:
    h = hashlib.sha256(base_id.encode())
    for path in [DOCKERFILE, REQUIREMENTS, *_source_files()]:
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def ensure_image(client: Any) -> str:
    """The id of the claims environment image, building it first if its content changed."""
    return image_on_base(client, REPOSITORY, content_hash, _context)


def _context(context: Path) -> None:
    """The build context: the pinned wheels (downloaded here, on the host), the sources, the Dockerfile."""
    wheels = context / "wheelhouse"
    wheels.mkdir()
    shutil.copy(REQUIREMENTS, wheels / "requirements.txt")
    download = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--only-binary=:all:",
            "--no-deps",
            "-r",
            str(REQUIREMENTS),
            "-d",
            str(wheels),
        ],
        capture_output=True,
        text=True,
    )
    if download.returncode != 0:
        raise ConfigError(f"downloading the pinned wheels failed:\n{download.stderr[-2000:]}")
    for top in SOURCES:
        shutil.copytree(
            ROOT / top,
            context / "src" / top,
            symlinks=True,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )
    shutil.copy(DOCKERFILE, context / "Dockerfile")
