"""The ``statekit`` command line: demo, check, digest, dump, diff, diverge, drift, record, spec, serve,
cache, assay, stop.

Every command that makes an environment takes the flags of an ``EnvSpec`` (``statekit.cli.spec``).
Exit codes: 0 success, 1 a check failed, 2 bad input or an error (the message names the problem).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from statekit.cli import check, ops, world
from statekit.errors import StatekitError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="statekit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for module in (check, world, ops):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except StatekitError as exc:
        print(f"statekit: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["build_parser", "main"]
