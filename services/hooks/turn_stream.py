"""TurnHooks: one turn's Dispatch, DispatchObserved and CallExtension calls on one open stream (docs/hooks.md "One
stream a turn").

Each request is one call, run as its own task with the unary method's checks and semantics, under its own timeout,
and answered with its id as soon as it is done, whatever the order. A call's failure is its answer (a google.rpc.Status
with the ErrorInfo the unary method would have sent); the stream goes on. A cancel message stops a call the caller
no longer waits for. When the caller closes its side, the calls in flight finish and are answered; when the stream
breaks, they are cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import structlog
from google.rpc import status_pb2  # type: ignore[import-untyped]  # googleapis-common-protos ships no stubs

from covel.hooks.v1 import hooks_pb2
from shared.decode_guard import Undecodable
from shared.errors import ServiceError, invalid_argument, relayed, request_problem
from shared.grpc_client import deadline_of
from shared.logs import get_logger
from shared.telemetry import metrics, tracing
from shared.telemetry.log_context import ids_of

log = get_logger(component="hooks")

SERVICE = "covel.hooks.v1.HookDispatcher"
# The unary method whose checks, semantics and deadline a call of each kind has.
METHOD_OF = {"dispatch": "Dispatch", "observed": "DispatchObserved", "extension": "CallExtension"}
# Calls one stream may have running at once: a turn's runtimes run side by side, but not thousands.
MAX_IN_FLIGHT = 256


@dataclass(frozen=True)
class TurnCalls:
    """What runs each kind of call: the servicer's own methods behind Dispatch, DispatchObserved and CallExtension."""

    dispatch: Callable[[hooks_pb2.DispatchRequest], Awaitable[hooks_pb2.DispatchResponse]]
    observed: Callable[[hooks_pb2.DispatchObservedRequest], Awaitable[hooks_pb2.DispatchObservedResponse]]
    extension: Callable[[hooks_pb2.CallExtensionRequest], Awaitable[hooks_pb2.CallExtensionResponse]]


def _timeout_s(kind: str, request: hooks_pb2.TurnHooksRequest) -> float | None:
    if request.timeout_ms:
        return request.timeout_ms / 1000
    if kind == "extension":
        return request.extension.timeout_ms / 1000 + 10 if request.extension.timeout_ms else 40.0
    return deadline_of(SERVICE, METHOD_OF[kind]).seconds


def _failed(error: BaseException) -> status_pb2.Status:
    if isinstance(error, ServiceError):
        return error.to_status_proto()
    if isinstance(error, grpc.aio.AioRpcError):
        return relayed(error).to_status_proto()
    if isinstance(error, TimeoutError):
        return ServiceError(grpc.StatusCode.DEADLINE_EXCEEDED, "the hook call passed its timeout").to_status_proto()
    if isinstance(error, asyncio.CancelledError):
        return ServiceError(grpc.StatusCode.CANCELLED, "the caller cancelled the hook call").to_status_proto()
    log.error("turn_hooks.call_failed", exc_info=error)
    return ServiceError(grpc.StatusCode.INTERNAL, "internal error in TurnHooks; see the server log").to_status_proto()


class TurnStream:
    """One open TurnHooks stream: its calls in flight by id, and the answers waiting to be written."""

    def __init__(self, calls: TurnCalls) -> None:
        self._calls = calls
        self._running: dict[int, asyncio.Task[None]] = {}
        self._answers: asyncio.Queue[hooks_pb2.TurnHooksResponse | None] = asyncio.Queue()

    async def serve(self, requests: AsyncIterator[Any]) -> AsyncIterator[hooks_pb2.TurnHooksResponse]:
        reader = asyncio.create_task(self._read(requests))
        try:
            while (answer := await self._answers.get()) is not None:
                yield answer
            await reader  # its error (an undecodable message) ends the stream
        finally:
            reader.cancel()
            for task in self._running.values():
                task.cancel()

    async def _read(self, requests: AsyncIterator[Any]) -> None:
        try:
            async for request in requests:
                self._take(request)
            await asyncio.gather(*self._running.values(), return_exceptions=True)
        finally:
            self._answers.put_nowait(None)

    def _take(self, request: Any) -> None:
        if isinstance(request, Undecodable):
            raise invalid_argument("request", f"{request.reason}: protobuf could not decode a TurnHooks message")
        kind = request.WhichOneof("call")
        if kind == "cancel":
            running = self._running.get(request.id)
            if running is not None:
                running.cancel()
            return
        if kind is None:
            self._answer(request.id, error=invalid_argument("call", "name the call: dispatch, observed, extension or cancel").to_status_proto())
        elif request.id in self._running:
            self._answer(request.id, error=invalid_argument("id", f"call {request.id} is still running on this stream; "
                                                            "number each call of a stream anew").to_status_proto())
        elif len(self._running) >= MAX_IN_FLIGHT:
            self._answer(request.id, error=ServiceError(
                grpc.StatusCode.RESOURCE_EXHAUSTED, f"{MAX_IN_FLIGHT} calls are running on this stream; wait for their answers",
                reason="TURN_HOOK_CALLS_FULL").to_status_proto())
        else:
            task = asyncio.create_task(self._run(kind, request))
            self._running[request.id] = task
            task.add_done_callback(lambda _: self._running.pop(request.id, None))

    async def _run(self, kind: str, request: hooks_pb2.TurnHooksRequest) -> None:
        call = getattr(request, kind)
        metrics.record_turn_hook_call(kind)
        try:
            problem = request_problem(call)
            if problem is not None:
                raise problem
            with structlog.contextvars.bound_contextvars(**ids_of(call)), tracing.continued({"traceparent": request.traceparent}):
                answer = await asyncio.wait_for(getattr(self._calls, kind)(call), _timeout_s(kind, request))
        except (Exception, asyncio.CancelledError) as error:  # every failure is this call's answer, as its unary method's status
            self._answer(request.id, error=_failed(error))
            return
        self._answer(request.id, **{kind: answer})

    def _answer(self, call_id: int, **answer: Any) -> None:
        self._answers.put_nowait(hooks_pb2.TurnHooksResponse(id=call_id, **answer))


