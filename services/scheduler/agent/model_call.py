"""One model call of the agent loop: what a PreLLMCall hook may change, the gateway request, and the
call itself (a story's text streams to the player as it arrives). A plugin's streamed answer
(replace.responseStream) is read in agent/plugin_stream.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.scheduler.agent.story_stream import SegmentTextStream, StreamedPiece
from services.scheduler.contracts import NARRATIVE_ENGINE, kernel_contract_schema
from shared.structs import to_struct

OnNarrative = Callable[[StreamedPiece], Awaitable[None]]
# Added to a call's gRPC deadline: a long steady stream may outlive timeoutMs (spec).
STREAM_DEADLINE_SLACK_S = 600.0


@dataclass(frozen=True)
class PluginStreamRef:
    """replace.responseStream: whose stream, and its id in the hooks service."""

    plugin_id: str
    stream_id: str


def stream_ref(value: Any) -> PluginStreamRef | None:
    """replace.responseStream as the hooks service writes it ({plugin, streamId}, two texts); else None (ignored)."""
    if not isinstance(value, dict):
        return None
    plugin, stream_id = value.get("plugin"), value.get("streamId")
    if isinstance(plugin, str) and isinstance(stream_id, str) and plugin and stream_id:
        return PluginStreamRef(plugin, stream_id)
    return None


@dataclass(frozen=True)
class CallChoices:
    """This call as PreLLMCall left it: a replace changes this one call, not the runtime's conversation."""

    messages: list[Any]
    model: str
    tools: list[str]
    stream: bool
    # A hook's replace.response: the call's answer, and the model is not asked.
    answer: str | None = None
    # Else a plugin's run_model_stream (replace.responseStream {plugin, streamId}): read through the hooks service.
    plugin_stream: PluginStreamRef | None = None


def apply_pre_llm_call(payload: dict[str, Any], messages: list[Any], model: str, plan_tools: list[str], *,
                       available: dict[str, Any], tools_offered: bool, stream: bool) -> CallChoices:
    """PreLLMCall's replace of messages, model, tools (only known ones), stream (only off), response (its text) and
    responseStream ({plugin, streamId}; a response wins)."""
    replaced_messages, replaced_model, replaced_tools = payload.get("messages"), payload.get("model"), payload.get("tools")
    tools = [name for name in replaced_tools if name in available] if isinstance(replaced_tools, list) else plan_tools
    response = payload.get("response")
    answer = response.get("content") if isinstance(response, dict) else None
    return CallChoices(
        messages=replaced_messages if isinstance(replaced_messages, list) else messages,
        model=replaced_model if isinstance(replaced_model, str) and replaced_model else model,
        tools=tools if tools_offered else [],
        stream=stream and payload.get("stream") is not False and not isinstance(answer, str),
        answer=answer if isinstance(answer, str) else None,
        plugin_stream=stream_ref(payload.get("responseStream")) if not isinstance(answer, str) else None,
    )


def hook_answer(text: str, streamed_ms: int = 0) -> gateway_pb2.GenerateResponse:
    """The reply of a call a PreLLMCall hook answered: its text, finish reason stop, no usage (and how long a
    plugin's stream of it took, credited as a model's streaming time)."""
    return gateway_pb2.GenerateResponse(message=gateway_pb2.ChatMessage(role="assistant", content=text),
                                        finish_reason=gateway_pb2.FINISH_REASON_STOP, streamed_ms=streamed_ms)


def count_usage(usage: dict[str, int], final: gateway_pb2.GenerateResponse) -> None:
    """A model's answer added to its runtime's usage: its tokens, one call, and the largest prompt so far with the
    context window of the model that read it. A hook's answer, which no model gave, counts nothing."""
    if not final.provider:
        return
    usage["promptTokens"] += final.usage.prompt_tokens
    usage["completionTokens"] += final.usage.completion_tokens
    usage["calls"] = usage.get("calls", 0) + 1
    if final.usage.prompt_tokens >= usage.get("contextTokens", 0):
        usage["contextTokens"] = final.usage.prompt_tokens
        usage["contextWindow"] = final.context_window


def response_format(schema_ref: Any, contract: Any, story: bool, schemas: list[tuple[str, dict[str, Any]]] | None = None
                    ) -> gateway_pb2.ResponseFormat | None:
    """The answer's required shape: the narrative contract for a story, a system agent's schemas otherwise."""
    if story and (schema_ref == f"contract:{NARRATIVE_ENGINE}" or contract == NARRATIVE_ENGINE):
        return gateway_pb2.ResponseFormat(name=NARRATIVE_ENGINE, schema=to_struct(kernel_contract_schema(NARRATIVE_ENGINE)))
    if not story and schemas:
        # A system agent's private schema and published contract: the answer must fit both.
        schema = schemas[0][1] if len(schemas) == 1 else {"allOf": [schema for _, schema in schemas]}
        return gateway_pb2.ResponseFormat(name=str(contract or "output").replace("@", "-"), schema=to_struct(schema))
    return None


def wire_choice(choice: Any) -> str:
    if isinstance(choice, dict):
        return str(choice.get("name", "auto"))
    return str(choice)


def chat_message(message: Any) -> gateway_pb2.ChatMessage:
    if not isinstance(message, dict):
        return gateway_pb2.ChatMessage(role="user", content=str(message))
    return gateway_pb2.ChatMessage(
        role=str(message.get("role", "user")),
        content=str(message.get("content") or ""),
        tool_calls=[
            gateway_pb2.ToolCall(id=str(c.get("id", "")), name=str(c.get("name", "")), arguments=str(c.get("arguments", "")))
            for c in message.get("tool_calls") or [] if isinstance(c, dict)
        ],
        tool_call_id=str(message.get("tool_call_id") or ""),
    )


async def call_model(
    gateway: gateway_pb2_grpc.LlmGatewayStub,
    request: gateway_pb2.GenerateRequest,
    stream_story: bool,
    on_narrative: OnNarrative,
    timeout_s: float,
) -> tuple[gateway_pb2.GenerateResponse | None, str]:
    """One model call; a story's text streams to the player as it arrives. wait_for_ready: a gateway restarting
    (its channel reconnecting) is waited for within the call's time rather than failing the call at once."""
    if not stream_story:
        reply = await gateway.GenerateOnce(request, timeout=timeout_s, wait_for_ready=True)
        return reply, reply.message.content
    text_stream = SegmentTextStream()
    final: gateway_pb2.GenerateResponse | None = None
    parts: list[str] = []
    async for event in gateway.Generate(request, timeout=timeout_s, wait_for_ready=True):
        kind = event.WhichOneof("event")
        if kind == "content_delta":
            parts.append(event.content_delta)
            for piece in text_stream.feed(event.content_delta):
                await on_narrative(piece)
        elif kind == "final":
            final = event.final
    content = (final.message.content if final is not None else "") or "".join(parts)
    return final, content
