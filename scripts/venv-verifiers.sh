#!/usr/bin/env bash
# .venv-verifiers: verifiers (Prime Intellect's environment framework) with its OpenEnv taskset, and
# statekit's core (statekit.integrations.verifiers is a verifiers taskset), in a venv of its own:
# verifiers 0.4's openenv extra pins mcp==2.0.0 and so resolves only with openenv 0.4.1, while
# statekit's dev venv holds openenv 0.10 (its validator) and fastmcp (mcp<2). verifiers runs the
# model's chat program through uv, which is in this venv. tests/integrations/test_verifiers.py and
# test_nemo_gym.py run its vf-eval against statekit.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/side-venv.sh .venv-verifiers python3 "verifiers[openenv]==0.4.0"
.venv-verifiers/bin/vf-eval --help >/dev/null || { echo "vf-eval does not run from .venv-verifiers" >&2; exit 1; }
