#!/usr/bin/env bash
# .venv-verifiers: verifiers (Prime Intellect's environment framework) with its OpenEnv taskset, in a
# venv of its own: verifiers 0.4's openenv extra pins mcp==2.0.0 and so resolves only with openenv
# 0.4.1, while statekit's dev venv holds openenv 0.10 (its validator) and fastmcp (mcp<2).
# tests/integrations/test_verifiers.py runs this venv's vf-eval against `statekit serve`. uv installs
# it (about 30 s; pip's resolver takes minutes), and verifiers itself runs the model's chat program
# through uv. statekit itself (its core: statekit.integrations.verifiers is a verifiers taskset) is
# installed there too, editable. Skips the install when the pins and pyproject.toml are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
want="verifiers[openenv]==0.4.0 uv==0.13.9 $(sha256sum pyproject.toml | cut -d' ' -f1)"
venv=.venv-verifiers
if [ "$(cat "$venv/.statekit-installed" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  log=$(mktemp)
  if ! { "$venv/bin/python" -m pip install -q --disable-pip-version-check "uv==0.13.9" \
         && "$venv/bin/uv" pip install -q --python "$venv/bin/python" "verifiers[openenv]==0.4.0" -e .; } >"$log" 2>&1; then
    grep -v '^WARNING: Location' "$log" >&2 || true
    echo "installing verifiers into $venv failed (output above)" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  echo "$want" > "$venv/.statekit-installed"
fi
"$venv/bin/vf-eval" --help >/dev/null || { echo "vf-eval does not run from $venv" >&2; exit 1; }
