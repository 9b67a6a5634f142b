"""Providers that speak the OpenAI chat completions protocol (OpenAI, vLLM, Ollama, LM Studio, ...).

One attempt is one HTTP request: POST {base_url}/chat/completions, streamed (SSE) or not.
Failures before any output raise AttemptFailed (429/5xx/connect errors/timeouts are
retryable); a stream that breaks after output ends with a Final "interrupted". The key is
sent as a bearer token and kept out of logs and error messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
from httpx_sse import aconnect_sse

from services.gateway import events
from services.gateway.budget import parse_retry_after
from services.gateway.chat import Call, Embedded, Message, ToolCall, Usage
from services.gateway.events import ContentDelta, Event, Final, ToolCallDelta
from services.gateway.providers.base import GENERATION, STALL, AttemptFailed, AttemptLimits, approx_usage
from services.gateway.secret_redaction import redact_secret
from services.gateway.slots import Target
from services.gateway.thinking import apply_thinking

FINISH_REASONS = {
    "stop": events.STOP,
    "length": events.LENGTH,
    "tool_calls": events.TOOL_CALLS,
    "function_call": events.TOOL_CALLS,
    # Some compatible servers (OpenRouter, LiteLLM) end a failed generation this way.
    "error": events.ERROR,
}
_NAME = re.compile(r"[^A-Za-z0-9_-]")
# An error body is read this far: past it is never a message worth showing.
BODY_READ_CHARS = 64 * 1024


def finish_reason(value: str | None) -> str:
    if not value:
        return events.STOP
    return FINISH_REASONS.get(value, events.OTHER)


def wire_message(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = [
            {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments or "{}"}}
            for t in message.tool_calls
        ]
        if not message.content:
            out["content"] = None
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    if message.name:
        out["name"] = message.name
    return out


def request_body(call: Call, target: Target, *, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": target.model,
        "messages": [wire_message(m) for m in call.messages],
        "stream": stream,
    }
    if stream and target.provider.stream_usage:
        body["stream_options"] = {"include_usage": True}
    if call.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters or {"type": "object", "properties": {}},
                },
            }
            for t in call.tools
        ]
        if call.tool_choice in ("auto", "none", "required"):
            body["tool_choice"] = call.tool_choice
        elif call.tool_choice:
            body["tool_choice"] = {"type": "function", "function": {"name": call.tool_choice}}
    if call.response_format is not None and call.response_format.schema:
        schema_format: dict[str, Any] = {
            # OpenAI accepts [A-Za-z0-9_-]{1,64}; contract ids such as "narrative-engine@2" are not.
            "name": _NAME.sub("_", call.response_format.name)[:64] or "reply",
            "schema": call.response_format.schema,
        }
        if call.response_format.strict:
            schema_format["strict"] = True
        body["response_format"] = {"type": "json_schema", "json_schema": schema_format}
    if call.temperature is not None:
        body["temperature"] = call.temperature
    if call.max_tokens is not None:
        body["max_tokens"] = call.max_tokens
    return apply_thinking(body, target.provider.thinking, target.provider.thinking_off, call.reasoning)


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    prompt = int(raw.get("prompt_tokens") or 0)
    completion = int(raw.get("completion_tokens") or 0)
    return Usage(prompt_tokens=prompt, completion_tokens=completion)


def _provider_message(body: str, key: str | None) -> str:
    """What the provider said about an error, without the key even if it echoed it (split, re-cased or cut)."""
    text = body.strip()[:BODY_READ_CHARS]
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        text = str(error.get("message") or error.get("detail") or json.dumps(error)) if isinstance(error, dict) else str(error)
    # Redacted before the whitespace is squeezed and the text cut, so no cut leaves a piece of the key.
    text = " ".join(redact_secret(text, key).split())[:500]
    return text or "(no message)"


def http_failure(status: int, headers: httpx.Headers, body: str, target: Target, key: str | None,
                 endpoint: str = "chat/completions") -> AttemptFailed:
    said = _provider_message(body, key)
    name = target.provider.name
    if status == 429 or status >= 500 or status == 408:
        return AttemptFailed(
            f"HTTP {status} from provider {name}: {said}",
            retryable=True,
            status=status,
            retry_after_s=parse_retry_after(headers.get("retry-after")),
        )
    if status in (401, 403):
        return AttemptFailed(
            f"provider {name} refused the credentials (HTTP {status}); "
            f"{'check' if key else 'no key found; set'} the API key in {target.provider.key_hint()}",
            retryable=False,
            status=status,
            code=grpc.StatusCode.FAILED_PRECONDITION,
        )
    if status == 404:
        return AttemptFailed(
            f"provider {name} does not know model {target.model!r} or its {endpoint} endpoint (HTTP 404): {said}",
            retryable=False,
            status=status,
            code=grpc.StatusCode.FAILED_PRECONDITION,
        )
    if status in (400, 413, 422):
        return AttemptFailed(
            f"provider {name} rejected the request (HTTP {status}): {said}",
            retryable=False,
            status=status,
            code=grpc.StatusCode.INVALID_ARGUMENT,
        )
    return AttemptFailed(
        f"provider {name} answered HTTP {status}: {said}",
        retryable=False,
        status=status,
        code=grpc.StatusCode.FAILED_PRECONDITION,
    )


@dataclass
class _Assembly:
    """A streamed reply as it arrives."""

    content: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, str]] = field(default_factory=dict)
    finish: str | None = None
    usage: Usage | None = None

    @property
    def has_output(self) -> bool:
        return bool(self.content) or bool(self.tool_calls)

    def message(self) -> Message:
        calls = tuple(
            ToolCall(id=part["id"] or f"call_{index}", name=part["name"], arguments=part["arguments"])
            for index, part in sorted(self.tool_calls.items())
        )
        return Message(role="assistant", content="".join(self.content), tool_calls=calls)

    def final(self, call: Call, reason: str, error_message: str = "") -> Final:
        message = self.message()
        usage = self.usage or approx_usage(call, message.content + "".join(t.arguments for t in message.tool_calls))
        return Final(message=message, finish_reason=reason, usage=usage, error_message=error_message)


def parse_completion(call: Call, target: Target, text: str, key: str | None) -> Final:
    """A non-streamed chat completion body as a Final."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("error") and not data.get("choices"):
        raise AttemptFailed(
            f"provider {target.provider.name} reported a generation error: {_provider_message(text, key)}",
            retryable=True,
            kind=GENERATION,
        )
    try:
        choice = data["choices"][0]
        raw = choice.get("message") or {}
        calls = tuple(
            ToolCall(
                id=str(item.get("id") or f"call_{index}"),
                name=str((item.get("function") or {}).get("name") or ""),
                arguments=str((item.get("function") or {}).get("arguments") or ""),
            )
            for index, item in enumerate(raw.get("tool_calls") or [])
        )
    except (KeyError, IndexError, TypeError, AttributeError):
        raise AttemptFailed(
            f"provider {target.provider.name} sent a reply that is not a chat completion: {_provider_message(text, key)}",
            retryable=True,
        ) from None
    message = Message(role="assistant", content=str(raw.get("content") or ""), tool_calls=calls)
    usage = _usage(data.get("usage")) or approx_usage(call, message.content + "".join(t.arguments for t in calls))
    return Final(message=message, finish_reason=finish_reason(choice.get("finish_reason")), usage=usage)


