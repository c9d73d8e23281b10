#!/usr/bin/env bash
# side-venv.sh VENV PYTHON SPEC...: a venv of its own for a framework whose pins or Python clash with the
# dev venv's (scripts/venv-verifiers.sh, scripts/venv-nemo-gym.sh). Makes VENV with PYTHON and has uv
# install SPEC... and statekit's core (editable) into it; skips all of it when the specs and
# pyproject.toml are unchanged since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$1" python="$2"
shift 2
want="$* uv==0.13.9 $(sha256sum pyproject.toml | cut -d' ' -f1) $("$python" -c 'import sys; print(sys.executable)')"
if [ "$(cat "$venv/.statekit-installed" 2>/dev/null)" = "$want" ] && "$venv/bin/python" -c '' 2>/dev/null; then
  exit 0
fi
rm -rf "$venv"
# made by .venv's uv (scripts/venv.sh makes .venv first), without pip: Python's venv module installs
# pip, then pip installs uv, ~8 CPU-s per side venv while the tests start beside it
if [ -x .venv/bin/uv ]; then
  .venv/bin/uv venv -q --python "$python" "$venv"
else
  "$python" -m venv "$venv"
fi
bash scripts/uv-install.sh "$venv" "$@" -e .
echo "$want" > "$venv/.statekit-installed"
