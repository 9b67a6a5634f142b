"""The OpenAI chat-completions wire for bench/paced_model.py: a request body read into the gateway's `Call`
(a clear error for a body that is not one), a reply cut into tokens, and the chunks and bodies a server sends."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from services.gateway.chat import Call, Message, ResponseFormat, Tool, ToolCall
from services.gateway.providers.base import approx_tokens

# A token: a word or one punctuation mark, with the white space before it (the pieces join back to the text).
_TOKEN = re.compile(r"\s*(?:\w+|[^\w\s])|\s+$", re.UNICODE)
# The kernel's first line of every agent's system prompt (services/scheduler/agent/context.py).
_RUNTIME = re.compile(r'^You are the runtime "([^"]+)" of the plugin "([^"]+)"')


class BadRequest(ValueError):
    """A body that is not a chat completion request: answered 400 with this message."""


def tokens(text: str) -> list[str]:
    pieces = _TOKEN.findall(text)
    return pieces if "".join(pieces) == text else list(text)


def _message(index: int, raw: Any) -> Message:
    if not isinstance(raw, dict) or raw.get("role") not in ("system", "user", "assistant", "tool"):
        raise BadRequest(f"messages[{index}] must be an object with role system, user, assistant or tool")
    content = raw.get("content") or ""
    if not isinstance(content, str):
        raise BadRequest(f"messages[{index}].content must be a string or null")
    calls = tuple(ToolCall(id=str(c.get("id", "")), name=str((c.get("function") or {}).get("name", "")),
                           arguments=str((c.get("function") or {}).get("arguments", "")))
                  for c in raw.get("tool_calls") or [] if isinstance(c, dict))
    return Message(role=raw["role"], content=content, tool_calls=calls, tool_call_id=str(raw.get("tool_call_id") or ""),
                   name=str(raw.get("name") or ""))


def _tool_choice(raw: Any) -> str:
    if isinstance(raw, dict):
        return str((raw.get("function") or {}).get("name") or "")
    return str(raw or "")


def read_call(body: Any) -> Call:
    """The request as the gateway's Call; BadRequest says what is wrong with it."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list")
    tools = []
    for index, raw in enumerate(body.get("tools") or []):
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise BadRequest(f"tools[{index}] must be {{'type': 'function', 'function': {{'name': ...}}}}")
        tools.append(Tool(function["name"], str(function.get("description") or ""), function.get("parameters") or {}))
    response_format = None
    schema_format = (body.get("response_format") or {}).get("json_schema")
    if isinstance(schema_format, dict):
        response_format = ResponseFormat(str(schema_format.get("name") or ""), schema_format.get("schema") or {})
    return Call(slot="", messages=tuple(_message(i, m) for i, m in enumerate(messages)), tools=tuple(tools),
                tool_choice=_tool_choice(body.get("tool_choice")), response_format=response_format)


def runtime_of(call: Call) -> tuple[str, str]:
    """(runtime id, plugin id) the kernel named in the system prompt; ("", "") for a call of no runtime."""
    for message in call.messages:
        if message.role == "system":
            found = _RUNTIME.match(message.content)
            return (found.group(1), found.group(2)) if found else ("", "")
    return "", ""


def prompt_text(body: dict[str, Any]) -> str:
    """The prompt in the order a provider reads it (tools, format, then the messages): what its prompt cache keys on."""
    head = json.dumps([body.get("tools") or [], body.get("response_format") or {}], sort_keys=True, ensure_ascii=False)
    return head + "".join(json.dumps(m, sort_keys=True, ensure_ascii=False) for m in body["messages"])


def prompt_tokens(call: Call) -> int:
    """Counted as the gateway's scripted model counts them (providers/base.py approx_usage), tools included."""
    tools = sum(approx_tokens(json.dumps(t.parameters)) + approx_tokens(t.description) for t in call.tools)
    return tools + sum(approx_tokens(m.content) + sum(approx_tokens(t.arguments) for t in m.tool_calls) + 3 for m in call.messages)


@dataclass
class Chunker:
    """Chat completion chunks of one streamed reply."""

    model: str
    id: str = ""

    def __post_init__(self) -> None:
        self.id = self.id or f"chatcmpl-paced-{time.monotonic_ns()}"

    def chunk(self, delta: dict[str, Any], finish: str | None = None, usage: dict | None = None) -> str:
        body: dict[str, Any] = {"id": self.id, "object": "chat.completion.chunk", "model": self.model,
                                "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage:
            body["usage"] = usage
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion_body(model: str, content: str, calls: tuple[ToolCall, ...], finish: str, used: dict[str, int]) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in calls]
    return {"id": f"chatcmpl-paced-{time.monotonic_ns()}", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": used}


def error_body(message: str, kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind}}
