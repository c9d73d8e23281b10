"""The LLM baseline: any OpenAI-compatible chat-completions endpoint plays the code environment.

::

    statekit serve code_env --port 8000 &
    python -m statekit_examples.adapters.code_env.llm_baseline \\
        --llm-url http://127.0.0.1:8080/v1 --model NAME --env-url http://127.0.0.1:8000 --attempts 3

Each attempt resets the environment, sends the task as the first user message with the
environment's tools as function-calling ``tools``, turns every ``tool_call`` the model returns into
one ``step``, and sends each observation back as a ``tool`` message, until the episode ends. A tool
call whose arguments are not valid JSON is answered with an error message (no step is taken); a
reply without tool calls gets one nudge, and a second one ends the attempt as a submit. The summary
counts, per task, how many attempts solved it: tasks solved always or never teach a
group-relative learner nothing, so the "mixed" row is the one that matters.

The key is read from ``$OPENAI_API_KEY`` (or ``--api-key-env``) and sent as a bearer token only
when set. No model is bundled or assumed: the tests drive this script against a scripted stand-in
server on loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

from statekit_examples.adapters.code_env.baselines import Env

SYSTEM_PROMPT = (
    "You are fixing or implementing Python code in a small working directory. Use the tools to look "
    "at the files, write your changes and run the visible tests. The task statement says everything "
    "the hidden tests check. Call submit when you are done; the hidden tests then decide your score."
)
NUDGE = "Please call one of the tools. Call submit when you are done."


class ChatClient:
    """POSTs to ``{url}/chat/completions``; ``transport`` is httpx's seam (tests, proxies)."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 300.0,
        transport: httpx.BaseTransport | None = None,
        temperature: float | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.model = model
        self.temperature = temperature
        self._http = httpx.Client(
            base_url=url.rstrip("/"), headers=headers, timeout=timeout, transport=transport
        )

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The assistant message of one completion (with its ``tool_calls``, if any)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "tools": tools,
            "tool_choice": "auto",
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        response = self._http.post("/chat/completions", json=body)
        if response.status_code != 200:
            raise RuntimeError(f"the chat endpoint answered {response.status_code}: {response.text[:500]}")
        data = response.json()
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise RuntimeError(f"not a chat completion: {json.dumps(data)[:500]}") from exc
        if not isinstance(message, dict):
            raise RuntimeError(f"not a chat completion message: {message!r}")
        return message

    def close(self) -> None:
        self._http.close()


def function_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """statekit's ``info["tools"]`` as chat-completions function tools."""
    return [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]},
        }
        for t in tools
    ]


def first_messages(observation: Any) -> list[dict[str, Any]]:
    """The system prompt, then the task and the starting files as the first user message."""
    task = observation.get("task", "") if isinstance(observation, dict) else str(observation)
    files = observation.get("files", []) if isinstance(observation, dict) else []
    user = f"Task:\n{task}\n\nFiles in the working directory: {', '.join(files) or '(none)'}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class ParsedCall:
    """One tool call of the model: the action to step, or why it cannot be one."""

    id: str
    action: dict[str, Any] | None
    error: str | None = None


def parse_tool_calls(message: dict[str, Any]) -> list[ParsedCall]:
    """The message's ``tool_calls`` as actions; malformed arguments become errors, never exceptions."""
    parsed = []
    for number, call in enumerate(message.get("tool_calls") or []):
        call_id = str(call.get("id") or f"call_{number}") if isinstance(call, dict) else f"call_{number}"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            parsed.append(ParsedCall(call_id, None, "a tool call needs a function name"))
            continue
        raw = function.get("arguments") or "{}"
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            parsed.append(
                ParsedCall(call_id, None, f"the arguments are not valid JSON ({exc}); send a JSON object")
            )
            continue
        if not isinstance(arguments, dict):
            parsed.append(ParsedCall(call_id, None, "the arguments must be a JSON object"))
            continue
        parsed.append(ParsedCall(call_id, {**arguments, "tool": function["name"]}))
    return parsed


@dataclass
class Attempt:
    seed: int
    task: str
    reward: float = 0.0
    steps: int = 0
    truncated: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)


