"""A stand-in for a model's OpenAI-compatible chat-completions endpoint, on loopback.

No language model exists on this machine (nor may one be reached), so tests that drive a model
client (statekit's LLM baseline, verifiers' player) point it here: ``reply`` decides each assistant
message from the request, and every request is kept for the test to check what the client sent.
Streaming requests (``"stream": true``) are answered as server-sent events, the way endpoints do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

Reply = Callable[[dict[str, Any]], dict[str, Any]]
"""The request body in, the assistant message (``{"role", "content", "tool_calls"?}``) out."""


class ChatStandIn:
    """``app`` serves ``POST /v1/chat/completions`` with ``reply``'s messages."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self.complete)

    async def complete(self, request: Request) -> Any:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        message = self.reply(body)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        number = len(self.requests)
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        if not body.get("stream"):
            return {
                "id": f"cmpl-{number}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "stand-in"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        head = {"id": f"cmpl-{number}", "object": "chat.completion.chunk", "created": 0, "model": "stand-in"}
        chunks = [
            {**head, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
            {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
            {**head, "choices": [], "usage": usage},
        ]
        events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
        return StreamingResponse(iter([events]), media_type="text/event-stream")


def scripted(script: list[dict[str, Any]]) -> ChatStandIn:
    """A stand-in that answers with ``script``'s messages, one per request, in order."""
    remaining = list(script)
    return ChatStandIn(lambda _body: remaining.pop(0))
