"""Layer 2, the container sandbox: one container per episode, one ``docker exec`` per run.

The container starts when the episode does (the cost is paid at reset, not per step) from the
``statekit/code-env`` image pinned by id (``image.py``), with no network (``network_mode="none"``), a
read-only root, size-limited tmpfs for ``/tmp``, memory (no swap), CPU and pid limits, every
capability dropped and ``no-new-privileges``; the episode's working directory is bind-mounted
read-only at ``/tmp/work``, so writes happen only through the agent's tools.

Each run is ``docker exec`` as the unprivileged ``sandbox`` user (uid 10001) of a small shell wrapper:
``timeout -s KILL`` bounds the wall clock, the runner lowers CPU/memory/file limits before it imports
anything of the model's, and afterwards ``kill -KILL -1`` (as that same user) removes whatever the run
left behind, daemons included. Hidden runs send their records on the exec's stdout and the model's
own output on stderr (fd 3 is routed by the wrapper). The wrapper runs as the model's uid, so the
model can kill it before its last line; so after every run a second exec, the reaper (``REAPER``),
which the model never reaches, kills every process of that uid and waits until ``/proc`` lists none:
the next run starts clean. A host-side watchdog kills the container if a run overstays its wall clock
by more than a grace period; a container the reaper cannot clean (killed, out of processes) is
replaced by a fresh one, so what the model did costs it that run and never ends the episode.

Containers carry the label ``statekit.code_env.owner=HOST:PID:START``; a new sandbox removes those
of dead processes on this host.
"""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

from statekit.kit import docker_client
from statekit_examples.adapters.code_env.sandbox.base import (
    BoundedBuffer,
    Job,
    Limits,
    RunResult,
    Sandbox,
    SandboxError,
    SandboxSession,
    parse_records,
    sandbox_environment,
)
from statekit_examples.adapters.code_env.sandbox.image import ensure_image
from statekit_examples.adapters.code_env.sandbox.owners import is_gone, owner_tag
from statekit_examples.adapters.code_env.sandbox.runner import PYTHON_FLAGS, WORK_DIR

log = logging.getLogger(__name__)
OWNER_LABEL = "statekit.code_env.owner"
SANDBOX_USER = "10001:10001"
WATCHDOG_GRACE = 10.0
_RUNNER = f"python3 {' '.join(PYTHON_FLAGS)} /opt/statekit/runner.pyc"
_AFTERWARDS = 'rc=$?; kill -KILL -1 2>/dev/null; exit "$rc"'
# One kill(-1) suffices even against a fork bomb: a process with SIGKILL pending cannot fork.
WRAPPERS = {
    # $1: wall seconds, $2: the job. Hidden: records (fd 3) on stdout, the model's output on stderr.
    "hidden": f'timeout -s KILL "$1" {_RUNNER} "$2" 3>&1 1>&2; {_AFTERWARDS}',
    "visible": f'timeout -s KILL "$1" {_RUNNER} "$2" 3>/dev/null; {_AFTERWARDS}',
}
REAPER = """
kill -KILL -1 2>/dev/null
tries=0
while :; do
    left=0
    for status in /proc/[0-9]*/status; do
        [ "$status" = "/proc/$$/status" ] && continue
        while read -r key uid _; do
            [ "$key" = Uid: ] && { [ "$uid" = 10001 ] && left=1; break; }
        done 2>/dev/null < "$status"
    done
    [ "$left" = 0 ] && exit 0
    tries=$((tries + 1))
    [ "$tries" -lt 100 ] || exit 1
    kill -KILL -1 2>/dev/null
    sleep 0.02
done
"""
"""Run as the sandbox user after every run: kill every process of it (``kill -1`` spares only the
caller and init) until ``/proc`` shows none; exit 1 if some survive two seconds."""


class ContainerSandbox(Sandbox):
    """One container per session from the sandbox image; runs are ``docker exec``."""

    kind = "container"

    def __init__(self, limits: Limits, *, disabled: frozenset[str] = frozenset(), client: Any = None) -> None:
        self.limits = limits
        self.disabled = disabled
        self.client = client or docker_client()
        self.image_id = ensure_image(self.client)
        self.owner = owner_tag()
        self.swept = self.sweep_orphans()

    def sweep_orphans(self) -> list[str]:
        """Remove sandbox containers whose owning process on this host is gone."""
        removed = []
        for container in self.client.containers.list(all=True, filters={"label": OWNER_LABEL}):
            if is_gone(str(container.labels.get(OWNER_LABEL, ""))):
                log.warning("removing orphan sandbox container %s", container.name)
                with contextlib.suppress(Exception):
                    container.remove(force=True)
                removed.append(str(container.name))
        return removed

    def open(self, work_dir: Path) -> ContainerSession:
        return ContainerSession(self, Path(work_dir))

    def describe(self) -> dict[str, str]:
        return {
            "sandbox": self.kind,
            "image": self.image_id,
            "limits": json.dumps(self.limits.as_dict(), sort_keys=True),
            "disabled_defences": ",".join(sorted(self.disabled)),
        }


