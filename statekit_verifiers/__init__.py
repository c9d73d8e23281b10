"""statekit's verifiers taskset under the name verifiers looks up: ``vf-eval statekit-verifiers``.

verifiers imports a taskset by a top-level module name (``statekit-verifiers`` -> this package) and
takes the ``Taskset`` and ``Env`` its ``__all__`` exports; they are ``statekit.integrations.verifiers``'s.
"""

from statekit.integrations.verifiers import *  # noqa: F403
from statekit.integrations.verifiers import __all__ as __all__
