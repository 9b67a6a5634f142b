"""A local OpenAI-compatible HTTP server that answers with recorded model replies.

The gateway is pointed at it (COVEL_GATEWAY_OPENAI_BASE_URL), so the five real services send it
exactly what they would send a real provider. Replies are recorded chat completions (JSON files
under tests/fixtures/recorded/, in OpenAI's chat-completions format, tool calls included), chosen
by the runtime the request is for (the kernel's preamble names it) and by the step of that
runtime's loop (assistant messages after the last user message). A streamed request gets the same
completion as SSE chunks, the way a provider streams it; a recorded error (`{"status", "error"}`)
is answered with that HTTP status. Every request is recorded.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from covel.scheduler.v1 import scheduler_pb2_grpc
from covel.store.v1 import store_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT

RECORDED = REPO_ROOT / "tests" / "fixtures" / "recorded"
_RUNTIME = re.compile(r'You are the runtime "([^"]+)" of the plugin "([^"]+)"')


def recorded(name: str) -> dict[str, Any]:
    """One recorded completion: tests/fixtures/recorded/<name>.json."""
    return json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))


def runtime_of(body: dict[str, Any]) -> str:
    """The agent runtime the kernel's preamble names; for a function's ctx.gateway call (no preamble),
    `format:<name>` of its response format (e.g. `format:character-changes`)."""
    system = next((m.get("content") or "" for m in body.get("messages") or [] if m.get("role") == "system"), "")
    match = _RUNTIME.search(system)
    if match:
        return match.group(1)
    name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
    return f"format:{name}" if name else ""


def step_of(body: dict[str, Any]) -> int:
    messages = body.get("messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    return sum(1 for m in messages[last_user + 1:] if m.get("role") == "assistant")


@dataclass
class Request:
    runtime_id: str
    step: int
    body: dict[str, Any]

    @property
    def system(self) -> str:
        return self.body["messages"][0]["content"] if self.body["messages"][0]["role"] == "system" else ""

    @property
    def tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.body.get("tools") or []]


def _chunks(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """A completion as a provider streams it: role, the content in pieces, tool calls, finish, usage."""
    choice = completion["choices"][0]
    message, base = choice["message"], {"id": completion.get("id", "chatcmpl-recorded"), "object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant"})]
    content = message.get("content") or ""
    for start in range(0, len(content), 40):
        chunks.append(chunk({"content": content[start:start + 40]}))
    for index, call in enumerate(message.get("tool_calls") or []):
        chunks.append(chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                              "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]}))
    chunks.append(chunk({}, choice.get("finish_reason") or "stop"))
    if completion.get("usage"):
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks


class RecordedModel:
    """`replies[runtime_id]` is the list of completions for that runtime's steps, in order."""

    def __init__(self) -> None:
        self.replies: dict[str, list[dict[str, Any]]] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                request = Request(runtime_of(body), step_of(body), body)
                with model._lock:
                    model.requests.append(request)
                    steps = model.replies.get(request.runtime_id) or []
                    reply = steps[min(request.step, len(steps) - 1)] if steps else None
                if reply is None:
                    reply = {"status": 400, "error": {"message": f"no recorded reply for runtime {request.runtime_id!r}"}}
                if "error" in reply and "choices" not in reply:
                    # A recorded provider error: {"status": 400, "error": {...}}.
                    data = json.dumps({"error": reply["error"]}).encode()
                    self.send_response(int(reply.get("status") or 500))
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    for item in [*(f"data: {json.dumps(c)}\n\n" for c in _chunks(reply)), "data: [DONE]\n\n"]:
                        data = item.encode()
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    return
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def of(self, runtime_id: str) -> list[Request]:
        with self._lock:
            return [request for request in self.requests if request.runtime_id == runtime_id]

    def __enter__(self) -> RecordedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def env_for(model: RecordedModel) -> dict[str, str]:
    """The gateway settings that send every slot to the recorded model."""
    return {"COVEL_GATEWAY_OPENAI_BASE_URL": model.base_url, "COVEL_GATEWAY_OPENAI_MODEL": "recorded-model",
            "COVEL_GATEWAY_MAX_RETRIES": "0", "COVEL_GATEWAY_RETRY_BASE_MS": "10"}


@contextlib.asynccontextmanager
async def recorded_services(
    data_dir: Path, plugin_dirs: list[Path], extra_env: dict[str, str] | None = None
) -> AsyncIterator[tuple[RecordedModel, scheduler_pb2_grpc.SchedulerStub, store_pb2_grpc.TransactionalStoreStub]]:
    """The five services with `plugin_dirs` and every model slot sent to a fresh RecordedModel:
    (the model, a scheduler stub, a store stub); stopped after."""
    with RecordedModel() as model:
        env = {"COVEL_PLUGIN_DIRS": ":".join(map(str, plugin_dirs)), "COVEL_LOG_LEVEL": "info", **env_for(model), **(extra_env or {})}
        group = ServiceGroup(free_port_addrs(), data_dir, extra_env=env)
        await group.start()
        try:
            async with open_channel(group.addrs["scheduler"]) as channel, group.channel_as("store", "scheduler") as store_channel:
                yield model, scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        finally:
            await group.stop()


__all__ = ["RECORDED", "RecordedModel", "Request", "env_for", "recorded", "recorded_services"]
