#!/usr/bin/env bash
# The whole test suite on a fresh Debian machine. Installs what the tests need (the steps side by side):
#  - Python deps into .venv; verifiers into .venv-verifiers (its pins clash with the dev set) and NeMo
#    Gym into .venv-nemo-gym (it needs Python >= 3.12);
#  - PostgreSQL: nothing to do here, the tests start private throwaway clusters themselves
#    (system binaries if present, else the pgserver wheel's);
#  - as root on Debian: the Docker engine (started in the background) and the local base image;
#    xfsprogs and btrfs-progs, for the copy-on-write tests' loop-device filesystems; Debian's python3
#    (/usr/bin/python3), on which the code environment's process sandbox runs model code;
#    libfaketime, which gives an application process statekit's clock (statekit/process_app.py),
#    and Redmine with puma (the Redmine world, adapters/redmine).
# The tests start once .venv and Debian's packages are ready: the Docker engine and image and the
# two side venvs are still being made beside them, and a test that needs one waits for it
# (tests/conftest.py, NEEDS; their status files are in $STATEKIT_TEST_SETUP). A set-up step that
# fails fails the run.
# In CI (CI=true) a missing component is a failure, never a skip.
# The tests run in several processes (pytest-xdist; $STATEKIT_TEST_WORKERS, default 3, each with a
# PostgreSQL cluster of its own), tests sharing a machine-wide resource grouped in one process
# (tests/conftest.py). `--quick` runs what a contributor runs before every commit (under two
# minutes on 2 cores): no slow system test (Docker, Ray, killed servers, the code sandbox, worker
# processes, the example apps' worlds, long property runs), the quick check plan. pytest prints the
# 20 slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=()
if [ "${1:-}" = "--quick" ]; then
  shift
  quick=(-m "not slow" -o statekit_plan=quick)
