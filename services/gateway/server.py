"""The LlmGateway gRPC service: request validation and wire conversion around CallRunner."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import grpc

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.gateway.calls import CallFailed, CallRunner
from services.gateway.embeddings import run_embed
from services.gateway.events import Final, how_held, join_deltas
from services.gateway.providers.base import Provider
from services.gateway.providers.openai_compatible import OpenAICompatibleProvider
from services.gateway.providers.scripted import Script, ScriptedProvider
from services.gateway.settings import GatewaySettings
from services.gateway.slots import OPENAI_COMPATIBLE, SCRIPTED, SlotTable
from services.gateway.wire import (
    call_from_request,
    embed_call_from_request,
    embedded_to_proto,
    event_to_proto,
    final_to_proto,
    slot_to_proto,
)
from shared.call_streams import ServedStream, StreamMethods
from shared.errors import ServiceError, rpc
from shared.grpc_server import RunningServer, start_server
from shared.logs import get_logger
from shared.stream_coalescing import coalesce_source
from shared.telemetry import metrics, tracing
from shared.telemetry.tracing import traced

SERVICE_NAME = gateway_pb2.DESCRIPTOR.services_by_name["LlmGateway"].full_name


class LlmGatewayServicer(gateway_pb2_grpc.LlmGatewayServicer):
    def __init__(self, runner: CallRunner) -> None:
        self.runner = runner
        # What TurnModelCalls serves; a call that names no timeout has the gateway's own budget (None).
        self._turn_calls = StreamMethods("TurnModelCalls", {"generate_once": self._generate_once, "embed": self._embed},
                                         gateway_pb2.TurnModelCallsResponse, lambda kind, request: None)

    @traced("covel.model.call", lambda self, request, context: {"covel.model.slot": request.slot, "covel.model.stream": True})
    @rpc
    async def Generate(self, request: gateway_pb2.GenerateRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[gateway_pb2.GenerateEvent]:
        call = call_from_request(request)
        started = time.perf_counter()
        try:
            # Deltas ready at once go as one message (issue 19): a scripted story is one message, not fifty.
            events = coalesce_source(self.runner.run(call, stream=True, caller_remaining_s=context.time_remaining()),
                                     join_deltas, how_held)
            async for event in events:
                if isinstance(event, Final):
                    _log_final(call.slot, event, started)
                yield event_to_proto(event)
        except ServiceError as error:
            _log_failed(call.slot, error, started)
            raise

    @rpc
    async def GenerateOnce(self, request: gateway_pb2.GenerateRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.GenerateResponse:
        return await self._generate_once(request, context.time_remaining())

    @rpc
    async def TurnModelCalls(self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext,
                             ) -> AsyncIterator[gateway_pb2.TurnModelCallsResponse]:
        """A turn's GenerateOnce and Embed calls on one stream, each answered by its id (shared/call_streams.py)."""
        async for answer in ServedStream(self._turn_calls).serve(requests):
            yield answer

    @traced("covel.model.call", lambda self, request, remaining_s: {"covel.model.slot": request.slot, "covel.model.stream": False})
    async def _generate_once(self, request: gateway_pb2.GenerateRequest, remaining_s: float | None) -> gateway_pb2.GenerateResponse:
        call = call_from_request(request)
        started = time.perf_counter()
        try:
            final = await self.runner.run_to_final(call, caller_remaining_s=remaining_s)
        except ServiceError as error:
            _log_failed(call.slot, error, started)
            raise
        _log_final(call.slot, final, started)
        return final_to_proto(final)

    @rpc
    async def ListSlots(self, request: gateway_pb2.ListSlotsRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.ListSlotsResponse:
        return gateway_pb2.ListSlotsResponse(slots=[slot_to_proto(s) for s in self.runner.slots.describe()])

    @rpc
    async def Embed(self, request: gateway_pb2.EmbedRequest, context: grpc.aio.ServicerContext) -> gateway_pb2.EmbedResponse:
        return await self._embed(request, context.time_remaining())

    @traced("covel.model.embed", lambda self, request, remaining_s: {"covel.model.slot": request.slot, "covel.model.inputs": len(request.inputs)})
    async def _embed(self, request: gateway_pb2.EmbedRequest, remaining_s: float | None) -> gateway_pb2.EmbedResponse:
        call = embed_call_from_request(request)
        started = time.perf_counter()
        try:
            embedded = await run_embed(self.runner, call, caller_remaining_s=remaining_s)
        except ServiceError as error:
            _log_failed(call.slot or "embedding", error, started)
            raise
        metrics.record_model_call(call.slot or "embedding", embedded.provider, "stop", time.perf_counter() - started,
                                  embedded.attempts, embedded.usage.prompt_tokens, 0)
        get_logger().info("gateway.embed_finished", slot=call.slot or "embedding", provider=embedded.provider, model=embedded.model,
                          inputs=len(call.inputs), dimensions=embedded.dimensions, attempts=embedded.attempts)
        return embedded_to_proto(embedded)


def _log_final(slot: str, final: Final, started: float) -> None:
    metrics.record_model_call(slot, final.provider, final.finish_reason or "stop", time.perf_counter() - started, final.attempts,
                              final.usage.prompt_tokens, final.usage.completion_tokens)
    tracing.current_span().set_attributes({"covel.model.provider": final.provider, "covel.model.name": final.model,
                                           "covel.model.attempts": final.attempts})
    get_logger().info(
        "gateway.call_finished",
        slot=slot,
        provider=final.provider,
        model=final.model,
        finish_reason=final.finish_reason,
        attempts=final.attempts,
        completion_tokens=final.usage.completion_tokens,
    )


def _log_failed(slot: str, error: ServiceError, started: float) -> None:
    """A call no model answered: its HTTP attempts count as retries too (covel_model_call_retries_total)."""
    attempts = error.attempts if isinstance(error, CallFailed) else 0
    provider = error.provider if isinstance(error, CallFailed) else ""
    metrics.record_model_call(slot, provider, error.code.name.lower(), time.perf_counter() - started, attempts, 0, 0)
    get_logger().warning("gateway.call_failed", slot=slot, provider=provider, code=error.code.name, attempts=attempts,
                         error=error.message)


def build_runner(settings: GatewaySettings) -> CallRunner:
    slots = SlotTable.from_settings(settings)
    script = Script.load(settings.gateway_script) if settings.gateway_script else Script()
    providers: dict[str, Provider] = {
        SCRIPTED: ScriptedProvider(script, settings.gateway_scripted_chunk_delay_ms),
        OPENAI_COMPATIBLE: OpenAICompatibleProvider(),
    }
    return CallRunner(settings, slots, providers)


async def start(settings: GatewaySettings) -> RunningServer:
    runner = build_runner(settings)
    servicer = LlmGatewayServicer(runner)

    def add(server: grpc.aio.Server) -> list[str]:
        gateway_pb2_grpc.add_LlmGatewayServicer_to_server(servicer, server)
        return [SERVICE_NAME]

    running = await start_server(settings.gateway_addr, add, settings=settings, service="gateway")

    async def close_providers() -> None:
        for provider in runner.providers.values():
            await provider.aclose()

    # After the last call: in-flight calls still use them.
    running.on_stopped.append(close_providers)
    for slot in runner.slots.describe():
        get_logger().info("gateway.slot", slot=slot.slot, provider=slot.provider, model=slot.model, source=slot.source)
    return running
