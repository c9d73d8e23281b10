#!/usr/bin/env bash
# Create .venv (installing Debian's python3-venv first if this Python lacks it) and install statekit
# with the extras named in $1 (e.g. "embedded" or "dev"). Run by demo.sh and test.sh.
# Skips the install when pyproject.toml and the extras are unchanged since the last one; installs with
# uv (scripts/uv-install.sh), whose output is shown only when it fails.
set -euo pipefail
extras="$1"
if [ ! -x .venv/bin/python ]; then
  if ! python3 -m venv .venv 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
      rm -rf .venv && python3 -m venv .venv
    else
      echo "python3 -m venv failed: install python3-venv (Debian) and try again" >&2
      exit 1
    fi
  fi
fi
stamp=.venv/.statekit-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1) ${extras}"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  bash scripts/uv-install.sh .venv -e ".[${extras}]"
  echo "$want" > "$stamp"
fi
.venv/bin/python -c "import statekit" || { echo "statekit does not import from .venv" >&2; exit 1; }
