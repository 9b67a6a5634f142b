"""The offline scripted model: canned replies from a script, else a deterministic automatic reply.

Automatic mode answers any request validly: a call of the required tool with arguments
that satisfy its schema; JSON satisfying response_format (a little story for
narrative-engine@2); plain text otherwise. The seed is a hash of the conversation, so the
same request always gets the same reply.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections.abc import AsyncIterator

import grpc

from services.gateway import events
from services.gateway.chat import Call, Embedded, Message, ToolCall, Usage
from services.gateway.events import ContentDelta, Event, Final, ToolCallDelta
from services.gateway.providers.base import STALL, AttemptFailed, AttemptLimits, approx_tokens, approx_usage
from services.gateway.providers.scripted.canned_replies import Reply, Script
from services.gateway.providers.scripted.hashed_embeddings import MODEL as EMBEDDING_MODEL
from services.gateway.providers.scripted.hashed_embeddings import embed_text
from services.gateway.providers.scripted.schema_instances import SchemaInstanceError, generate_instance
from services.gateway.providers.scripted.story_replies import (
    is_story_schema,
    planned_tool_call,
    structured_reply,
    system_text,
    write_story,
)
from services.gateway.slots import Target
from shared.errors import invalid_argument

CHUNK_MIN, CHUNK_MAX = 8, 16


def conversation_seed(call: Call) -> str:
    digest = hashlib.sha256()
    parts: list[object] = [
        [[m.role, m.content, m.name, m.tool_call_id, [[t.name, t.arguments] for t in m.tool_calls]] for m in call.messages],
        [t.name for t in call.tools],
        call.tool_choice,
        call.response_format.name if call.response_format else "",
    ]
    digest.update(json.dumps(parts, ensure_ascii=False, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()


def _story_prose(story: dict) -> str:
    lines = []
    for segment in story["segments"]:
        if segment["kind"] == "dialogue" and segment.get("speaker"):
            lines.append(f"{segment['speaker']}: \u201c{segment['text']}\u201d")
        else:
            lines.append(segment["text"])
    return "\n\n".join(lines)


def _earlier_player_texts(call: Call) -> tuple[str, ...]:
    """The user messages before the last one: the story so far, as the player told it."""
    texts = [m.content.strip() for m in call.messages if m.role == "user" and m.content.strip()]
    return tuple(texts[:-1])


def _told(call: Call) -> str:
    """What the story already told in this conversation (the assistant's earlier messages)."""
    return "\n".join(m.content for m in call.messages if m.role == "assistant" and m.content)


def _remembered(call: Call) -> list[str]:
    """The memory-search hits this call's conversation got back, best first (the story recalls one)."""
    for message in reversed(call.messages):
        if message.role != "tool":
            continue
        try:
            result = json.loads(message.content)
        except json.JSONDecodeError:
            continue
        hits = (result.get("data") or {}).get("results") if isinstance(result, dict) and result.get("ok") else None
        if isinstance(hits, list) and hits:
            return [hit["text"] for hit in hits if isinstance(hit, dict) and isinstance(hit.get("text"), str)]
    return []


def automatic_reply(call: Call) -> Reply:
    seed = conversation_seed(call)
    planned = planned_tool_call(call.messages, call.tools, call.tool_choice, call.last_user_text()) if call.tools and call.tool_choice != "none" else None
    if planned is not None:
        name, arguments = planned
        return Reply(tool_calls=(ToolCall(id=f"call_{seed[:16]}", name=name, arguments=json.dumps(arguments, ensure_ascii=False)),),
                     finish_reason=events.TOOL_CALLS)
    tool = call.forced_tool()
    try:
        if tool is not None:
            arguments = generate_instance(tool.parameters or {"type": "object"}, seed)
            return Reply(
                tool_calls=(ToolCall(id=f"call_{seed[:16]}", name=tool.name, arguments=json.dumps(arguments, ensure_ascii=False)),),
                finish_reason=events.TOOL_CALLS,
            )
        response_format = call.response_format
        if response_format is not None and (response_format.schema or is_story_schema(response_format.name, None)):
            structured = structured_reply(response_format.name, response_format.schema, call.messages, call.last_user_text(), seed)
            if is_story_schema(response_format.name, response_format.schema):
                value = write_story(call.last_user_text(), seed, _earlier_player_texts(call), system_text(call.messages),
                                    remembered=_remembered(call), told=_told(call))
            elif structured is not None:
                value = structured
            else:
                value = generate_instance(response_format.schema, seed)
            return Reply(content=json.dumps(value, ensure_ascii=False))
    except SchemaInstanceError as error:
        field = f"tools[{call.tools.index(tool)}].parameters" if tool is not None else "response_format.schema"
        raise invalid_argument(field, f"the scripted model cannot build a value for this schema: {error}") from None
    return Reply(content=_story_prose(write_story(call.last_user_text(), seed, _earlier_player_texts(call), system_text(call.messages))))


def _chunks(text: str, rng: random.Random) -> list[str]:
    pieces, at = [], 0
    while at < len(text):
        size = rng.randint(CHUNK_MIN, CHUNK_MAX)
        pieces.append(text[at : at + size])
        at += size
    return pieces


class ScriptedProvider:
    def __init__(self, script: Script | None = None, chunk_delay_ms: int = 0) -> None:
        self.script = script or Script()
        self.chunk_delay_s = max(0, chunk_delay_ms) / 1000

    async def aclose(self) -> None:
        return None

    async def embed(self, inputs: tuple[str, ...], target: Target, *, timeout_s: float, connect_timeout_s: float) -> Embedded:
        """The offline embedder (hashed_embeddings.py): the same text, the same vector, everywhere."""
        usage = Usage(prompt_tokens=sum(approx_tokens(text) for text in inputs))
        return Embedded([embed_text(text) for text in inputs], usage, model=EMBEDDING_MODEL)

    def reply_for(self, call: Call, slot: str) -> Reply:
        return self.script.next_reply(slot, call.last_user_text()) or automatic_reply(call)

    async def attempt(
        self, call: Call, target: Target, *, slot: str, stream: bool, limits: AttemptLimits
    ) -> AsyncIterator[Event]:
        reply = self.reply_for(call, slot)
        if reply.delay_ms:
            limit = limits.first_token_timeout_s if stream else limits.call_timeout_s
            if reply.delay_ms / 1000 > limit:
                await asyncio.sleep(limit)
                what = "no output before the first-token timeout" if stream else "no reply within the call timeout"
                raise AttemptFailed(what, retryable=True, kind=STALL)
            await asyncio.sleep(reply.delay_ms / 1000)
        if reply.error is not None:
            status = reply.error.status
            retryable = status == 429 or status >= 500
            raise AttemptFailed(
                f"scripted provider error {status}: {reply.error.message}",
                retryable=retryable,
                status=status,
                code=grpc.StatusCode.UNAVAILABLE if retryable else grpc.StatusCode.FAILED_PRECONDITION,
            )
        rng = random.Random(conversation_seed(call))
        if stream:
            for piece in _chunks(reply.content, rng):
                if self.chunk_delay_s:
                    await asyncio.sleep(self.chunk_delay_s)
                yield ContentDelta(piece)
            for index, tool_call in enumerate(reply.tool_calls):
                pieces = _chunks(tool_call.arguments, rng) or [""]
                yield ToolCallDelta(index, tool_call.id, tool_call.name, pieces[0])
                for piece in pieces[1:]:
                    if self.chunk_delay_s:
                        await asyncio.sleep(self.chunk_delay_s)
                    yield ToolCallDelta(index, arguments=piece)
            # Let the deltas go out (issue 19: Generate sends what is ready at once) before the usage
            # count below, a regex over the whole conversation.
            await asyncio.sleep(0)
        completion = reply.content + "".join(t.arguments for t in reply.tool_calls)
        yield Final(
            message=Message(role="assistant", content=reply.content, tool_calls=reply.tool_calls),
            finish_reason=reply.finish_reason,
            usage=approx_usage(call, completion),
            error_message=reply.error_message,
        )
