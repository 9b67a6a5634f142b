"""Proto messages to the gateway's dataclasses (with input validation) and back."""

from __future__ import annotations

import math

from covel.gateway.v1 import gateway_pb2
from services.gateway import events
from services.gateway.chat import ROLES, Call, EmbedCall, Embedded, Message, ResponseFormat, Tool, ToolCall
from services.gateway.events import ContentDelta, Event, Final, ToolCallDelta
from services.gateway.slots import SlotDescription
from shared.errors import invalid_argument
from shared.structs import from_struct

# agent.loop.maxRetries is at most 5 (spec: 超时和重试).
MAX_RETRIES = 5
# One Embed call: OpenAI takes 2048 inputs, but a turn's search needs far fewer; 32 KiB is ~8k tokens.
EMBED_INPUTS_MAX = 256
EMBED_INPUT_MAX_BYTES = 32 * 1024

FINISH_REASONS = {
    events.STOP: gateway_pb2.FINISH_REASON_STOP,
    events.TOOL_CALLS: gateway_pb2.FINISH_REASON_TOOL_CALLS,
    events.LENGTH: gateway_pb2.FINISH_REASON_LENGTH,
    events.OTHER: gateway_pb2.FINISH_REASON_OTHER,
    events.INTERRUPTED: gateway_pb2.FINISH_REASON_INTERRUPTED,
    events.ERROR: gateway_pb2.FINISH_REASON_ERROR,
}


def call_from_request(request: gateway_pb2.GenerateRequest) -> Call:
    messages = _messages_from_request(request)
    tools = _tools_from_request(request)
    choice = _tool_choice(request, tools)
    _check_timeouts(request)
    max_retries = request.max_retries if request.HasField("max_retries") else None
    if max_retries is not None and not 0 <= max_retries <= MAX_RETRIES:
        raise invalid_argument("max_retries", f"must be between 0 and {MAX_RETRIES} (agent.loop.maxRetries), not {max_retries}")
    if request.max_tokens < 0:
        raise invalid_argument("max_tokens", "must not be negative (unset or 0 means the provider's default)")
    temperature = request.temperature if request.HasField("temperature") else None
    if temperature is not None and not (math.isfinite(temperature) and 0 <= temperature <= 2):
        raise invalid_argument("temperature", f"must be between 0 and 2, not {temperature}")
    origin = request.origin
    return Call(
        slot=request.slot.strip(),
        model_override=request.model_override.strip(),
        messages=messages,
        tools=tools,
        tool_choice=choice,
        response_format=_response_format(request),
        call_timeout_ms=request.call_timeout_ms,
        first_token_timeout_ms=request.first_token_timeout_ms,
        idle_timeout_ms=request.idle_timeout_ms,
        timeout_ms=request.timeout_ms,
        max_retries=max_retries,
        # Both are proto3 `optional`: unset leaves them to the provider; temperature 0 is sent as 0.
        temperature=temperature,
        max_tokens=request.max_tokens or None,
        reasoning=request.reasoning if request.HasField("reasoning") else None,
        origin={"session_id": origin.session_id, "turn_id": origin.turn_id, "runtime_id": origin.runtime_id},
    )


def _messages_from_request(request: gateway_pb2.GenerateRequest) -> tuple[Message, ...]:
    if not request.messages:
        raise invalid_argument("messages", "at least one message is required")
    messages = []
    for index, raw in enumerate(request.messages):
        if raw.role not in ROLES:
            raise invalid_argument(f"messages[{index}].role", f"must be one of {', '.join(ROLES)}, not {raw.role!r}")
        if raw.role == "tool" and not raw.tool_call_id:
            raise invalid_argument(f"messages[{index}].tool_call_id", "a tool message names the call it answers")
        if raw.tool_calls and raw.role != "assistant":
            raise invalid_argument(f"messages[{index}].tool_calls", "only assistant messages carry tool calls")
        messages.append(
            Message(
                role=raw.role,
                content=raw.content,
                tool_calls=tuple(ToolCall(t.id, t.name, t.arguments) for t in raw.tool_calls),
                tool_call_id=raw.tool_call_id,
                name=raw.name,
            )
        )
    return tuple(messages)


def _tools_from_request(request: gateway_pb2.GenerateRequest) -> tuple[Tool, ...]:
    tools = []
    for index, raw_tool in enumerate(request.tools):
        if not raw_tool.name:
            raise invalid_argument(f"tools[{index}].name", "a tool needs a name")
        tools.append(Tool(raw_tool.name, raw_tool.description, from_struct(raw_tool.parameters)))
    return tuple(tools)


