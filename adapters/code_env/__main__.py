"""``python -m statekit_examples.adapters.code_env``: play, validate the pool, or run the baselines.

::

    python -m statekit_examples.adapters.code_env play --seed 7   # actions as JSON: {"tool": "list_files"}
    python -m statekit_examples.adapters.code_env validate        # every task's verdict in this sandbox
    python -m statekit_examples.adapters.code_env baselines --episodes 40
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import statekit
from statekit.kit import reference_actions
from statekit_examples.adapters.code_env import CodeEnvAdapter
from statekit_examples.adapters.code_env.baselines import POLICIES, run_episode, run_script


def cmd_play(args: argparse.Namespace) -> int:
    options = {"task": args.task} if args.task else None
    with statekit.make("code_env", strategy=args.strategy) as env:
        observation, info = env.reset(seed=args.seed, options=options)
        print(
            json.dumps(
                {
                    "observation": observation,
                    "task_id": info["task_id"],
                    "tools": [t["name"] for t in info["tools"]],
                },
                indent=2,
            )
        )
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                action: Any = json.loads(line)
            except json.JSONDecodeError as exc:
                print(f'not JSON ({exc}); type an action such as {{"tool": "list_files"}}')
                continue
            observation, reward, terminated, truncated, _ = env.step(action)
            print(
                json.dumps(
                    {
                        "observation": observation,
                        "reward": reward,
                        "terminated": terminated,
                        "truncated": truncated,
                    },
                    indent=2,
                )
            )
            if terminated or truncated:
                return 0
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    with statekit.make("code_env", strategy=args.strategy) as env:
        adapter = env.adapter
        assert isinstance(adapter, CodeEnvAdapter)
        pool = adapter.pool
        for task_id in sorted(adapter.all_tasks):
            problems = pool.rejected.get(task_id, ())
            print(f"{task_id:<20} {'ok' if not problems else 'REJECTED: ' + '; '.join(problems)}")
        image = adapter.sandbox.describe()["image"]
        print(f"{len(pool.tasks)} of {len(adapter.all_tasks)} tasks in the pool ({image})")
        return 1 if pool.rejected else 0


def cmd_baselines(args: argparse.Namespace) -> int:
    with statekit.make("code_env", strategy=args.strategy) as env:
        rows = {}
        for name, policy in POLICIES.items():
            results = [run_episode(env, policy, seed) for seed in range(args.episodes)]
            rows[name] = results
        reference = []
        for task_id in env.adapter.task_kinds():
            env.reset(seed=0, options={"task": task_id})
            script = reference_actions(env.adapter, env.task)
            reference.append(run_script(env, 0, script, options={"task": task_id}))
        rows["reference"] = reference
    for name, results in rows.items():
        mean = sum(r.reward for r in results) / len(results)
        nonzero = sorted({r.task for r in results if r.reward > 0})
        print(f"{name:<11} episodes {len(results):>4}  mean reward {mean:.3f}  ", end="")
        print(f"tasks with reward > 0: {len(nonzero)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m statekit_examples.adapters.code_env", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in (("play", cmd_play), ("validate", cmd_validate), ("baselines", cmd_baselines)):
        command = sub.add_parser(name)
        command.add_argument("--strategy", default=None, help="subprocess (default) or container")
        command.set_defaults(func=func)
        if name == "play":
            command.add_argument("--seed", type=int, default=7)
            command.add_argument("--task", default=None, help="a task id (default: the seed picks)")
        if name == "baselines":
            command.add_argument("--episodes", type=int, default=40, help="episodes per random policy")
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