def play(
    env: Env, client: ChatClient, *, seed: int, options: dict[str, Any] | None = None, max_turns: int = 40
) -> Attempt:
    """One attempt: reset, then model turns until the episode ends (or ``max_turns`` completions)."""
    observation, info = env.reset(seed=seed, options=options)
    attempt = Attempt(seed=seed, task=str(info["task_id"]), messages=first_messages(observation))
    tools = function_tools(info["tools"])
    nudged = False
    for _ in range(max_turns):
        message = client.complete(attempt.messages, tools)
        attempt.messages.append({k: v for k, v in message.items() if k in ("role", "content", "tool_calls")})
        calls = parse_tool_calls(message)
        if not calls:
            if nudged:
                return _finish(env, attempt, {"tool": "submit"})
            nudged = True
            attempt.messages.append({"role": "user", "content": NUDGE})
            continue
        for call in calls:
            if call.action is None:
                content = json.dumps({"error": {"code": "bad_tool_call", "message": call.error}})
                attempt.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
                continue
            observation, reward, terminated, truncated, _ = env.step(call.action)
            attempt.steps += 1
            attempt.messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(observation)}
            )
            if terminated or truncated:
                attempt.reward, attempt.truncated = reward, truncated
                return attempt
    attempt.truncated = True
    return attempt


def _finish(env: Env, attempt: Attempt, action: dict[str, Any]) -> Attempt:
    _, reward, _, truncated, _ = env.step(action)
    attempt.steps += 1
    attempt.reward, attempt.truncated = reward, truncated
    return attempt


def summary(attempts: list[Attempt]) -> dict[str, Any]:
    """Per task: rewards and whether it was solved always, never or sometimes."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for attempt in attempts:
        by_task[attempt.task].append(attempt.reward)
    rows = {}
    for task, rewards in sorted(by_task.items()):
        solved = sum(1 for r in rewards if r == 1.0)
        kind = "always" if solved == len(rewards) else "never" if solved == 0 else "mixed"
        rows[task] = {"rewards": rewards, "solved": f"{solved}/{len(rewards)}", "kind": kind}
    return {
        "tasks": rows,
        "mean_reward": sum(a.reward for a in attempts) / len(attempts) if attempts else 0.0,
        "counts": {k: sum(1 for r in rows.values() if r["kind"] == k) for k in ("always", "never", "mixed")},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--llm-url", required=True, help="base URL of an OpenAI-compatible API, e.g. http://host/v1"
    )
    parser.add_argument("--model", required=True)
    parser.add_argument(
        "--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the key"
    )
    parser.add_argument(
        "--env-url", default=None, help="a `statekit serve code_env` URL (default: in-process)"
    )
    parser.add_argument("--token", default=os.environ.get("STATEKIT_TOKEN"), help="the harness's token")
    parser.add_argument("--tasks", default=None, help="comma-separated task ids (default: every task)")
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--max-turns", type=int, default=40)
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)

    client = ChatClient(
        args.llm_url, args.model, api_key=os.environ.get(args.api_key_env), temperature=args.temperature
    )
    env: Any
    allowance = None
    if args.env_url:
        from statekit import RemoteEnvironment

        env = RemoteEnvironment(args.env_url, token=args.token)
    else:
        import statekit
        import statekit.kit

        env = statekit.make("code_env")
        allowance = statekit.kit.allow_egress(args.llm_url)  # the model's API, past the environment's guard
    try:
        task_ids = args.tasks.split(",") if args.tasks else _task_ids(env)
        attempts = [
            play(env, client, seed=attempt, options={"task": task}, max_turns=args.max_turns)
            for task in task_ids
            for attempt in range(args.attempts)
        ]
    finally:
        env.close()
        client.close()
        if allowance is not None:
            allowance.close()
    report = summary(attempts)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    else:
        for task, row in report["tasks"].items():
            print(f"{task:<20} {row['solved']:>5}  {row['kind']:<6}  rewards {row['rewards']}")
        print(f"mean reward {report['mean_reward']:.3f}; tasks solved always/never/mixed: {report['counts']}")
    return 0


def _task_ids(env: Any) -> list[str]:
    adapter = getattr(env, "adapter", None)
    if adapter is not None:
        return list(adapter.task_kinds())
    from statekit_examples.adapters.code_env.tasks import load_tasks

    return sorted(load_tasks())


if __name__ == "__main__":
    sys.exit(main())
