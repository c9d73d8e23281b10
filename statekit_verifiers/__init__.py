"""statekit's verifiers taskset under the name verifiers looks up: ``vf-eval statekit-verifiers``.

verifiers imports a taskset by a top-level module name (``statekit-verifiers`` -> this package); the
taskset itself is ``statekit.integrations.verifiers``.
"""

from statekit.integrations.verifiers import (
    StatekitConfig,
    StatekitData,
    StatekitEnv,
    StatekitEnvConfig,
    StatekitTask,
    StatekitTaskset,
)

__all__ = [
    "StatekitConfig",
    "StatekitData",
    "StatekitEnv",
    "StatekitEnvConfig",
    "StatekitTask",
    "StatekitTaskset",
]
