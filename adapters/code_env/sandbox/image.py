"""The container layer's image: the local base image plus the runner, built offline, tagged by content.

``images/code-env.Dockerfile`` adds an unprivileged ``sandbox`` user and ``/opt/statekit/runner.py``
to ``statekit/base:bookworm`` (built by ``scripts/build-base-image.sh`` with mmdebstrap: no registry
is ever contacted). The tag is a hash of the base image id, the Dockerfile and the runner, so the image
is rebuilt exactly when one of them changes; callers pin the resulting image *id*.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from statekit.kit import image_on_base
from statekit_examples.adapters.code_env.sandbox import runner

ROOT = Path(__file__).resolve().parents[3]
REPOSITORY = "statekit/code-env"
DOCKERFILE = ROOT / "images" / "code-env.Dockerfile"
RUNNER = Path(runner.__file__)


def content_hash(base_id: str) -> str:
    h = hashlib.sha256(base_id.encode())
    for path in (DOCKERFILE, RUNNER):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def ensure_image(client: Any) -> str:
    """The id of the sandbox image, building it first if its content changed."""
    return image_on_base(client, REPOSITORY, content_hash, _context)


def _context(context: Path) -> None:
    shutil.copy(DOCKERFILE, context / "Dockerfile")
    shutil.copy(RUNNER, context / "runner.py")
