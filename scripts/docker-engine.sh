#!/usr/bin/env bash
# Make a Docker engine available on this (Debian 12, root, no systemd) machine.
# Idempotent: installs docker.io only if dockerd is missing, starts dockerd only
# if `docker info` does not answer, and leaves the daemon running on exit.
#
# Env knobs:
#   STATEKIT_DOCKERD_FLAGS  extra dockerd flags; when set, only these are tried
#   STATEKIT_DOCKERD_WAIT   seconds to wait for each start attempt (default 60)
set -euo pipefail

# dockerd lives in /usr/sbin, which a minimal CI PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

LOG=/var/log/statekit-dockerd.log
PIDFILE=/var/run/docker.pid
# Record of the flags the running daemon was started with (informational).
FLAGSFILE=/var/run/statekit-dockerd.flags
WAIT=${STATEKIT_DOCKERD_WAIT:-60}

say() { echo "docker-engine: $*"; }
die() { echo "docker-engine: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (installs packages, starts dockerd)"

engine_up() { docker info >/dev/null 2>&1; }

# PIDs of live processes whose command name is exactly "dockerd" (no pgrep -f:
# that would match unrelated command lines; zombies are not a running daemon).
dockerd_pids() { ps -eo pid=,stat=,comm= | awk '$3 == "dockerd" && $2 !~ /^Z/ { print $1 }'; }

# 1. Install the engine if needed. docker.io brings dockerd, containerd, runc
#    and the docker CLI; iptables comes along as a dependency.
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    say "installing docker.io"
    export DEBIAN_FRONTEND=noninteractive
    # Quiet on success (apt/needrestart chatter); show the output on failure.
    apt_log=$(mktemp)
    { apt-get update -qq && apt-get install -y -qq docker.io; } >"$apt_log" 2>&1 \
        || { tail -n 30 "$apt_log" >&2; rm -f "$apt_log"; die "installing docker.io with apt-get failed"; }
    rm -f "$apt_log"
    command -v dockerd >/dev/null 2>&1 || die "docker.io installed but dockerd not found"
fi

# 2. Already answering? Nothing to do (second run is a no-op).
if engine_up; then
    say "engine already running ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
    exit 0
fi

# 3. A dockerd may be running but still starting (e.g. another CI step started
#    it a moment ago). Give it the wait budget before starting a second one,
#    which would only fail on the pid file / socket.
if [ -n "$(dockerd_pids)" ]; then
    say "dockerd is running (pid $(dockerd_pids | tr '\n' ' ')) but not answering; waiting up to ${WAIT}s"
    for _ in $(seq "$WAIT"); do
        engine_up && { say "engine is up"; exit 0; }
        sleep 1
    done
    die "dockerd is running but 'docker info' fails after ${WAIT}s; see $LOG (stop that dockerd and re-run)"
fi

# 4. No dockerd: a leftover pid file (machine restarted, daemon killed) makes
#    dockerd refuse to start ("pid file found, ensure docker is not running").
if [ -f "$PIDFILE" ]; then
    oldpid=$(cat "$PIDFILE" 2>/dev/null || true)
    if [ -z "$oldpid" ] || ! kill -0 "$oldpid" 2>/dev/null; then
        say "removing stale $PIDFILE (pid '${oldpid}' not running)"
        rm -f "$PIDFILE"
    fi
fi
# A stale socket is harmless (dockerd replaces it), but remove it so that
# `docker info` can't talk to something that isn't there.
[ -S /var/run/docker.sock ] && rm -f /var/run/docker.sock

# 5. Start dockerd, trying flag sets from the most to the least capable:
#    - plain: default bridge with iptables NAT (works on this machine kind);
#    - no iptables: for kernels/sandboxes without netfilter; the docker0 bridge
#      still exists (containers can reach the host), `--network none` works;
#    - no bridge at all: if even creating docker0 fails; only `--network none`
#      and `--network host` remain, which is all the tests need.
#    - vfs storage: if overlayfs can't be mounted (nested/odd filesystems).
if [ -n "${STATEKIT_DOCKERD_FLAGS:-}" ]; then
    attempts=("$STATEKIT_DOCKERD_FLAGS")
else
    attempts=(
        ""
        "--iptables=false --ip-masq=false"
        "--iptables=false --ip-masq=false --bridge=none"
        "--iptables=false --ip-masq=false --bridge=none --storage-driver=vfs"
    )
fi

mkdir -p "$(dirname "$LOG")"
for flags in "${attempts[@]}"; do
    say "starting dockerd ${flags:-(default flags)}; log: $LOG"
    echo "===== $(date -u +%FT%TZ) statekit: dockerd ${flags}" >>"$LOG"
    log_from=$(stat -c %s "$LOG")   # to show only this attempt's log on failure
    # setsid+nohup: own session, immune to the caller's SIGHUP, no fd tied to
    # the caller's terminal/pipes, so it outlives this script and CI steps.
    # shellcheck disable=SC2086  # word splitting of $flags is intended
    setsid nohup dockerd $flags >>"$LOG" 2>&1 </dev/null &
    pid=$!
    for _ in $(seq "$WAIT"); do
        if engine_up; then
            echo "$flags" >"$FLAGSFILE"
            say "engine is up (dockerd pid $pid, flags: ${flags:-none})"
            exit 0
        fi
        kill -0 "$pid" 2>/dev/null || break   # daemon died: try next flag set
        sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
        # Alive but never answered: don't leave a half-working daemon behind.
        kill "$pid" 2>/dev/null || true
        sleep 2
        kill -9 "$pid" 2>/dev/null || true
        die "dockerd (flags: ${flags:-none}) did not answer 'docker info' within ${WAIT}s; see $LOG"
    fi
    say "dockerd exited during start-up with flags '${flags:-none}':"
    tail -c +"$((log_from + 1))" "$LOG" | tail -n 5 | sed 's/^/    /'
    rm -f "$PIDFILE"
done

die "could not start dockerd with any flag set; see $LOG"
