"""The one model call a history.compact@2 provider may ask for.

A provider that wants a model to write the summary answers its mechanical summary with
`model: {slot, system, prompt, schema, timeoutMs?}`. The kernel asks the gateway in that slot for
one JSON object fitting `schema` (the response format), within `timeoutMs` (default 20 s, at most
120 s), and hands the parsed answer back to the same provider as the request's `modelAnswer`;
the provider turns it into `{summary}`. A refused request, a failed or timed-out call, a reply
that is not JSON, or a second answer without a summary leaves the first answer's summary: a
compaction never fails because of its model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import grpc

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.scheduler import outages
from services.scheduler.hooks.bus import ExecutionScope
from shared.structs import to_struct

DEFAULT_TIMEOUT_MS = 20_000
MAX_TIMEOUT_MS = 120_000
MAX_PROMPT_CHARS = 200_000
# The gateway answers a little after its own deadline; the gRPC call waits that much longer.
REPLY_SLACK_S = 1.0


@dataclass(frozen=True)
class ModelAsk:
    slot: str
    system: str
    prompt: str
    schema: dict[str, Any]
    timeout_ms: int


def model_ask(output: Any) -> ModelAsk | None:
    """The provider's `model` request, or None when it asked for none; ValueError naming what is wrong."""
    ask = output.get("model") if isinstance(output, dict) else None
    if ask is None:
        return None
    if not isinstance(ask, dict):
        raise ValueError("model must be {slot, system, prompt, schema, timeoutMs?}")
    for name in ("slot", "prompt"):
        if not isinstance(ask.get(name), str) or not ask[name].strip():
            raise ValueError(f"model.{name} must be non-empty text")
    if not isinstance(ask.get("schema"), dict):
        raise ValueError("model.schema must be a JSON Schema object")
    if len(ask["prompt"]) > MAX_PROMPT_CHARS:
        raise ValueError(f"model.prompt is longer than {MAX_PROMPT_CHARS} characters")
    timeout = ask.get("timeoutMs", DEFAULT_TIMEOUT_MS)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ValueError(f"model.timeoutMs must be a positive number of milliseconds, not {timeout!r}")
    return ModelAsk(ask["slot"].strip(), str(ask.get("system") or ""), ask["prompt"], ask["schema"], min(int(timeout), MAX_TIMEOUT_MS))


async def ask_model(gateway: gateway_pb2_grpc.LlmGatewayStub, scope: ExecutionScope, plugin_id: str, ask: ModelAsk) -> tuple[Any, str]:
    """(the parsed answer, "") or (None, why it failed)."""
    messages = [gateway_pb2.ChatMessage(role="system", content=ask.system)] if ask.system else []
    messages.append(gateway_pb2.ChatMessage(role="user", content=ask.prompt))
    request = gateway_pb2.GenerateRequest(
        slot=ask.slot, messages=messages, timeout_ms=ask.timeout_ms, call_timeout_ms=ask.timeout_ms, max_retries=0,
        response_format=gateway_pb2.ResponseFormat(name=str(ask.schema.get("title") or "summary").replace("@", "-"),
                                                   schema=to_struct(ask.schema)),
        origin=gateway_pb2.CallOrigin(session_id=scope.session.id, turn_id=scope.turn_id, runtime_id=f"{plugin_id}/history.compact@2"),
    )
    try:
        reply = await gateway.GenerateOnce(request, timeout=ask.timeout_ms / 1000 + REPLY_SLACK_S, wait_for_ready=True)
    except grpc.aio.AioRpcError as error:
        outages.note("gateway", error)
        return None, f"gateway: {error.code().name}: {error.details()}"
    if reply.finish_reason in (gateway_pb2.FINISH_REASON_ERROR, gateway_pb2.FINISH_REASON_INTERRUPTED):
        return None, f"the model call failed: {reply.error_message or 'no reason given'}"
    try:
        return json.loads(reply.message.content), ""
    except json.JSONDecodeError as error:
        return None, f"the model's reply is not JSON: {error}"
