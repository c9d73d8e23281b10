#!/usr/bin/env bash
# .venv-nemo-gym: NeMo Gym (nemo-gym 0.4, which needs Python >= 3.12) and statekit's core, editable,
# for statekit.integrations.nemo_gym (a NeMo Gym resources server). This machine's Python is 3.11, so
# the venv is made with a Python 3.12 found on it (python3.12 on PATH, or pyenv's); uv installs into it
# (about 10 s). tests/integrations/test_nemo_gym.py starts the resources server from it.
# Skips the install when the pins and pyproject.toml are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-nemo-gym
want="nemo-gym==0.4.0 uv==0.13.9 $(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat "$venv/.statekit-installed" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
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
rm -rf "$venv"
"$python" -m venv "$venv"
log=$(mktemp)
if ! { "$venv/bin/python" -m pip install -q --disable-pip-version-check "uv==0.13.9" \
       && "$venv/bin/uv" pip install -q --python "$venv/bin/python" "nemo-gym==0.4.0" -e .; } >"$log" 2>&1; then
  grep -v '^WARNING: Location' "$log" >&2 || true
  echo "installing NeMo Gym into $venv failed (output above)" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
"$venv/bin/python" -c "import nemo_gym, statekit" || { echo "nemo_gym does not import from $venv" >&2; exit 1; }
echo "$want" > "$venv/.statekit-installed"
