"""ContainerPerEpisode: one container per episode, from an image pinned by its digest.

- capture(key, builder): start a container from the base image, let the builder fill it (through
  ``docker exec``), stop it cleanly and ``docker commit`` it as the golden image ``statekit-golden:KEY``;
  capture(key, live_world) commits a running episode container (a fork).
- restore(key): start a container from the golden's image id (never a floating tag) with
  ``--network none``, memory, CPU and pid limits, optionally a read-only root; wait until ``ready``.
- discard: remove the container (forced) and its socket directory.

Containers carry the label ``statekit.owner=HOST:PID:START`` (``naming.Owner``); a new strategy
removes the containers (and fork golden images) of dead processes on this host at start, so a crash
never leaves containers behind. The host talks to a
container through a Unix socket in a bind-mounted directory: with no network at all there is no port
to publish, and a socket file is reachable only by this machine's processes.

We use the Docker SDK rather than testcontainers: the strategy needs commit, labels, exec and the
sweep, which testcontainers wraps only partly, and it adds nothing for readiness that a socket poll
does not.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from statekit.errors import ConfigError, ResetError
from statekit.strategies.base import Builder, ResetStrategy, World
from statekit.strategies.naming import CopyNamer, Owner, check_key, snapshot_owner

log = logging.getLogger(__name__)
OWNER_LABEL = "statekit.owner"
GOLDEN_REPO = "statekit-golden"
SOCKET_DIR = "/run/statekit"
"""Where a container finds the host-mounted directory for its Unix socket."""

SOCKET_DIRS = CopyNamer("statekit-containers")
"""The host directory of one strategy's containers' sockets (in the temporary directory) is named by
its process, so a process killed before ``close`` has it swept like its containers."""


def docker_client() -> Any:
    """A Docker SDK client, or a ConfigError that says how to get an engine."""
    try:
        import docker
    except ImportError as exc:
        raise ConfigError(
            "the container strategy needs the Docker SDK: pip install 'statekit[docker]'"
        ) from exc
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        raise ConfigError(
            f"no Docker engine is answering ({exc}); start one (scripts/docker-engine.sh as root)"
        ) from exc
    return client


BASE_IMAGE = "statekit/base:bookworm"
"""The local base image every statekit image is built on (``scripts/build-base-image.sh``: no
registry is ever contacted)."""


def image_on_base(
    client: Any, repository: str, content: Callable[[str], str], context: Callable[[Path], None]
) -> str:
    """The id of the image ``repository:TAG`` built on the local base image (its Dockerfile takes it
    as ``ARG BASE``), built first if missing. ``TAG`` is ``content(base image id)``, a hash of what
    goes into the image, so it is rebuilt exactly when that or the base changes; ``context(folder)``
    writes the build context, its Dockerfile included. A missing base image or a failed build is a
    ConfigError saying what to do."""
    try:
        base = client.images.get(BASE_IMAGE)
    except Exception as exc:
        raise ConfigError(
            f"base image {BASE_IMAGE} is missing: run scripts/build-base-image.sh as root"
        ) from exc
    tag = f"{repository}:{content(str(base.id))}"
    with contextlib.suppress(Exception):
        return str(client.images.get(tag).id)
    with tempfile.TemporaryDirectory(prefix="statekit-image-") as folder:
        context(Path(folder))
        try:
            image, _ = client.images.build(
                path=folder, tag=tag, rm=True, forcerm=True, pull=False, buildargs={"BASE": str(base.id)}
            )
        except Exception as exc:
            raise ConfigError(f"building {tag} failed: {exc}") from exc
    return str(image.id)


class ContainerPerEpisode(ResetStrategy):
    """Worlds are containers. ``World.location`` is the host path of the container's socket dir."""

    name = "container"

    def __init__(
        self,
        image: str,
        *,
        command: list[str] | None = None,
        ready: Callable[[World], bool] | None = None,
        ready_timeout: float = 60.0,
        mem_limit: str = "1g",
        cpus: float = 1.0,
        pids_limit: int = 256,
        read_only: bool = False,
        environment: dict[str, str] | None = None,
        tmpfs: dict[str, str] | None = None,
        client: Any = None,
    ) -> None:
        self.client = client or docker_client()
        try:
            self.image_id = str(self.client.images.get(image).id)  # pin the digest once, up front
        except Exception as exc:
            raise ConfigError(f"image {image!r} not found; build it first ({exc})") from exc
        self.command = command
        self.ready = ready
        self.ready_timeout = ready_timeout
        self.run_options: dict[str, Any] = {
            "network_mode": "none",
            "init": True,  # a tiny init as PID 1 forwards SIGTERM, so a clean stop is quick
            "mem_limit": mem_limit,
            "nano_cpus": int(cpus * 1e9),
            "pids_limit": pids_limit,
            "read_only": read_only,
            "environment": dict(environment or {}),
            "tmpfs": dict(tmpfs or ({"/tmp": "rw,size=256m"} if read_only else {})),
        }
        self.names = CopyNamer("skc")
        self.owner = Owner.current().label
        self._started: set[str] = set()
        self._sockets = Path(tempfile.gettempdir()) / SOCKET_DIRS.episode()
        self._sockets.mkdir(mode=0o755)
        self._sockets.chmod(0o755)
        self.swept = self.sweep_orphans()

    # -- housekeeping -------------------------------------------------------------------------
    def sweep_orphans(self) -> list[str]:
        """Remove the containers, snapshot (fork) golden images and socket directories of dead statekit
        processes on this host."""
        removed = []
        for container in self.client.containers.list(all=True, filters={"label": OWNER_LABEL}):
            owner = Owner.from_label(str(container.labels.get(OWNER_LABEL, "")))
            if owner is not None and not owner.is_alive():
                log.warning("removing orphan container %s", container.name)
                container.remove(force=True)
                removed.append(str(container.name))
        for image in self.client.images.list(name=GOLDEN_REPO):
            for tag in image.tags:
                owner = snapshot_owner(tag.rpartition(":")[2])
                if tag.startswith(f"{GOLDEN_REPO}:") and owner is not None and not owner.is_alive():
                    log.warning("removing the snapshot golden image %s of a dead process", tag)
                    with contextlib.suppress(Exception):  # in use, or removed by a concurrent sweep
                        self.client.images.remove(tag, force=True)
                        removed.append(tag)
        for folder in Path(tempfile.gettempdir()).glob(f"{SOCKET_DIRS.prefix}_e_*"):
            if SOCKET_DIRS.is_orphan(folder.name):
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(str(folder))
        return removed

    def golden_tag(self, key: str) -> str:
        return f"{GOLDEN_REPO}:{check_key(key)}"

    # -- the three verbs ----------------------------------------------------------------------
    def has(self, key: str) -> bool:
        try:
            self.client.images.get(self.golden_tag(key))
        except Exception:
            return False
        return True

    def capture(self, key: str, source: Builder | World) -> None:
        if self.has(key):
            return
        if isinstance(source, World):
            self._commit(source.handle, key)
            return
        world = self._start(self.image_id)
        try:
            source(world)
            world.handle.stop(timeout=30)  # a clean stop: databases inside shut down and flush
            self._commit(world.handle, key)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise ResetError(f"building golden image {self.golden_tag(key)} failed: {exc}") from exc
        finally:
            self.discard(world)

    def restore(self, key: str) -> World:
        try:
            image = self.client.images.get(self.golden_tag(key))
        except Exception as exc:
            raise ResetError(f"no golden image {self.golden_tag(key)}; capture it first") from exc
        return self._start(str(image.id))

    def discard(self, world: World) -> None:
        with contextlib.suppress(Exception):  # already gone
            self.client.containers.get(world.id).remove(force=True)
        self._started.discard(world.id)
        shutil.rmtree(world.location, ignore_errors=True)

    def drop(self, key: str) -> None:
        with contextlib.suppress(Exception):  # never captured, or already dropped
            self.client.images.remove(self.golden_tag(key), force=True)

    def footprint(self, key: str) -> int | None:
        """What the golden image adds to the image it was started from (layers below are shared)."""
        try:
            golden = self.client.images.get(self.golden_tag(key))
            base = self.client.images.get(self.image_id)
        except Exception:
            return None
        return max(0, int(golden.attrs.get("Size", 0)) - int(base.attrs.get("Size", 0)))

    def close(self) -> None:
        """Remove the containers this instance started (other instances in the process keep theirs)."""
        for container_id in list(self._started):
            with contextlib.suppress(Exception):
                self.client.containers.get(container_id).remove(force=True)
        self._started.clear()
        shutil.rmtree(self._sockets, ignore_errors=True)

    # -- internals ----------------------------------------------------------------------------
    def _commit(self, container: Any, key: str) -> None:
        repo, tag = self.golden_tag(key).split(":")
        container.commit(repository=repo, tag=tag, changes=["LABEL statekit.golden=1"])

    def _start(self, image_id: str) -> World:
        name = self.names.episode()
        sockets = self._sockets / name
        sockets.mkdir(mode=0o777)
        sockets.chmod(0o777)
        container = self.client.containers.run(
            image_id,
            command=self.command,
            name=name,
            detach=True,
            labels={OWNER_LABEL: self.owner},
            volumes={str(sockets): {"bind": SOCKET_DIR, "mode": "rw"}},
            **self.run_options,
        )
        self._started.add(str(container.id))
        world = World(id=str(container.id), location=str(sockets), handle=container)
        try:
            self._wait_ready(world)
        except BaseException:
            self.discard(world)
            raise
        return world

    def _wait_ready(self, world: World) -> None:
        if self.ready is None:
            return
        deadline = time.monotonic() + self.ready_timeout
        while not self.ready(world):
            world.handle.reload()
            if world.handle.status in ("exited", "dead"):
                logs = world.handle.logs(tail=30).decode(errors="replace")
                raise ResetError(f"container {world.handle.name} exited before it was ready:\n{logs}")
            if time.monotonic() > deadline:
                raise ResetError(f"container {world.handle.name} not ready after {self.ready_timeout:.0f} s")
            time.sleep(0.05)


def exec_in(world: World, command: list[str], *, environment: dict[str, str] | None = None) -> str:
    """Run ``command`` in a world's container; its output, or a ResetError with the output on failure."""
    result = world.handle.exec_run(command, environment=environment or {})
    output = (
        result.output.decode(errors="replace") if isinstance(result.output, bytes) else str(result.output)
    )
    if result.exit_code != 0:
        raise ResetError(
            f"{' '.join(command)} exited {result.exit_code} in {world.handle.name}:\n{output[-2000:]}"
        )
    return output
