#!/usr/bin/env bash
# The main job: install statekit into .venv and run `statekit demo` on the embedded PostgreSQL
# (system binaries if present, else the ones bundled in the pgserver wheel). No server to install.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/venv.sh embedded
exec .venv/bin/statekit demo "$@"