def _tool_choice(request: gateway_pb2.GenerateRequest, tools: tuple[Tool, ...]) -> str:
    choice = request.tool_choice.strip()
    if choice and choice not in ("auto", "none", "required") and choice not in {t.name for t in tools}:
        raise invalid_argument("tool_choice", f"{choice!r} is neither auto/none/required nor the name of a tool in tools")
    if choice == "required" and not tools:
        raise invalid_argument("tool_choice", "'required' needs at least one tool in tools")
    return choice


def _check_timeouts(request: gateway_pb2.GenerateRequest) -> None:
    for name in ("call_timeout_ms", "first_token_timeout_ms", "idle_timeout_ms", "timeout_ms"):
        if getattr(request, name) < 0:
            raise invalid_argument(name, "must not be negative (0 means the gateway's default)")


def _response_format(request: gateway_pb2.GenerateRequest) -> ResponseFormat | None:
    if not request.HasField("response_format"):
        return None
    raw = request.response_format
    if not (raw.name or raw.schema.fields):
        return None
    return ResponseFormat(name=raw.name, schema=from_struct(raw.schema), strict=raw.strict)


def message_to_proto(message: Message) -> gateway_pb2.ChatMessage:
    return gateway_pb2.ChatMessage(
        role=message.role,
        content=message.content,
        tool_calls=[gateway_pb2.ToolCall(id=t.id, name=t.name, arguments=t.arguments) for t in message.tool_calls],
        tool_call_id=message.tool_call_id,
        name=message.name,
    )


def final_to_proto(final: Final) -> gateway_pb2.GenerateResponse:
    usage = final.usage
    return gateway_pb2.GenerateResponse(
        message=message_to_proto(final.message),
        finish_reason=FINISH_REASONS.get(final.finish_reason, gateway_pb2.FINISH_REASON_OTHER),
        usage=gateway_pb2.Usage(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
        ),
        provider=final.provider,
        model=final.model,
        attempts=final.attempts,
        error_message=final.error_message,
        streamed_ms=final.streamed_ms,
        context_window=final.context_window,
    )


def event_to_proto(event: Event) -> gateway_pb2.GenerateEvent:
    if isinstance(event, ContentDelta):
        return gateway_pb2.GenerateEvent(content_delta=event.text)
    if isinstance(event, ToolCallDelta):
        return gateway_pb2.GenerateEvent(
            tool_call_delta=gateway_pb2.ToolCallDelta(
                index=event.index, id=event.id, name=event.name, arguments=event.arguments
            )
        )
    return gateway_pb2.GenerateEvent(final=final_to_proto(event))


def slot_to_proto(slot: SlotDescription) -> gateway_pb2.SlotInfo:
    return gateway_pb2.SlotInfo(
        slot=slot.slot,
        provider=slot.provider,
        model=slot.model,
        base_url=slot.base_url,
        credentials_present=slot.credentials_present,
        fallbacks=list(slot.fallbacks),
        source=slot.source,
    )


def embed_call_from_request(request: gateway_pb2.EmbedRequest) -> EmbedCall:
    if not request.inputs:
        raise invalid_argument("inputs", "is empty: send the texts to embed (1 to 256)")
    if len(request.inputs) > EMBED_INPUTS_MAX:
        raise invalid_argument("inputs", f"has {len(request.inputs)} texts; send at most {EMBED_INPUTS_MAX} per call")
    for index, text in enumerate(request.inputs):
        if not text.strip():
            raise invalid_argument(f"inputs[{index}]", "is blank: leave texts with nothing to embed out")
        if len(text.encode("utf-8")) > EMBED_INPUT_MAX_BYTES:
            raise invalid_argument(f"inputs[{index}]", f"is larger than {EMBED_INPUT_MAX_BYTES} bytes; cut it into pieces")
    if request.timeout_ms < 0:
        raise invalid_argument("timeout_ms", "must not be negative (0 means the gateway's default budget)")
    return EmbedCall(slot=request.slot.strip(), inputs=tuple(request.inputs), timeout_ms=request.timeout_ms)


def embedded_to_proto(embedded: Embedded) -> gateway_pb2.EmbedResponse:
    usage = embedded.usage
    return gateway_pb2.EmbedResponse(
        vectors=[gateway_pb2.Embedding(values=vector) for vector in embedded.vectors],
        provider=embedded.provider,
        model=embedded.model,
        dimensions=embedded.dimensions,
        usage=gateway_pb2.Usage(prompt_tokens=usage.prompt_tokens, completion_tokens=0, total_tokens=usage.prompt_tokens),
        attempts=embedded.attempts,
    )
