#!/usr/bin/env bash
# .venv-nemo-gym: NeMo Gym (nemo-gym 0.4, which needs Python >= 3.12) and statekit's core, for
# statekit.integrations.nemo_gym (a NeMo Gym resources server). This machine's Python is 3.11, so the
# venv is made with a Python >= 3.12 found on it (python3.12 on PATH, or pyenv's).
# tests/integrations/test_nemo_gym.py starts the resources server from it.
set -euo pipefail
cd "$(dirname "$0")/.."
python=""
for candidate in python3.13 python3.12 "$(pyenv root 2>/dev/null)"/versions/3.1[23]*/bin/python3 \
                 /root/.pyenv/versions/3.1[23]*/bin/python3 /usr/bin/python3.12 /usr/local/bin/python3.12; do
  if "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    python="$candidate"
    break
  fi
done
if [ -z "$python" ]; then
  echo "NeMo Gym needs Python >= 3.12 and none was found (python3.12 on PATH, pyenv)" >&2
  exit 1
fi
bash scripts/side-venv.sh .venv-nemo-gym "$python" "nemo-gym==0.4.0"
.venv-nemo-gym/bin/python -c "import nemo_gym, statekit" || { echo "nemo_gym does not import from .venv-nemo-gym" >&2; exit 1; }
