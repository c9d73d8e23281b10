"""Redmine (Rails, behind the process boundary) as a trainer pays for it: ``env.reset`` back to back after
episodes that write, and a step against the same REST call made straight to the application.

    python benchmarks/redmine.py [--episodes 30] [--restarts 6] [--db-url URL] [--skip-container]

- rewind: the default (``statekit.make("redmine")``, ``strategy="rewind"``): the world is rewound in
  place from its journal and the same Redmine process serves the next episode (its connection ended,
  ActiveRecord reconnecting at the next request); one seed back to back, then two seeds alternating;
- restart: ``strategy="template"``: every episode a fresh clone of the golden and a fresh Redmine
  process (puma booting Rails): what restarting the application's container gives a WebArena-style
  world, less the container's own start;
- container restart: the reset WebArena-style worlds use, ``docker restart`` of a container holding
  Redmine (``images/redmine.Dockerfile``: Debian's packages on the base image, no network) until it
  answers again, on the same world; a lower bound for such a reset, which also restores the data
  (here the world's database is left as it is). Needs the Docker engine and the base image
  (``scripts/docker-engine.sh``, ``scripts/build-base-image.sh``); the first run builds the image;
- step: ``env.step(list_issues)`` against the same GET sent straight to the warm Redmine over its
  socket (the call the tool makes), in the same run.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

import docker
import httpx
from rich.console import Console
from rich.table import Table
from sqlalchemy.engine import make_url
from timing import percentile_ms

import statekit
from statekit.kit import image_on_base
from statekit_examples.adapters.redmine import RedmineAdapter, Tracker
from statekit_examples.adapters.redmine.content import LEAD
from statekit_examples.adapters.redmine.instance import ADMIN_KEY, puma

DOCKERFILE = Path(__file__).resolve().parents[1] / "images" / "redmine.Dockerfile"

KIND = "close_resolved"


def _episode(env: statekit.Environment) -> None:
    for action in env.adapter.reference_actions(env.task):  # type: ignore[attr-defined]
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return


def resets(db_url: str | None, strategy: str, seeds: tuple[int, ...], episodes: int) -> list[float]:
    """``env.reset`` times, each after an episode that wrote (the first reset of each seed is warm-up)."""
    with statekit.make(RedmineAdapter, strategy=strategy, db_url=db_url) as env:
        for seed in seeds:
            env.reset(seed=seed, options={"task": KIND})
            _episode(env)
        samples = []
        for i in range(episodes):
            t0 = time.perf_counter()
            env.reset(seed=seeds[i % len(seeds)], options={"task": KIND})
            samples.append(time.perf_counter() - t0)
            _episode(env)
        return samples


def steps(db_url: str | None, n: int) -> tuple[list[float], list[float]]:
    """(``env.step(list_issues)`` times, the same GET straight to the application), interleaved."""
    with statekit.make(RedmineAdapter, db_url=db_url, max_steps=n + 2) as env:
        env.reset(seed=7, options={"task": KIND})
        project = env.step({"tool": "list_projects"})[0]["projects"][0]["identifier"]
        tracker: Tracker = env._starts._apps[env.world.id]  # the application the tool calls
        path = f"/issues.json?project_id={project}&status_id=o&sort=id&limit=100"
        through, direct = [], []
        for _ in range(n):
            t0 = time.perf_counter()
            env.step({"tool": "list_issues", "project": project})
            through.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            tracker.instance.call("GET", path, user=LEAD).json()
            direct.append(time.perf_counter() - t0)
        return through, direct


def _image(client: Any) -> str:
    """The Redmine image's id, built first (once) if the Dockerfile or the base image changed."""

    def content(base_id: str) -> str:
        return hashlib.sha256(DOCKERFILE.read_bytes() + base_id.encode()).hexdigest()[:16]

    return image_on_base(
        client,
        "statekit/redmine-bench",
        content,
        lambda folder: shutil.copy(DOCKERFILE, folder / "Dockerfile"),
    )