class ContainerSession(SandboxSession):
    """The episode's container, started here and removed by ``close``."""

    def __init__(self, sandbox: ContainerSandbox, work_dir: Path) -> None:
        self.sandbox = sandbox
        self.work_dir = work_dir
        self.container = self._start()
        self.replaced = 0
        """Containers this session replaced because the reaper could not clean them."""
        self._closed = False

    def _start(self) -> Any:
        sandbox, limits = self.sandbox, self.sandbox.limits
        scratch = f"rw,nosuid,nodev,size={limits.scratch_bytes},mode=1777"
        try:
            return sandbox.client.containers.run(
                sandbox.image_id,
                command=["sleep", "infinity"],
                detach=True,
                init=True,
                hostname="sandbox",
                labels={OWNER_LABEL: sandbox.owner},
                network_mode="bridge" if "network" in sandbox.disabled else "none",
                read_only=True,
                tmpfs={"/tmp": scratch, "/var/tmp": scratch},
                shm_size=limits.scratch_bytes,
                volumes={str(self.work_dir): {"bind": WORK_DIR, "mode": "ro"}},
                mem_limit=limits.memory_bytes,
                memswap_limit=limits.memory_bytes,
                nano_cpus=1_000_000_000,
                pids_limit=limits.processes,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
            )
        except Exception as exc:
            raise SandboxError(f"starting the sandbox container failed: {exc}") from exc

    def run(self, job: Job) -> RunResult:
        try:
            return self._run(job)
        finally:
            self._reap()

    def _run(self, job: Job) -> RunResult:
        box = self.sandbox
        api = box.client.api
        limits = box.limits
        env = [f"{k}={v}" for k, v in sorted(sandbox_environment(box.disabled).items())]
        command = ["sh", "-c", WRAPPERS[job.mode], "sh", str(limits.wall_seconds), job.encoded(limits)]
        started = time.monotonic()
        try:
            exec_id = api.exec_create(
                self.container.id, command, user=SANDBOX_USER, environment=env, workdir=WORK_DIR
            )["Id"]
            stream = api.exec_start(exec_id, stream=True, demux=True)
        except Exception as exc:
            raise SandboxError(f"docker exec in the sandbox container failed: {exc}") from exc
        hidden = job.mode == "hidden"
        # Hidden runs: the exec's stdout carries the records, the model's output all goes to stderr.
        channel = BoundedBuffer(limits.records_bytes if hidden else limits.output_bytes)
        err = BoundedBuffer(limits.output_bytes)
        watchdog = threading.Timer(limits.wall_seconds + WATCHDOG_GRACE, self._kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            for chunk_out, chunk_err in stream:
                if chunk_out:
                    channel.add(chunk_out)
                if chunk_err:
                    err.add(chunk_err)
            exit_code = api.exec_inspect(exec_id).get("ExitCode")
        except Exception as exc:
            raise SandboxError(f"reading the sandbox run failed: {exc}") from exc
        finally:
            watchdog.cancel()
        seconds = time.monotonic() - started
        timed_out = exit_code == 137 and seconds >= limits.wall_seconds * 0.99
        signal_name = "SIGKILL" if timed_out else None
        if exit_code is not None and exit_code > 128 and not timed_out:
            signal_name = _signal_name(exit_code - 128)
        return RunResult(
            exit_code=None if signal_name else exit_code,
            signal=signal_name,
            timed_out=timed_out,
            stdout="" if hidden else channel.text(),
            stderr=err.text(),
            truncated=err.truncated or (channel.truncated and not hidden),
            records=parse_records(channel.data()) if hidden else [],
            seconds=seconds,
        )

    def _reap(self) -> None:
        """Leave no process of the run behind; replace the container if that cannot be done in it."""
        api = self.sandbox.client.api
        try:
            exec_id = api.exec_create(self.container.id, ["sh", "-c", REAPER], user=SANDBOX_USER)["Id"]
            api.exec_start(exec_id)
            if api.exec_inspect(exec_id).get("ExitCode") == 0:
                return
            problem = "processes of the run survived the reaper"
        except Exception as exc:  # the container is gone, stopped, or out of processes
            problem = f"the reaper could not run: {exc}"
        log.warning("replacing sandbox container %s: %s", self.container.name, problem)
        with contextlib.suppress(Exception):
            self.container.remove(force=True)
        self.container = self._start()
        self.replaced += 1

    def _kill(self) -> None:
        log.error("a sandbox run overstayed its wall clock; killing container %s", self.container.name)
        with contextlib.suppress(Exception):
            self.container.kill()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # already gone
            self.container.remove(force=True)


def _signal_name(number: int) -> str | None:
    try:
        return signal.Signals(number).name
    except ValueError:
        return None
