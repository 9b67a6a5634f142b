"""Run an agent runtime: assemble its context, call the gateway, stream and shape its story.

This first version runs story agents without tools (one model call); the full agent loop
(steps, tools, completion, corrections) builds on it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from covel.registry.v1 import registry_pb2
from services.scheduler.context_assembly import assemble, framework_preamble
from services.scheduler.hook_bus import ExecutionScope, HookBus
from services.scheduler.story_output import EmptyStory, Story, normalize_story
from services.scheduler.story_stream import SegmentTextStream, StreamedPiece
from shared.contracts import NARRATIVE_ENGINE, kernel_contract_schema
from shared.structs import from_struct, to_struct

OnNarrative = Callable[[StreamedPiece], Awaitable[None]]
# agent.loop.corrections.review: how often PostLLMResponse may send a draft back (spec default).
DEFAULT_REVIEW_CORRECTIONS = 2


@dataclass
class RuntimeOutcome:
    status: str  # success | failed | skipped
    reason: str = ""
    story: Story | None = None
    output: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    trace: list[common_pb2.HookTraceEntry] = field(default_factory=list)
    run_id: str = ""
    # plugin.data writes ({namespace, key, value}) a function runtime proposes.
    writes: list[dict[str, Any]] = field(default_factory=list)
    # A function's business value as returned (output is its projection).
    canonical_value: Any = None
    has_value: bool = False


def _manifest_get(manifest: dict[str, Any], *path: str, default: Any = None) -> Any:
    node: Any = manifest
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def is_story_runtime(runtime: registry_pb2.RuntimeManifest) -> bool:
    return runtime.visibility == "story"


def _response_format(manifest: dict[str, Any], story: bool) -> gateway_pb2.ResponseFormat | None:
    schema_ref = _manifest_get(manifest, "io", "output", "schema")
    contract = _manifest_get(manifest, "io", "output", "contract")
    if story and (schema_ref == f"contract:{NARRATIVE_ENGINE}" or contract == NARRATIVE_ENGINE):
        return gateway_pb2.ResponseFormat(name=NARRATIVE_ENGINE, schema=to_struct(kernel_contract_schema(NARRATIVE_ENGINE)))
    return None


async def run_agent(
    *,
    runtime: registry_pb2.RuntimeManifest,
    scope: ExecutionScope,
    history: list[common_pb2.Message],
    player_message: str,
    gateway: gateway_pb2_grpc.LlmGatewayStub,
    hooks: HookBus,
    on_narrative: OnNarrative,
    history_max_turns: int,
    inputs: dict[str, Any] | None = None,
) -> RuntimeOutcome:
    manifest = from_struct(runtime.manifest)
    story = is_story_runtime(runtime)
    session = scope.session
    max_turns = _manifest_get(manifest, "agent", "history", "maxTurns", default=history_max_turns)
    system_prompt, messages = assemble(runtime, session.locale, story, history, player_message, max_turns, inputs)
    trace: list[common_pb2.HookTraceEntry] = []

    assembled = await hooks.dispatch(
        "PostContextAssembly",
        scope,
        {"systemPrompt": system_prompt, "messages": messages, "outputKind": "story" if story else "system",
         "promptTemplate": runtime.prompt},
        plugin_id=runtime.plugin_id,
        runtime_id=runtime.runtime_id,
    )
    trace.extend(assembled.trace)
    if assembled.payload.get("systemPrompt") != system_prompt:
        # The framework's own preamble always comes first, whatever a hook wrote.
        preamble = framework_preamble(runtime, session.locale, story)
        replaced = str(assembled.payload.get("systemPrompt") or "")
        system_prompt = replaced if replaced.startswith(preamble) else f"{preamble}\n\n{replaced}"
    if isinstance(assembled.payload.get("messages"), list):
        messages = assembled.payload["messages"]

    slot = _manifest_get(manifest, "agent", "model", default="story" if story else "plugin")
    loop = _manifest_get(manifest, "agent", "loop", default={}) or {}
    review_budget = int(_manifest_get(loop, "corrections", "review", default=DEFAULT_REVIEW_CORRECTIONS))
    timeout_s = int(loop.get("timeoutMs", 240_000 if story else 120_000)) / 1000
    response_format = _response_format(manifest, story)
    model = session.runtime_model_overrides.get(runtime.runtime_id, "") or slot
    conversation = list(messages)
    corrections_used = 0
    started = time.monotonic()
    usage = {"promptTokens": 0, "completionTokens": 0}
    while True:
        call_messages = [{"role": "system", "content": system_prompt}, *conversation]
        pre = await hooks.dispatch(
            "PreLLMCall", scope, {"messages": call_messages, "model": model, "tools": [], "stream": True},
            plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
        )
        trace.extend(pre.trace)
        # A PreLLMCall replace changes this one call; the runtime's own conversation stays as it is.
        sent_messages = pre.payload.get("messages") if isinstance(pre.payload.get("messages"), list) else call_messages
        call_model = pre.payload.get("model") if isinstance(pre.payload.get("model"), str) and pre.payload.get("model") else model
        stream = pre.payload.get("stream") is not False
        request = gateway_pb2.GenerateRequest(
            slot=slot,
            model_override="" if call_model == slot else call_model,
            messages=[_chat_message(m) for m in sent_messages],
            call_timeout_ms=int(loop.get("callTimeoutMs", 0) or 0),
            first_token_timeout_ms=int(loop.get("firstTokenTimeoutMs", 0) or 0),
            idle_timeout_ms=int(loop.get("idleTimeoutMs", 0) or 0),
            origin=gateway_pb2.CallOrigin(session_id=session.id, turn_id=scope.turn_id, runtime_id=runtime.runtime_id),
        )
        if response_format is not None:
            request.response_format.CopyFrom(response_format)
        final, content = await _call_model(gateway, request, stream and story, on_narrative, timeout_s)
        if final is not None:
            usage["promptTokens"] += final.usage.prompt_tokens
            usage["completionTokens"] += final.usage.completion_tokens
        if final is None:
            return RuntimeOutcome("failed", "the model stream ended without a final message", usage=usage, trace=trace)
        if final.finish_reason in (gateway_pb2.FINISH_REASON_ERROR, gateway_pb2.FINISH_REASON_INTERRUPTED):
            return RuntimeOutcome("failed", f"model call failed: {final.error_message or 'no reason given'}", usage=usage, trace=trace)
        finish = gateway_pb2.FinishReason.Name(final.finish_reason).removeprefix("FINISH_REASON_").lower()
        reviewed = await hooks.dispatch(
            "PostLLMResponse", scope, {"response": {"content": content, "finishReason": finish}, "messages": sent_messages},
            plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
        )
        trace.extend(reviewed.trace)
        correction = reviewed.payload.get("correction")
        if isinstance(correction, str) and correction.strip():
            if corrections_used >= review_budget:
                return RuntimeOutcome(
                    "failed",
                    f"invalid-output: a PostLLMResponse hook asked for another correction after the review budget ({review_budget}) was used",
                    usage=usage, trace=trace,
                )
            corrections_used += 1
            if story:
                # What was streamed of the rejected draft is withdrawn before the new answer streams.
                await on_narrative(StreamedPiece("", reset=True))
            conversation += [{"role": "assistant", "content": content}, {"role": "user", "content": correction}]
            continue
        response = reviewed.payload.get("response")
        if isinstance(response, dict) and isinstance(response.get("content"), str) and response["content"] != content:
            content = response["content"]
        break
    usage["durationMs"] = int((time.monotonic() - started) * 1000)
    if not story:
        return RuntimeOutcome("success", output={"content": content}, usage=usage, trace=trace)
    try:
        shaped = normalize_story(content)
    except EmptyStory:
        return RuntimeOutcome("failed", "the story has no text", usage=usage, trace=trace)
    return RuntimeOutcome("success", story=shaped, output=shaped.to_output(), usage=usage, trace=trace)


def _chat_message(message: Any) -> gateway_pb2.ChatMessage:
    if not isinstance(message, dict):
        return gateway_pb2.ChatMessage(role="user", content=str(message))
    return gateway_pb2.ChatMessage(role=str(message.get("role", "user")), content=str(message.get("content", "")))


async def _call_model(
    gateway: gateway_pb2_grpc.LlmGatewayStub,
    request: gateway_pb2.GenerateRequest,
    stream_story: bool,
    on_narrative: OnNarrative,
    timeout_s: float,
) -> tuple[gateway_pb2.GenerateResponse | None, str]:
    """One model call; a story's text streams to the player as it arrives."""
    if not stream_story:
        reply = await gateway.GenerateOnce(request, timeout=timeout_s)
        return reply, reply.message.content
    text_stream = SegmentTextStream()
    final: gateway_pb2.GenerateResponse | None = None
    parts: list[str] = []
    async for event in gateway.Generate(request, timeout=timeout_s):
        kind = event.WhichOneof("event")
        if kind == "content_delta":
            parts.append(event.content_delta)
            for piece in text_stream.feed(event.content_delta):
                await on_narrative(piece)
        elif kind == "final":
            final = event.final
    content = (final.message.content if final is not None else "") or "".join(parts)
    return final, content
