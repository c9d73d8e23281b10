"""The harness: any statekit environment served over HTTP, OpenEnv's WebSocket protocol and Gymnasium.

``statekit serve ADAPTER`` runs ``serve(HarnessConfig(...))``. Each session (one ``POST /reset``
without a ``session_id``, or one WebSocket connection) owns its own Environment; nothing is shared
between sessions. Clients: ``statekit.client.RemoteEnvironment`` (HTTP), OpenEnv's
``GenericEnvClient`` (``/ws``), ``statekit.gym.StatekitEnv`` (Gymnasium, local or remote).
"""

from __future__ import annotations

from statekit.harness.app import create_app
from statekit.harness.config import HarnessConfig
from statekit.harness.serve import serve

__all__ = ["HarnessConfig", "create_app", "serve"]
