"""A turn's calls to one peer on one open bidirectional stream: hooks' TurnHooks, the gateway's TurnModelCalls.

A unary gRPC call costs its set-up on both ends (the call object, metadata, the interceptor chain, authentication)
before it does anything; a turn makes dozens. On a call stream each call is one message with its own id and timeout,
answered by that id as soon as it is done, whatever the order, so a turn's runtimes call side by side on one
stream. Each call keeps its unary method's checks, semantics and errors: a failure is its answer (a google.rpc.Status
with the details the unary method would have sent, raised at the caller as that method's grpc.aio.AioRpcError); a
call past its timeout is cancelled on the server and answered DEADLINE_EXCEEDED; a call its caller stopped waiting
for is cancelled with a `cancel` message. A stream that breaks fails the calls in flight UNAVAILABLE, as unary
calls in flight would fail, and the next call opens a new stream.

The messages follow one shape (hooks.proto TurnHooksRequest/-Response, gateway.proto TurnModelCalls...): `id`,
`timeout_ms`, `traceparent` and a oneof `call` whose members name the kinds, with `cancel`; answers carry `id` and
a oneof `answer` with the same kind names and `error`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc
import structlog
from google.protobuf.message import Message
from google.rpc import status_pb2  # type: ignore[import-untyped]  # googleapis-common-protos ships no stubs

from shared.decode_guard import Undecodable
from shared.errors import ServiceError, invalid_argument, relayed, request_problem
from shared.logs import get_logger
from shared.telemetry import metrics, tracing
from shared.telemetry.log_context import ids_of

log = get_logger(component="call_stream")

# The answer message of a stream (TurnHooksResponse, ...).
A = TypeVar("A", bound=Message)
# Calls one stream may have running at once: a turn's runtimes run side by side, but not thousands.
MAX_IN_FLIGHT = 256
# Streams closing and cancels being sent in the background (a reference, so their tasks are not collected midway).
_BACKGROUND: set[asyncio.Future[None]] = set()


# ----- the server's side -------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamMethods(Generic[A]):
    """What a call stream serves: its method's name (metrics, messages), each kind's call `run(request, timeout_s)`,
    the answer message, and the timeout of a call that names none (its unary method's deadline)."""

    method: str
    calls: Mapping[str, Callable[[Any, float | None], Awaitable[Message]]]
    answer: Callable[..., A]
    default_timeout_s: Callable[[str, Any], float | None]


def _failed(method: str, error: BaseException) -> status_pb2.Status:
    if isinstance(error, ServiceError):
        return error.to_status_proto()
    if isinstance(error, grpc.aio.AioRpcError):
        return relayed(error).to_status_proto()
    if isinstance(error, TimeoutError):
        return ServiceError(grpc.StatusCode.DEADLINE_EXCEEDED, f"the {method} call passed its timeout").to_status_proto()
    if isinstance(error, asyncio.CancelledError):
        return ServiceError(grpc.StatusCode.CANCELLED, f"the caller cancelled the {method} call").to_status_proto()
    log.error("call_stream.call_failed", method=method, exc_info=error)
    return ServiceError(grpc.StatusCode.INTERNAL, f"internal error in {method}; see the server log").to_status_proto()


class ServedStream(Generic[A]):
    """One open call stream on the server: its calls in flight by id, and the answers waiting to be written."""

    def __init__(self, methods: StreamMethods[A]) -> None:
        self._methods = methods
        self._running: dict[int, asyncio.Task[None]] = {}
        self._answers: asyncio.Queue[A | None] = asyncio.Queue()

    async def serve(self, requests: AsyncIterator[Any]) -> AsyncIterator[A]:
        """The answers, as the calls finish; an undecodable message ends the stream INVALID_ARGUMENT."""
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
            raise invalid_argument("request", f"{request.reason}: protobuf could not decode a {self._methods.method} message")
        kind = request.WhichOneof("call")
        if kind == "cancel":
            running = self._running.get(request.id)
            if running is not None:
                running.cancel()
        elif kind is None:
            kinds = ", ".join(self._methods.calls)
            self._answer(request.id, error=invalid_argument("call", f"name the call: {kinds} or cancel").to_status_proto())
        elif request.id in self._running:
            self._answer(request.id, error=invalid_argument("id", f"call {request.id} is still running on this stream; "
                                                            "number each call of a stream anew").to_status_proto())
        elif len(self._running) >= MAX_IN_FLIGHT:
            self._answer(request.id, error=ServiceError(
                grpc.StatusCode.RESOURCE_EXHAUSTED, f"{MAX_IN_FLIGHT} calls are running on this stream; wait for their answers",
                reason="STREAM_CALLS_FULL").to_status_proto())
        else:
            task = asyncio.create_task(self._run(kind, request))
            self._running[request.id] = task
            task.add_done_callback(lambda _: self._running.pop(request.id, None))

    async def _run(self, kind: str, request: Any) -> None:
        call = getattr(request, kind)
        metrics.record_stream_call(self._methods.method, kind)
        timeout_s = request.timeout_ms / 1000 if request.timeout_ms else self._methods.default_timeout_s(kind, call)
        try:
            problem = request_problem(call)
            if problem is not None:
                raise problem
            with structlog.contextvars.bound_contextvars(**ids_of(call)), tracing.continued({"traceparent": request.traceparent}):
                answer = await asyncio.wait_for(self._methods.calls[kind](call, timeout_s), timeout_s)
        except (Exception, asyncio.CancelledError) as error:  # every failure is this call's answer, as its unary method's status
            self._answer(request.id, error=_failed(self._methods.method, error))
            return
        self._answer(request.id, **{kind: answer})

    def _answer(self, call_id: int, **answer: Any) -> None:
        self._answers.put_nowait(self._methods.answer(id=call_id, **answer))


# ----- the caller's side -------------------------------------------------------------------------


def rpc_error(status: status_pb2.Status) -> grpc.aio.AioRpcError:
    """The error a unary call would have raised for `status`: its code, message and details (ErrorInfo, ...) as
    shared.errors reads them from a call's trailing metadata."""
    code = next((code for code in grpc.StatusCode if code.value[0] == status.code), grpc.StatusCode.UNKNOWN)
    trailing = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, details=status.message)


