"""What a step costs: the claims app called directly beside ``env.step`` in-process, over HTTP, over
the WebSocket and through Ray.

    python benchmarks/step.py [--steps 200] [--skip-ray]

One run, side by side, for a read tool (``get_claim``) and a write tool (``add_note``): the floor (the
same call the adapter makes, ``WebApp.call`` on the warm application's own transport with its JSON
answer decoded, on the same world, outside any step), ``env.step`` in-process (the default ``rewind``
strategy, embedded PostgreSQL), and the same step through ``statekit serve`` over HTTP (an in-process
server thread, ``RemoteEnvironment``) and over its WebSocket (``/ws``, OpenEnv's protocol, one message
per step), and through Ray (one environment actor on a one-node loopback cluster, a ``VectorEnv`` of
one).
Prints p50/p90, each against the floor, statekit's own cost per step (p50 minus the floor's) and
steps per second on one process.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

from timing import percentile_ms
from websockets.sync.client import ClientConnection, connect

import statekit
from statekit.client import RemoteEnvironment
from statekit.harness import HarnessConfig, create_app
from statekit.servers import ThreadedServer
from statekit_examples.adapters.claims_app.tools import ROUTES


def socket_call(socket: ClientConnection, message: dict[str, Any]) -> dict[str, Any]:
    """One message on the harness's ``/ws`` (OpenEnv's protocol) and its answer; an error raises."""
    socket.send(json.dumps(message))
    answer: dict[str, Any] = json.loads(socket.recv())
    if answer["type"] == "error":
        raise RuntimeError(answer["data"])
    return answer


def samples(n: int, call: Callable[[], object]) -> list[float]:
    for _ in range(5):  # warm
        call()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        out.append(time.perf_counter() - t0)
    return out


def ray_column(
    results: dict[str, dict[str, list[float]]], actions: dict[str, Any], cap: int, steps: int
) -> None:
    """The same steps through Ray: a one-node cluster on loopback, one environment actor, stepped by
    a ``VectorEnv`` of one (a Ray round trip per step)."""
    from statekit.ray import EnvSpec, LocalCluster, VectorEnv

    with (
        LocalCluster(1, cpus_per_node=os.cpu_count() or 1),
        VectorEnv(EnvSpec("claims_app", max_steps=cap), 1, num_cpus=1) as vector,
    ):
        vector.reset([1])
        for name, action in actions.items():
            results[name]["through Ray"] = samples(steps, lambda a=action: vector.step([a]))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--skip-ray", action="store_true", help="leave out the Ray column (starts a cluster)")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    cap = 10 * args.steps + 100
    results: dict[str, dict[str, list[float]]] = {}
    with statekit.make("claims_app", max_steps=cap) as env:
        env.reset(seed=1)
        listed: Any = env.step({"tool": "list_claims", "assigned_to_me": True, "limit": 1})[0]
        reference = listed["body"]["items"][0]["reference"]
        actions = {
            "read (get_claim)": {"tool": "get_claim", "reference": reference},
            "write (add_note)": {"tool": "add_note", "reference": reference, "body": "checked"},
        }
        app = env._live.episode.app  # type: ignore[union-attr]  # the warm app statekit holds: the floor

        def direct(action: dict[str, Any]) -> Callable[[], object]:
            """The very call the adapter makes in a step (request and JSON answer), outside any step."""
            route, arguments = ROUTES[action["tool"]], {k: v for k, v in action.items() if k != "tool"}
            return lambda: app.web.call(route, arguments)

        for name, action in actions.items():
            results[name] = {"app directly": samples(args.steps, direct(action))}
            # the floor's writes, made outside any step on the machine's clock, rewound: the steps do
            # not start by reporting them (the database-clock control reads what the journal gained)
            env.reset(seed=1)
            results[name]["env.step"] = samples(args.steps, lambda a=action: env.step(a))
    with (
        ThreadedServer(create_app(HarnessConfig.of("claims_app", workers=0, max_steps=cap))) as server,
        RemoteEnvironment(server.url) as remote,
    ):
        remote.reset(seed=1)
        for name, action in actions.items():
            results[name]["over HTTP"] = samples(args.steps, lambda a=action: remote.step(a))
        with connect(server.url.replace("http://", "ws://") + "/ws") as socket:
            socket_call(socket, {"type": "reset", "data": {"seed": 1}})
            for name, action in actions.items():
                results[name]["WebSocket"] = samples(
                    args.steps, lambda a=action: socket_call(socket, {"type": "step", "data": a})
                )
    if not args.skip_ray:
        ray_column(results, actions, cap, args.steps)
    print(
        f"step: claims_app (default strategy rewind), {args.steps} steps each, one process; "
        f"load average before {load:.2f} on {os.cpu_count()} cores"
    )
    for name, rows in results.items():
        floor = percentile_ms(rows["app directly"], 0.5)
        print(f" {name}")
        for label, values in rows.items():
            p50, p90 = percentile_ms(values, 0.5), percentile_ms(values, 0.9)
            print(
                f"  {label:<13} p50 {p50:7.2f} ms  p90 {p90:7.2f} ms  {p50 / floor:5.2f}x floor  "
                f"+{p50 - floor:6.2f} ms  {1000 / p50:6.0f} steps/s"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
