#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine. Installs what the tests need (the steps side by side):
#  - Python deps into .venv; verifiers into .venv-verifiers (its pins clash with the dev set) and NeMo
#    Gym into .venv-nemo-gym (it needs Python >= 3.12);
#  - PostgreSQL: nothing to do here, the tests start private throwaway clusters themselves
#    (system binaries if present, else the pgserver wheel's);
#  - as root on Debian: the Docker engine (started in the background) and the local base image;
#    xfsprogs and btrfs-progs, for the copy-on-write tests' loop-device filesystems; Debian's python3
#    (/usr/bin/python3), on which the code environment's process sandbox runs model code.
# In CI (CI=true) a missing component is a failure, never a skip.
# The tests run in several processes (pytest-xdist; $STATEKIT_TEST_WORKERS, default 3, each with a
# PostgreSQL cluster of its own), tests sharing a machine-wide resource grouped in one process
# (tests/conftest.py). `--quick` runs what a contributor runs before every commit (about three
# minutes on 2 cores): no slow system test (Docker, Ray, killed servers, the code sandbox, worker
# processes, long property runs), the quick check plan.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=()
if [ "${1:-}" = "--quick" ]; then
  shift
  quick=(-m "not slow" -o statekit_plan=quick)
fi
logs=$(mktemp -d)
steps=()
background() {  # background NAME COMMAND...: set-up steps run side by side (downloads, builds)
  local name="$1"
  shift
  "$@" >"$logs/$name.log" 2>&1 &
  steps+=("$name:$!")
}
if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
  # Debian's packages in one apt-get, before anything runs beside it: docker.io and debootstrap for
  # the Docker engine and the base image; xfsprogs and btrfs-progs for the copy-on-write tests'
  # loop-device filesystems; Debian's python3, on which the code environment's sandbox runs model code.
  packages=()
  export PATH="$PATH:/usr/sbin:/sbin"
  if [ ${#quick[@]} -eq 0 ]; then  # the quick run needs neither Docker nor the base image
    command -v dockerd >/dev/null && command -v docker >/dev/null || packages+=(docker.io)
    command -v debootstrap >/dev/null || packages+=(debootstrap)
  fi
  command -v mkfs.xfs >/dev/null || packages+=(xfsprogs)
  command -v mkfs.btrfs >/dev/null || packages+=(btrfs-progs)
  [ -x /usr/bin/python3 ] || packages+=(python3)
  # the venvs are made side by side below: the one fallback that installs python3-venv must run first
  python3 -c 'import ensurepip, venv' 2>/dev/null || packages+=(python3-venv)
  if [ ${#packages[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
  fi
  if [ ${#quick[@]} -eq 0 ]; then
    background docker sh -c 'bash scripts/docker-engine.sh && bash scripts/build-base-image.sh'
  fi
elif [ "${CI:-}" = "true" ]; then
  echo "CI needs root on Debian to install the Docker engine and build the base image" >&2
  exit 1
else
  echo "note: not root on Debian; Docker tests need a running engine and statekit/base:bookworm" >&2
fi
background venv bash scripts/venv.sh dev
if [ ${#quick[@]} -eq 0 ]; then  # their tests are slow ones: the quick run needs neither
  background verifiers bash scripts/venv-verifiers.sh  # verifiers needs openenv 0.4 and mcp 2
  background nemo-gym bash scripts/venv-nemo-gym.sh  # NeMo Gym needs Python >= 3.12
fi
failed=0
for step in "${steps[@]}"; do
  if ! wait "${step#*:}"; then
    echo "set-up step '${step%%:*}' failed:" >&2
    failed=1
  fi
  cat "$logs/${step%%:*}.log"
done
rm -rf "$logs"
[ "$failed" = 0 ] || exit 1
export TESTCONTAINERS_RYUK_DISABLED=true
exec .venv/bin/pytest -p no:cacheprovider -n "${STATEKIT_TEST_WORKERS:-3}" "${quick[@]}" "$@"
