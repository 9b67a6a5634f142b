"""A local OpenAI-compatible model server with a real model's pace, for `make bench` and the tests.

It answers POST /v1/chat/completions (streamed or not) and /v1/embeddings. Every answer is the gateway's offline
scripted model's (services/gateway/providers/scripted: the required tool's call, JSON for a response format, the
narrative-engine@2 story), so a world plays as it does offline; but it arrives as a model sends it: the first
token `ttft_s` after the request, then `tokens_per_s`, with the usage (prompt and completion tokens) at the end.
Each call is recorded (the runtime the kernel's system prompt names, times, tokens, the prompt as sent) so the
bench can say where a turn's time went. `python -m bench.paced_model --port 8081` serves it alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bench.paced_wire import (
    BadRequest,
    Chunker,
    completion_body,
    error_body,
    prompt_text,
    prompt_tokens,
    read_call,
    runtime_of,
    tokens,
    usage,
)
from services.gateway.providers.scripted.hashed_embeddings import embed_text
from services.gateway.providers.scripted.provider import automatic_reply
from shared.errors import ServiceError

DEFAULT_TTFT_MS, DEFAULT_TOKENS_PER_S = 400.0, 50.0


@dataclass
class CallRecord:
    """One chat completion as served (times from time.monotonic())."""

    runtime_id: str
    plugin_id: str
    stream: bool
    started: float
    prompt: str
    prompt_tokens: int
    completion: str = ""
    completion_tokens: int = 0
    first_token: float = 0.0
    finished: float = 0.0
    # The pace's own floor for this call: first token after ttft, then one token each 1/tokens_per_s.
    floor_s: float = 0.0


@dataclass
class PacedModel:
    ttft_s: float = DEFAULT_TTFT_MS / 1000
    tokens_per_s: float = DEFAULT_TOKENS_PER_S
    model: str = "paced"
    calls: list[CallRecord] = field(default_factory=list)
    embeddings: int = 0

    def __post_init__(self) -> None:
        if self.ttft_s < 0 or self.tokens_per_s <= 0:
            raise ValueError(f"the pace needs ttft >= 0 and tokens/s > 0, not {self.ttft_s} s and {self.tokens_per_s}")

    def due(self, record: CallRecord, index: int) -> float:
        """When token `index` (from 0) of a reply is due."""
        return record.started + self.ttft_s + index / self.tokens_per_s

    async def chat(self, request: Request) -> Response:
        started = time.monotonic()
        try:
            body = await request.json()
            call = read_call(body)
            reply = automatic_reply(call)
        except (ValueError, BadRequest) as error:  # JSONDecodeError is a ValueError
            return JSONResponse(error_body(f"not a chat completion request: {error}"), status_code=400)
        except ServiceError as error:  # a schema the scripted model cannot fill
            return JSONResponse(error_body(error.message), status_code=400)
        runtime_id, plugin_id = runtime_of(call)
        record = CallRecord(runtime_id, plugin_id, bool(body.get("stream")), started, prompt_text(body), prompt_tokens(call))
        pieces = [("content", 0, piece) for piece in tokens(reply.content)]
        for index, tool_call in enumerate(reply.tool_calls):
            pieces += [("tool", index, piece) for piece in tokens(tool_call.arguments) or [""]]
        record.completion = reply.content + "".join(t.arguments for t in reply.tool_calls)
        record.completion_tokens = len(pieces)
        record.floor_s = self.ttft_s + max(0, len(pieces) - 1) / self.tokens_per_s
        self.calls.append(record)
        used = usage(record.prompt_tokens, record.completion_tokens)
        if not record.stream:
            await _sleep_until(self.due(record, max(0, len(pieces) - 1)))
            record.first_token = record.finished = time.monotonic()
            return JSONResponse(completion_body(self.model, reply.content, reply.tool_calls, reply.finish_reason, used))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = self._stream(record, pieces, reply.tool_calls, reply.finish_reason, used if include_usage else None)
        return StreamingResponse(chunks, media_type="text/event-stream")

    async def _stream(self, record: CallRecord, pieces: list[tuple[str, int, str]], tool_calls: tuple, finish: str,
                      used: dict | None) -> AsyncIterator[str]:
        chunker = Chunker(self.model)
        announced: set[int] = set()
        sent = 0
        while sent < len(pieces):
            await _sleep_until(self.due(record, sent))
            now = time.monotonic()
            record.first_token = record.first_token or now
            # Everything due by now goes in one write (a loaded machine catches up instead of falling behind).
            batch = []
            while sent < len(pieces) and self.due(record, sent) <= now:
                batch.append(pieces[sent])
                sent += 1
            yield "".join(self._delta(chunker, piece, tool_calls, announced) for piece in batch)
        yield chunker.chunk({}, finish)
        if used:
            yield chunker.chunk({}, usage=used)
        yield "data: [DONE]\n\n"
        record.finished = time.monotonic()

    @staticmethod
    def _delta(chunker: Chunker, piece: tuple[str, int, str], tool_calls: tuple, announced: set[int]) -> str:
        kind, index, text = piece
        if kind == "content":
            return chunker.chunk({"role": "assistant", "content": text})
        part: dict[str, Any] = {"index": index, "function": {"arguments": text}}
        if index not in announced:
            announced.add(index)
            part |= {"id": tool_calls[index].id, "type": "function", "function": {"name": tool_calls[index].name, "arguments": text}}
        return chunker.chunk({"tool_calls": [part]})

    async def embed(self, request: Request) -> Response:
        try:
            body = await request.json()
            inputs = body["input"]
            inputs = [inputs] if isinstance(inputs, str) else inputs
            if not isinstance(inputs, list) or not inputs or not all(isinstance(text, str) for text in inputs):
                raise ValueError("input must be a string or a non-empty list of strings")
        except (ValueError, KeyError, TypeError) as error:
            return JSONResponse(error_body(f"not an embeddings request: {error}"), status_code=400)
        self.embeddings += 1
        data = [{"object": "embedding", "index": i, "embedding": embed_text(text)} for i, text in enumerate(inputs)]
        count = sum(len(tokens(text)) for text in inputs)
        return JSONResponse({"object": "list", "data": data, "model": self.model, "usage": usage(count, 0)})

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"]),
                                 Route("/v1/embeddings", self.embed, methods=["POST"])])

    def gateway_env(self, base_url: str) -> dict[str, str]:
        """The gateway's settings that send every slot, embeddings too, to this server."""
        return {"COVEL_GATEWAY_OPENAI_BASE_URL": base_url, "COVEL_GATEWAY_OPENAI_MODEL": self.model,
                "COVEL_GATEWAY_OPENAI_EMBEDDING_MODEL": f"{self.model}-embed"}


async def _sleep_until(moment: float) -> None:
    wait = moment - time.monotonic()
    if wait > 0:
        await asyncio.sleep(wait)


@contextlib.asynccontextmanager
async def serving(model: PacedModel, port: int = 0) -> AsyncIterator[str]:
    """Serve `model` on 127.0.0.1 (a free port unless given) in this event loop; yields its base URL (…/v1)."""
    server = uvicorn.Server(uvicorn.Config(model.app(), host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # a failed start (port taken) raises here
            raise RuntimeError("the paced model server stopped before it started")
        await asyncio.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{bound}/v1"
    finally:
        server.should_exit = True
        await task


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--ttft-ms", type=float, default=DEFAULT_TTFT_MS)
    parser.add_argument("--tokens-per-s", type=float, default=DEFAULT_TOKENS_PER_S)
    args = parser.parse_args(argv)
    model = PacedModel(args.ttft_ms / 1000, args.tokens_per_s)

    async def run() -> None:
        async with serving(model, args.port) as base_url:
            print(json.dumps(model.gateway_env(base_url)), flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