def _answers(socket: Path, timeout: float = 120.0) -> None:
    """Wait until Redmine answers a REST request on ``socket`` (puma booting Rails)."""
    deadline = time.monotonic() + timeout
    headers = {"X-Redmine-API-Key": ADMIN_KEY}
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket)), timeout=30.0) as client:
        while True:
            try:
                answer = client.get("http://redmine.world/issues.json?limit=1", headers=headers)
                if answer.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"Redmine did not answer on {socket} within {timeout} s")
            time.sleep(0.02)


def container_restarts(db_url: str | None, n: int) -> list[float]:
    """``docker restart`` of a container serving Redmine on a world, until it answers again."""
    client = docker.from_env()
    tag = _image(client)
    with statekit.make(RedmineAdapter, db_url=db_url) as env:
        env.reset(seed=7, options={"task": KIND})
        instance = env._starts._apps[env.world.id].instance  # the world's instance: its config
        sockets = str(make_url(instance.url).query["host"])  # the world's PostgreSQL, a unix socket
        socket = instance.root / "container.sock"
        root = str(instance.root)
        link = f"/var/lib/redmine/{instance.name}"  # (the image's {REDMINE}/instances)
        serve = f"ln -sfn {shlex.quote(root)} {shlex.quote(link)} && exec {shlex.join(puma(socket))}"
        container = client.containers.run(
            tag,
            ["sh", "-c", serve],
            environment={"REDMINE_INSTANCE": instance.name, "HOME": root},
            user="0:0" if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}",  # files the host removes
            volumes={root: {"bind": root, "mode": "rw"}, sockets: {"bind": sockets, "mode": "rw"}},
            network_mode="none", detach=True, auto_remove=False,
        )  # fmt: skip
        try:
            _answers(socket)
            samples = []
            for _ in range(n):
                t0 = time.perf_counter()
                container.restart(timeout=0)
                _answers(socket)
                samples.append(time.perf_counter() - t0)
            return samples
        finally:
            container.remove(force=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--restarts", type=int, default=6)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--db-url", default=None)
    parser.add_argument(
        "--skip-container", action="store_true", help="leave out the container row (it needs Docker)"
    )
    args = parser.parse_args()
    rows: list[tuple[str, list[float]]] = [
        ("rewind (default), one seed", resets(args.db_url, "rewind", (7,), args.episodes)),
        ("rewind (default), seeds 7 and 8 alternating", resets(args.db_url, "rewind", (7, 8), args.episodes)),
        ("restart: a fresh clone and Redmine process", resets(args.db_url, "template", (7,), args.restarts)),
    ]
    if not args.skip_container:
        rows.append(("container restart (WebArena's reset)", container_restarts(args.db_url, args.restarts)))
    through, direct = steps(args.db_url, args.steps)
    table = Table(title="Redmine: env.reset after an episode that wrote, and a step (ms)")
    for column in ("what", "n", "p50", "p99"):
        table.add_column(column)
    for name, samples in [
        *rows,
        ("step: env.step(list_issues)", through),
        ("step: the same GET, direct", direct),
    ]:
        table.add_row(
            name,
            str(len(samples)),
            f"{percentile_ms(samples, 0.5):.1f}",
            f"{percentile_ms(samples, 0.99):.1f}",
        )
    console = Console()
    console.print(table)
    p50: dict[str, Any] = {name: percentile_ms(samples, 0.5) for name, samples in rows}
    rewind = p50["rewind (default), one seed"]
    restart = p50["restart: a fresh clone and Redmine process"]
    container = p50.get("container restart (WebArena's reset)")
    console.print(
        f"restart / rewind (p50): {restart / rewind:.0f}x"
        + (f"; container restart / rewind: {container / rewind:.0f}x" if container else "")
    )
    step, call = percentile_ms(through, 0.5), percentile_ms(direct, 0.5)
    console.print(f"a step over the direct call (p50): {step - call:+.1f} ms ({step / call:.2f}x)")


if __name__ == "__main__":
    main()
