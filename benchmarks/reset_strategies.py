"""Directory-tree reset latency: every CowFilesystem method this machine supports, vs a plain copy.

    python benchmarks/reset_strategies.py [--restores 50] [--sizes 10,100] [--no-loop] [--dir DIR]

Restores one golden tree (many 4 KiB files plus three large ones) ``--restores`` times per method
and size, on the default filesystem (``--dir``, default the temp dir) and, as root, on throwaway XFS
(reflink=1) and btrfs filesystems on loop devices. Only ``restore`` is timed; each copy is discarded
untimed before the next. Prints p50/p99 side by side with how many times faster than a plain copy
on the same filesystem each method is.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table
from timing import percentile_ms, restore_latencies, timed

from statekit.errors import ConfigError
from statekit.strategies.base import World
from statekit.strategies.cow_fs import METHODS, CowFilesystem, filesystem_type
from statekit.testing.loopfs import loop_filesystem, loop_filesystem_problem

SMALL_FILE = 4096
LARGE_FILES = 3
WARMUP = 3


def tree_builder(size_mb: int) -> tuple[int, int]:
    """(small files, bytes per large file) for ``size_mb`` of state: 40% small files, 60% large."""
    small = size_mb * 1_000_000 * 4 // 10 // SMALL_FILE
    large = size_mb * 1_000_000 * 6 // 10 // LARGE_FILES
    return small, large


def build_tree(world: World, size_mb: int) -> None:
    """Uploads-like state: small files spread over 100 directories, plus a few big blobs."""
    rng = random.Random(size_mb)
    root = Path(world.location)
    small, large = tree_builder(size_mb)
    for i in range(small):
        folder = root / f"d{i % 100:02d}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{i:05d}.bin").write_bytes(rng.randbytes(SMALL_FILE))
    for i in range(LARGE_FILES):
        (root / f"blob{i}.bin").write_bytes(rng.randbytes(large))


@contextlib.contextmanager
def filesystems(args: argparse.Namespace, skipped: list[str]) -> Iterator[list[tuple[str, Path]]]:
    """(label, directory) for the default filesystem and, when possible, loop XFS and btrfs."""
    with contextlib.ExitStack() as stack:
        default = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=args.dir)))
        found = [(f"default ({filesystem_type(default)})", default)]
        for kind in () if args.no_loop else ("xfs", "btrfs"):
            problem = loop_filesystem_problem(kind)
            if problem:
                skipped.append(f"{kind} loop filesystem: {problem}")
                continue
            found.append((f"{kind} (loop)", stack.enter_context(loop_filesystem(kind, size_mb=args.loop_mb))))
        yield found


def container_rows(n: int) -> list[tuple[str, list[float]]]:
    """Claims environment containers: a cold start (run + harness ready) vs a pre-warmed take, and
    the whole ``env.reset`` with each strategy for comparison."""
    import statekit
    from statekit.container_mode import harness_ready
    from statekit.strategies.container import ContainerPerEpisode, docker_client
    from statekit.strategies.prewarmed import Prewarmed
    from statekit_examples.adapters.claims_app.image import ensure_image

    rows: list[tuple[str, list[float]]] = []
    with statekit.make("claims_app", strategy="container") as env:
        env.reset(seed=7)  # builds and commits the seed's golden image once
        key = env.cache.key(7)
    client = docker_client()
    image = ensure_image(client)
    with ContainerPerEpisode(image, ready=harness_ready, client=client) as cold:
        rows.append(("container: cold start (run + ready)", restore_latencies(cold, key, n, warmup=WARMUP)))
    with Prewarmed(ContainerPerEpisode(image, ready=harness_ready, client=client), depth=2) as pool:
        samples = []
        for _ in range(n):
            pool.prefetch([key])
            pool.wait_ready(key, timeout=120)
            samples.extend(restore_latencies(pool, key, 1))
        rows.append(("container: pre-warmed pool take", samples))
    for label, options in (
        ("env.reset, template + CoW uploads", {}),
        ("env.reset, container", {"strategy": "container"}),
        ("env.reset, container, pre-warmed", {"strategy": "container", "prewarm": 2}),
    ):
        with statekit.make("claims_app", **options) as env:
            env.reset(seed=7)
            samples = []
            for _ in range(n):
                if isinstance(env.strategy, Prewarmed):
                    env.strategy.wait_ready(key, timeout=120)
                samples.append(timed(functools.partial(env.reset, seed=7)))
            rows.append((label, samples))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--restores", type=int, default=50)
    parser.add_argument("--sizes", default="10,100", help="MB of state per golden, comma-separated")
    parser.add_argument("--dir", default=None, help="where the default-filesystem trees go")
    parser.add_argument("--no-loop", action="store_true", help="skip the XFS and btrfs loop filesystems")
    parser.add_argument("--loop-mb", type=int, default=1024, help="size of each sparse loop image")
    parser.add_argument("--containers", type=int, default=10, help="container starts to time (0: skip)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    skipped: list[str] = []
    results: dict[tuple[str, str], dict[int, list[float]]] = {}
    with filesystems(args, skipped) as found:
        for label, base in found:
            for method in METHODS:
                try:
                    strategy = CowFilesystem(base / method, method=method)
                except ConfigError as exc:
                    skipped.append(f"{method} on {label}: {exc}")
                    continue
                with strategy:
                    for size in sizes:
                        key = f"bench{size}"
                        strategy.capture(key, functools.partial(build_tree, size_mb=size))
                        results[(label, method)] = results.get((label, method), {})
                        results[(label, method)][size] = restore_latencies(
                            strategy, key, args.restores, warmup=WARMUP
                        )
                        strategy.drop(key)

    small, large = zip(*(tree_builder(s) for s in sizes), strict=True)
    table = Table(
        "filesystem",
        "method",
        *(f"{s} MB p50 / p99" for s in sizes),
        *(f"{s} MB vs copy" for s in sizes),
        title=(
            f"CowFilesystem restore latency (ms), {args.restores} restores each; state = "
            + ", ".join(
                f"{s} MB: {n} x 4 KiB + {LARGE_FILES} x {b / 1e6:.1f} MB"
                for s, n, b in zip(sizes, small, large, strict=True)
            )
        ),
    )
    for (label, method), by_size in results.items():
        copy = results.get((label, "copy"), {})
        cells = [
            f"{percentile_ms(by_size[s], 0.5):.2f} / {percentile_ms(by_size[s], 0.99):.2f}" for s in sizes
        ]
        ratios = [
            f"{percentile_ms(copy[s], 0.5) / percentile_ms(by_size[s], 0.5):.1f}x" if s in copy else "-"
            for s in sizes
        ]
        table.add_row(label, method, *cells, *ratios)
    console = Console(width=160)
    console.print(table)
    console.print(
        "vs copy: p50 of a plain copy on the same filesystem / p50 of the method (higher is faster). "
        "overlay and reflink defer copying a file's data to its first write; a btrfs snapshot shares all."
    )
    for line in skipped:
        console.print(f"not measured: {line}")
    if args.containers:
        rows = container_rows(args.containers)
        cold = percentile_ms(rows[0][1], 0.5)
        boxes = Table(
            "claims_app", "p50 (ms)", "p99 (ms)", "cold start / this", title="containers per episode"
        )
        for label, samples in rows:
            boxes.add_row(
                label,
                f"{percentile_ms(samples, 0.5):.1f}",
                f"{percentile_ms(samples, 0.99):.1f}",
                f"{cold / percentile_ms(samples, 0.5):.1f}x",
            )
        console.print(boxes)


if __name__ == "__main__":
    main()
