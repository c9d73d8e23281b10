"""The claims app's real vendor stubs as a separate process on loopback (for recording cassettes
and for the test that turns replay off). A separate process on purpose: its ids and clock are the
vendors' own, outside any determinism control, as a real vendor's would be."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from statekit import StatekitError
from statekit.kit import allow_egress


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def live_vendors(timeout: float = 20.0) -> Iterator[str]:
    """Run ``python -m statekit_examples.apps.claims_app vendors`` on a free loopback port; yield its
    base URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "statekit_examples.apps.claims_app", "vendors", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:  # an environment open in this process refuses unannounced destinations: announce it
                with allow_egress(f"127.0.0.1:{port}"):
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise StatekitError(
                        f"the vendor stubs did not start on port {port}: {err[-500:]}"
                    ) from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
