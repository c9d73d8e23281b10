#!/usr/bin/env bash
# Create .venv (installing Debian's python3-venv first if this Python lacks it) and install statekit
# with the extras named in $1 (e.g. "embedded" or "dev"). Sourced by demo.sh and test.sh.
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
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[${extras}]" 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c "import statekit" || { echo "installing statekit into .venv failed" >&2; exit 1; }
