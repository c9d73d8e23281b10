"""Where statekit keeps what outlives a process: golden worlds, the embedded cluster, caches.

``$STATEKIT_HOME``, default ``~/.cache/statekit``, shared by every checkout of the same user. A
module of its own so adapters can find it without importing the PostgreSQL machinery.
"""

from __future__ import annotations

import os
from pathlib import Path


def statekit_home() -> Path:
    """``$STATEKIT_HOME`` or ``~/.cache/statekit`` (not created here)."""
    return Path(os.environ.get("STATEKIT_HOME", Path.home() / ".cache" / "statekit"))