def _failure(code: grpc.StatusCode, message: str) -> grpc.aio.AioRpcError:
    return rpc_error(status_pb2.Status(code=code.value[0], message=message))


def _in_background(work: Awaitable[None]) -> None:
    task = asyncio.ensure_future(work)
    _BACKGROUND.add(task)
    task.add_done_callback(_forget)


def _forget(done: asyncio.Future[None]) -> None:
    """A background send's end: its failure (a stream that broke meanwhile) is the reader's to report."""
    _BACKGROUND.discard(done)
    if not done.cancelled():
        done.exception()


class _OpenStream:
    """One opened stream call and the calls waiting for its answers."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.broken: BaseException | None = None
        self.writing = asyncio.Lock()
        self.reader = asyncio.create_task(self._read(), name="call-stream-reader")

    async def _read(self) -> None:
        error: BaseException
        try:
            async for answer in self.call:
                waiting = self.waiting.pop(answer.id, None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(answer)
            error = _failure(grpc.StatusCode.UNAVAILABLE, "the peer ended the turn's call stream")
        except grpc.aio.AioRpcError as failed:
            error = failed
        except asyncio.CancelledError:
            error = _failure(grpc.StatusCode.CANCELLED, "the turn's call stream was closed")
        self.broken = error
        for waiting in self.waiting.values():
            if not waiting.done():
                waiting.set_exception(error)
        self.waiting.clear()

    async def send(self, request: Message) -> None:
        async with self.writing:
            await self.call.write(request)

    async def done_writing(self) -> None:
        try:
            async with self.writing:
                await self.call.done_writing()
        except Exception:  # already closed or broken: the reader has failed its calls
            self.call.cancel()


class StreamCalls:
    """One turn's calls to a peer on its call stream (opened by `open_stream` at the first call)."""

    def __init__(self, open_stream: Callable[[], Any], request: Callable[..., Message]) -> None:
        self._open = open_stream
        self._request = request
        self._stream: _OpenStream | None = None
        self._ids = itertools.count(1)

    def _current(self, ended: _OpenStream | None = None) -> _OpenStream:
        """The open stream; a new one when there is none, the last one broke, or it is `ended` (a send found it over)."""
        if self._stream is None or self._stream.broken is not None or self._stream is ended:
            self._stream = _OpenStream(self._open())
        return self._stream

    async def call(self, kind: str, request: Message, timeout_s: float | None) -> Any:
        """`request` of `kind` (a member of the stream's `call` oneof) answered on the stream; its failure raised as its
        unary method's would be."""
        call_id = next(self._ids)
        answered = asyncio.get_running_loop().create_future()
        message = self._request(id=call_id, timeout_ms=round(timeout_s * 1000) if timeout_s else 0,
                                traceparent=tracing.trace_context().get("traceparent", ""), **{kind: request})
        sent_on: list[_OpenStream] = []
        try:
            # The send too is under the timeout: a peer not reachable yet is waited for (wait_for_ready), within it.
            answer = await asyncio.wait_for(self._exchange(call_id, message, answered, sent_on), timeout_s)
        except grpc.aio.AioRpcError:
            raise
        except TimeoutError:
            if sent_on:
                self._cancel(sent_on[-1], call_id)
            raise _failure(grpc.StatusCode.DEADLINE_EXCEEDED, "the call passed its timeout") from None
        except asyncio.CancelledError:
            if sent_on:
                self._cancel(sent_on[-1], call_id)
            raise
        except Exception as error:  # the stream could not take the message (closed under it)
            raise _failure(grpc.StatusCode.UNAVAILABLE, f"the turn's call stream is closed: {error}") from error
        finally:
            for stream in sent_on:
                stream.waiting.pop(call_id, None)
        if answer.WhichOneof("answer") == "error":
            raise rpc_error(answer.error)
        return getattr(answer, kind)

    async def _exchange(self, call_id: int, message: Message, answered: asyncio.Future[Any], sent_on: list[_OpenStream]) -> Any:
        """Send the call and wait for its answer. A stream the peer ended before the call went out (a send that fails
        sent nothing: a connection closed under a long-lived stream) is replaced, and the call sent once more."""
        stream = self._current()
        for attempt in range(2):
            sent_on.append(stream)
            stream.waiting[call_id] = answered
            try:
                await stream.send(message)
                break
            except grpc.aio.AioRpcError:
                stream.waiting.pop(call_id, None)
                if attempt:
                    raise
                stream = self._current(ended=stream)
        return await answered

    def _cancel(self, stream: _OpenStream, call_id: int) -> None:
        """Tell the server to stop a call nobody waits for any more (in the background: the caller may be cancelled)."""
        if stream.broken is None:
            _in_background(stream.send(self._request(id=call_id, cancel=True)))

    def close(self) -> None:
        """The turn is over: the stream ends once the server has answered what it still runs (each call is bounded).
        Done in the background, so a turn's cancelled task can call it."""
        stream, self._stream = self._stream, None
        if stream is not None and stream.broken is None:
            _in_background(stream.done_writing())


class TurnCallStreams:
    """The running turns' call streams to one peer, by turn id: a call of a turn that runs goes on its stream, any
    other as its unary method."""

    def __init__(self, open_stream: Callable[[], Any], request: Callable[..., Message]) -> None:
        self._open = open_stream
        self._request = request
        self._turns: dict[str, StreamCalls] = {}

    def begin(self, turn_id: str) -> None:
        self._turns[turn_id] = StreamCalls(self._open, self._request)

    def end(self, turn_id: str) -> None:
        calls = self._turns.pop(turn_id, None)
        if calls is not None:
            calls.close()

    def of(self, turn_id: str) -> StreamCalls | None:
        return self._turns.get(turn_id) if turn_id else None