def parse_embeddings(text: str, expected: int, target: Target, key: str | None) -> Embedded:
    """An /embeddings body: `data[].embedding` put back in the inputs' order by `index`."""
    try:
        data = json.loads(text)
        items = sorted(data["data"], key=lambda item: int(item.get("index", 0)))
        vectors = [[float(x) for x in item["embedding"]] for item in items]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise AttemptFailed(f"provider {target.provider.name} sent a reply that is not an embedding list: "
                            f"{_provider_message(text, key)}", retryable=True) from None
    if len(vectors) != expected or not vectors or any(len(v) != len(vectors[0]) or not v for v in vectors):
        raise AttemptFailed(f"provider {target.provider.name} sent {len(vectors)} vector(s) for {expected} input(s), "
                            "or vectors of different lengths", retryable=True)
    usage = _usage(data.get("usage")) or Usage(prompt_tokens=0, completion_tokens=0)
    return Embedded(vectors, usage)


class _StreamBroke(Exception):
    pass


class OpenAICompatibleProvider:
    def __init__(self, client: httpx.AsyncClient | None = None) -> None:
        self.client = client or httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=200))

    async def aclose(self) -> None:
        await self.client.aclose()

    def _headers(self, target: Target) -> tuple[dict[str, str], str | None]:
        headers = {"content-type": "application/json"}
        provider = target.provider
        key = provider.api_key()
        # No key: no header (local servers need none); a 401/403 then says where the key is looked for.
        if key:
            headers["authorization"] = f"Bearer {key}"
        return headers, key

    def _url(self, target: Target, endpoint: str = "chat/completions") -> str:
        return target.provider.base_url.rstrip("/") + "/" + endpoint

    async def embed(self, inputs: tuple[str, ...], target: Target, *, timeout_s: float, connect_timeout_s: float) -> Embedded:
        """One POST {base_url}/embeddings (services/gateway/embeddings.py retries it)."""
        headers, key = self._headers(target)
        body = {"model": target.model, "input": list(inputs), "encoding_format": "float"}
        timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s)
        try:
            async with asyncio.timeout(timeout_s):
                response = await self.client.post(self._url(target, "embeddings"), json=body, headers=headers, timeout=timeout)
        except (TimeoutError, httpx.TimeoutException):
            raise AttemptFailed(f"no reply within {timeout_s:.2f}s (call timeout)", retryable=True, kind=STALL) from None
        except httpx.TransportError as error:
            raise AttemptFailed(f"cannot reach provider {target.provider.name}: {type(error).__name__}", retryable=True) from None
        if response.status_code != 200:
            raise http_failure(response.status_code, response.headers, response.text, target, key, "embeddings")
        return parse_embeddings(response.text, len(inputs), target, key)

    async def attempt(
        self, call: Call, target: Target, *, slot: str, stream: bool, limits: AttemptLimits
    ) -> AsyncIterator[Event]:
        headers, key = self._headers(target)
        body = request_body(call, target, stream=stream)
        if stream:
            async for event in self._streamed(call, target, body, headers, key, limits):
                yield event
        else:
            yield await self._once(call, target, body, headers, key, limits)

    async def _once(
        self, call: Call, target: Target, body: dict[str, Any], headers: dict[str, str], key: str | None, limits: AttemptLimits
    ) -> Final:
        timeout = httpx.Timeout(limits.call_timeout_s, connect=min(limits.connect_timeout_s, limits.call_timeout_s))
        try:
            async with asyncio.timeout(limits.call_timeout_s):
                response = await self.client.post(self._url(target), json=body, headers=headers, timeout=timeout)
        except (TimeoutError, httpx.TimeoutException):
            raise AttemptFailed(f"no reply within {limits.call_timeout_s:.2f}s (call timeout)", retryable=True, kind=STALL) from None
        except httpx.TransportError as error:
            raise AttemptFailed(f"cannot reach provider {target.provider.name}: {type(error).__name__}", retryable=True) from None
        if response.status_code != 200:
            raise http_failure(response.status_code, response.headers, response.text, target, key)
        return parse_completion(call, target, response.text, key)

    async def _read(
        self,
        target: Target,
        body: dict[str, Any],
        headers: dict[str, str],
        key: str | None,
        limits: AttemptLimits,
        queue: asyncio.Queue[tuple[str, Any]],
    ) -> None:
        """Producer: SSE chunks into `queue` as ("chunk", dict), then ("end", None) or a failure."""
        timeout = httpx.Timeout(None, connect=limits.connect_timeout_s)
        try:
            async with aconnect_sse(self.client, "POST", self._url(target), json=body, headers=headers, timeout=timeout) as source:
                response = source.response
                if response.status_code != 200:
                    text = (await response.aread()).decode("utf-8", "replace")
                    await queue.put(("failed", http_failure(response.status_code, response.headers, text, target, key)))
                    return
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    # A server that ignored stream=true and answered with one JSON completion.
                    text = (await response.aread()).decode("utf-8", "replace")
                    await queue.put(("completion", text))
                    return
                async for sse in source.aiter_sse():
                    data = sse.data.strip()
                    if not data:
                        continue
                    if sse.event == "error":
                        # An SSE error event: a generation error, whatever its data looks like.
                        await queue.put(("chunk", {"error": data}))
                        continue
                    if data == "[DONE]":
                        await queue.put(("end", None))
                        return
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        continue
                    await queue.put(("chunk", chunk))
            await queue.put(("broke", "the stream ended without [DONE]"))
        except httpx.TimeoutException:
            await queue.put(("failed", AttemptFailed(f"cannot reach provider {target.provider.name}: connect timeout", retryable=True)))
        except httpx.ConnectError as error:
            await queue.put(("failed", AttemptFailed(f"cannot reach provider {target.provider.name}: {type(error).__name__}", retryable=True)))
        except httpx.TransportError as error:
            await queue.put(("broke", f"the stream broke off ({type(error).__name__})"))

    async def _streamed(
        self, call: Call, target: Target, body: dict[str, Any], headers: dict[str, str], key: str | None, limits: AttemptLimits
    ) -> AsyncIterator[Event]:
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=256)
        producer = asyncio.create_task(self._read(target, body, headers, key, limits, queue))
        reply = _Assembly()
        first_deadline = time.monotonic() + limits.first_token_timeout_s
        try:
            while True:
                wait = limits.silence_limit_s() if reply.has_output else max(0.0, first_deadline - time.monotonic())
                try:
                    # Fast path: chunks already read need no timer.
                    kind, item = queue.get_nowait() if not queue.empty() else await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    if not reply.has_output:
                        raise AttemptFailed(
                            f"no output within the first-token timeout ({limits.first_token_timeout_s:.2f}s)",
                            retryable=True,
                            kind=STALL,
                        ) from None
                    why = "idle timeout" if wait >= limits.idle_timeout_s else "the call's timeoutMs ran out while the stream was silent"
                    yield reply.final(call, events.INTERRUPTED, f"no output for {wait:.2f}s ({why})")
                    return
                if kind == "failed":
                    raise item
                if kind == "completion":
                    final = parse_completion(call, target, item, key)
                    if final.message.content:
                        yield ContentDelta(final.message.content)
                    for index, tool_call in enumerate(final.message.tool_calls):
                        yield ToolCallDelta(index, tool_call.id, tool_call.name, tool_call.arguments)
                    yield final
                    return
                if kind == "end" or (kind == "broke" and reply.finish is not None):
                    yield reply.final(call, finish_reason(reply.finish))
                    return
                if kind == "broke":
                    if not reply.has_output:
                        raise AttemptFailed(f"{item} before any output", retryable=True)
                    yield reply.final(call, events.INTERRUPTED, item)
                    return
                for event in self._chunk_events(item, reply, key, target):
                    yield event
        except _StreamBroke as error:
            if not reply.has_output:
                raise AttemptFailed(str(error), retryable=True, kind=GENERATION) from None
            yield reply.final(call, events.ERROR, str(error))
        finally:
            producer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await producer

    @staticmethod
    def _chunk_events(chunk: dict[str, Any], reply: _Assembly, key: str | None, target: Target) -> list[Event]:
        if "error" in chunk and not chunk.get("choices"):
            raise _StreamBroke(f"provider {target.provider.name} reported an error: {_provider_message(json.dumps(chunk), key)}")
        found: list[Event] = []
        usage = _usage(chunk.get("usage"))
        if usage is not None:
            reply.usage = usage
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if text:
                reply.content.append(text)
                found.append(ContentDelta(text))
            for part in delta.get("tool_calls") or []:
                index = int(part.get("index", 0))
                function = part.get("function") or {}
                slot = reply.tool_calls.setdefault(index, {"id": "", "name": "", "arguments": ""})
                call_id, name, arguments = str(part.get("id") or ""), str(function.get("name") or ""), str(function.get("arguments") or "")
                slot["id"] = slot["id"] or call_id
                slot["name"] = slot["name"] or name
                slot["arguments"] += arguments
                found.append(ToolCallDelta(index=index, id=call_id, name=name, arguments=arguments))
            if choice.get("finish_reason"):
                reply.finish = choice["finish_reason"]
        return found
