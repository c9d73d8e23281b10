"""statekit's example worlds, installed under one name: ``adapters`` (links to the repository's
``adapters/``: the claims and code adapters) and ``apps`` (links to ``examples/``: the claims
application, which knows nothing of statekit)."""
