"""``python -m statekit.cli``: the command line (a container image's entrypoint runs it this way)."""

import sys

from statekit.cli import main

sys.exit(main())