fi
# Python caches the bytecode of what the tests import (hundreds of processes import the same
# modules; this machine sets PYTHONDONTWRITEBYTECODE, under which each compiled them again), and the
# venvs skip compiling everything at install (scripts/uv-install.sh)
unset PYTHONDONTWRITEBYTECODE
export STATEKIT_UV_COMPILE=0
logs=$(mktemp -d)
export STATEKIT_TEST_SETUP="$logs"
steps=()
background() {  # background NAME COMMAND...: set-up steps run side by side (downloads, builds)
  local name="$1"
  shift
  # NAME.log exists from now on (a test that needs the step waits for it); NAME.rc appears when the
  # step is done; NAME.seconds says how long it took
  : >"$logs/$name.log"
  (
    start=$SECONDS
    rc=0
    "$@" >"$logs/$name.log" 2>&1 || rc=$?
    echo $((SECONDS - start)) >"$logs/$name.seconds"
    echo "$rc" >"$logs/$name.rc"
    exit "$rc"
  ) &
  steps+=("$name:$!")
}
finish() {  # finish NAME PID: wait for a set-up step; print its log and how long it took
  local rc=0
  wait "$2" || rc=$?
  cat "$logs/$1.log"
  echo "set-up step '$1': $(cat "$logs/$1.seconds" 2>/dev/null || echo '?') s, exit $rc"
  return "$rc"
}
if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
  # Debian's packages, in one apt step beside the making of .venv (apt takes one install at a time,
  # so everything goes in it): xfsprogs and btrfs-progs for the copy-on-write tests' loop-device
  # filesystems; Debian's python3, on which the code environment's sandbox runs model code;
  # libfaketime, an application process's clock (statekit/process_app.py), and nftables, its sinkhole;
  # Redmine and puma; and for the Docker step after it, docker.io and mmdebstrap (installed as
  # scripts/docker-engine.sh and scripts/build-base-image.sh would, with their recommends).
  packages=()
  tools=()
  export PATH="$PATH:/usr/sbin:/sbin"
  command -v mkfs.xfs >/dev/null || packages+=(xfsprogs)
  command -v mkfs.btrfs >/dev/null || packages+=(btrfs-progs)
  [ -x /usr/bin/python3 ] || packages+=(python3)
  compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null || packages+=(libfaketime)
  # nftables and iproute2: the boundary names where an application process tries to go (statekit/sinkhole.py)
  command -v nft >/dev/null || packages+=(nftables)
  command -v ip >/dev/null || packages+=(iproute2)
  # Redmine (Debian's Rails package) and puma: the Redmine world (adapters/redmine); no database is
  # configured at install (statekit makes one instance per world)
  if [ ! -f /usr/share/redmine/lib/redmine/version.rb ] || ! command -v puma >/dev/null; then
    echo "redmine redmine/instances/default/dbconfig-install boolean false" | debconf-set-selections
    packages+=(redmine redmine-pgsql puma)
  fi
  if [ ${#quick[@]} -eq 0 ]; then
    command -v dockerd >/dev/null && command -v docker >/dev/null || tools+=(docker.io)
    command -v mmdebstrap >/dev/null || tools+=(mmdebstrap)
  fi
  apt_install() {  # (each command checked: set -e does not hold in a step, which runs under ||)
    export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1  # (needrestart: noise, no restarts here)
    apt-get update -qq || return
    if [ ${#packages[@]} -gt 0 ]; then
      apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null || return
    fi
    if [ ${#tools[@]} -gt 0 ]; then
      apt-get install -y -qq "${tools[@]}" >/dev/null || return
    fi
  }
  if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
    packages+=(python3-venv)  # .venv cannot be made without it: apt first, alone
    apt_install
  elif [ $((${#packages[@]} + ${#tools[@]})) -gt 0 ]; then
    background apt apt_install
  fi
  docker_step() {  # the Docker engine, then the base image
    background docker sh -c 'bash scripts/docker-engine.sh && bash scripts/build-base-image.sh'
  }
  if [ ${#quick[@]} -eq 0 ] && [ ${#steps[@]} -eq 0 ]; then  # nothing to install: Docker at once
    docker_step
  fi
elif [ "${CI:-}" = "true" ]; then
  echo "CI needs root on Debian to install the Docker engine and build the base image" >&2
  exit 1
else
  echo "note: not root on Debian; Docker tests need a running engine and statekit/base:bookworm" >&2
fi
# .venv first, beside apt only (the side venvs competing with it for the two cores took it from
# ~35 to ~75 s): the tests run in it; the side venvs are made beside the tests
background venv bash scripts/venv.sh dev
finish venv "${steps[-1]#*:}" || { echo "set-up step 'venv' failed" >&2; exit 1; }
if [ "${steps[0]%%:*}" = apt ]; then  # the tests need Debian's packages, the Docker step its own
  finish apt "${steps[0]#*:}" || { echo "set-up step 'apt' failed" >&2; exit 1; }
  if [ ${#quick[@]} -eq 0 ]; then
    docker_step
  fi
fi
if [ ${#quick[@]} -eq 0 ]; then  # their tests are slow ones: the quick run needs neither
  background verifiers bash scripts/venv-verifiers.sh  # verifiers needs openenv 0.4 and mcp 2
  background nemo-gym bash scripts/venv-nemo-gym.sh  # NeMo Gym needs Python >= 3.12
fi
export TESTCONTAINERS_RYUK_DISABLED=true
status=0
workers="${STATEKIT_TEST_WORKERS:-3}"
.venv/bin/pytest -p no:cacheprovider -n "$workers" --durations=20 "${quick[@]}" "$@" || status=$?
for step in "${steps[@]}"; do  # a step no test waited for must still have worked
  case "${step%%:*}" in venv | apt) continue ;; esac
  finish "${step%%:*}" "${step#*:}" || { echo "set-up step '${step%%:*}' failed" >&2; status=1; }
done
rm -rf "$logs"
exit "$status"
