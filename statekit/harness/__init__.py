"""The harness: any statekit environment served over HTTP, OpenEnv's WebSocket protocol and Gymnasium.

``statekit serve ADAPTER`` runs ``serve(HarnessConfig(...))``. Each session (one ``POST /reset``
without a ``session_id``, or one WebSocket connection) owns its own Environment; nothing is shared
between sessions. Clients: ``statekit.client.RemoteEnvironment`` (HTTP), OpenEnv's
``GenericEnvClient`` (``/ws``), ``statekit.gym.StatekitEnv`` (Gymnasium, local or remote).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from statekit.harness.config import HarnessConfig
from statekit.harness.serve import serve

if TYPE_CHECKING:
    from statekit.harness.app import create_app

__all__ = ["HarnessConfig", "create_app", "serve"]


def __getattr__(name: str) -> Any:
    """FastAPI loads on first use of ``create_app``: a harness worker process never needs it."""
    if name == "create_app":
        from statekit.harness.app import create_app

        return create_app
    raise AttributeError(f"module 'statekit.harness' has no attribute {name!r}")
