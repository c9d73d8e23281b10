#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine. Installs what the tests need:
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
bash scripts/venv.sh dev
if [ ${#quick[@]} -eq 0 ]; then  # their tests are slow ones: the quick run needs neither
  bash scripts/venv-verifiers.sh  # verifiers needs openenv 0.4 and mcp 2: a venv of its own
  bash scripts/venv-nemo-gym.sh  # NeMo Gym needs Python >= 3.12: a venv of its own
fi
if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
  if [ ${#quick[@]} -eq 0 ]; then  # the quick run needs neither Docker nor the base image
    bash scripts/docker-engine.sh
    bash scripts/build-base-image.sh
  fi
  if ! PATH="$PATH:/usr/sbin:/sbin" command -v mkfs.xfs >/dev/null \
    || ! PATH="$PATH:/usr/sbin:/sbin" command -v mkfs.btrfs >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xfsprogs btrfs-progs
  fi
  # The code environment's process sandbox runs model code on Debian's own Python (outside any home).
  if [ ! -x /usr/bin/python3 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3
  fi
elif [ "${CI:-}" = "true" ]; then
  echo "CI needs root on Debian to install the Docker engine and build the base image" >&2
  exit 1
else
  echo "note: not root on Debian; Docker tests need a running engine and statekit/base:bookworm" >&2
fi
export TESTCONTAINERS_RYUK_DISABLED=true
exec .venv/bin/pytest -p no:cacheprovider -n "${STATEKIT_TEST_WORKERS:-3}" "${quick[@]}" "$@"
