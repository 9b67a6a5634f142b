"""A real local HTTP server that speaks the OpenAI chat completions protocol, for tests.

Each request takes the next scripted behaviour from `responses` (then `default`); requests are recorded
(body, headers, arrival time) so tests can check what the gateway sent and when.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class JsonReply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class SseReply:
    chunks: list[dict[str, Any]]
    done: bool = True
    # Close the connection abruptly after this many chunks (no [DONE], no chunked terminator).
    drop_after: int | None = None
    delay_s: float = 0.0
    first_delay_s: float = 0.0


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float


def completion(content: str = "", *, tool_calls: list[dict] | None = None, finish: str = "stop", usage: dict | None = None) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def embeddings(*vectors: list[float], prompt_tokens: int = 4, shuffled: bool = False) -> dict:
    """An /embeddings reply; `shuffled` lists the items last first (clients order them by `index`)."""
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    return {"object": "list", "data": data[::-1] if shuffled else data, "model": "embed-test",
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}}


def delta(content: str | None = None, *, tool_calls: list[dict] | None = None, finish: str | None = None, role: bool = False) -> dict:
    piece: dict[str, Any] = {}
    if role:
        piece["role"] = "assistant"
    if content is not None:
        piece["content"] = content
    if tool_calls is not None:
        piece["tool_calls"] = tool_calls
    return {"id": "chatcmpl-test", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": piece, "finish_reason": finish}]}


def usage_chunk(prompt: int, completion_tokens: int) -> dict:
    return {"id": "chatcmpl-test", "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion_tokens, "total_tokens": prompt + completion_tokens}}


class FakeOpenAI:
    def __init__(self) -> None:
        self.responses: list[JsonReply | SseReply] = []
        # The answer once `responses` is used up.
        self.default: JsonReply | SseReply = JsonReply(body=completion("default reply"))
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append(Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic()))
                    reply = fake.responses.pop(0) if fake.responses else fake.default
                if self.path not in ("/v1/chat/completions", "/v1/embeddings"):
                    reply = JsonReply(404, {"error": {"message": f"no route {self.path}"}})
                try:
                    if isinstance(reply, JsonReply):
                        self._json(reply)
                    else:
                        self._sse(reply)
                except (BrokenPipeError, ConnectionResetError):
                    # The gateway gave up on this attempt (a timeout test).
                    self.close_connection = True

            def _json(self, reply: JsonReply) -> None:
                time.sleep(reply.delay_s)
                data = json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _chunk(self, text: str) -> None:
                data = text.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _sse(self, reply: SseReply) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                time.sleep(reply.first_delay_s)
                for index, chunk in enumerate(reply.chunks):
                    if reply.drop_after is not None and index >= reply.drop_after:
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    self._chunk(f"data: {json.dumps(chunk)}\n\n")
                    time.sleep(reply.delay_s)
                if reply.done:
                    self._chunk("data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
