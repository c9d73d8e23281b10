"""One assay per (adapter, strategy) per test run: the container assay reads a whole image."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from functools import cache
from typing import Any

from statekit.cli import main


@cache
def cli_assay(adapter: str, strategy: str | None = None) -> tuple[int, dict[str, Any]]:
    """(exit code, JSON report) of ``statekit assay ADAPTER [--strategy S] --json``."""
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["assay", adapter, "--json"] + (["--strategy", strategy] if strategy else []))
    return code, json.loads(out.getvalue())
