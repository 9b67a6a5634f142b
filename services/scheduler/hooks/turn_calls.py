"""A turn's hook calls on one TurnHooks stream to the hooks service (docs/hooks.md "One stream a turn").

The stream opens at the turn's first hook call (a turn nobody's hooks hear opens none) and closes when the turn ends.
Each call is one message with its own id and timeout; its answer, or its error as the unary method would have raised
it (a grpc.aio.AioRpcError with the same code, message and details), comes back by that id, so the turn's runtimes
call side by side on the one stream. A call past its timeout is cancelled on the server and raises
DEADLINE_EXCEEDED; a stream that breaks fails the calls it carried (UNAVAILABLE, as a unary call in flight would) and
the turn's next call opens a new one.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import grpc
from google.rpc import status_pb2  # type: ignore[import-untyped]  # googleapis-common-protos ships no stubs

from covel.hooks.v1 import hooks_pb2
from shared.telemetry import tracing

Answer = hooks_pb2.DispatchResponse | hooks_pb2.DispatchObservedResponse | hooks_pb2.CallExtensionResponse
OpenStream = Callable[[], Any]  # HookDispatcherStub.TurnHooks: a grpc.aio StreamStreamCall
# Streams closing in the background (a reference, so their tasks are not collected midway).
_CLOSING: set[asyncio.Future[None]] = set()


def rpc_error(status: status_pb2.Status) -> grpc.aio.AioRpcError:
    """The error a unary call would have raised for `status`: its code, message and details (ErrorInfo, ...) as
    shared.errors reads them from a call's trailing metadata."""
    code = next((code for code in grpc.StatusCode if code.value[0] == status.code), grpc.StatusCode.UNKNOWN)
    trailing = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, details=status.message)


def _failure(code: grpc.StatusCode, message: str) -> grpc.aio.AioRpcError:
    return rpc_error(status_pb2.Status(code=code.value[0], message=message))


def _forget(done: asyncio.Future[None]) -> None:
    """A background send's end: its failure (a stream that broke meanwhile) is the reader's to report."""
    _CLOSING.discard(done)
    if not done.cancelled():
        done.exception()


class _OpenStream:
    """One opened TurnHooks call and the calls waiting for its answers."""

    def __init__(self, call: Any) -> None:
        self.call = call
        self.waiting: dict[int, asyncio.Future[hooks_pb2.TurnHooksResponse]] = {}
        self.broken: BaseException | None = None
        self.writing = asyncio.Lock()
        self.reader = asyncio.create_task(self._read(), name="turn-hooks-reader")

    async def _read(self) -> None:
        error: BaseException
        try:
            async for answer in self.call:
                waiting = self.waiting.pop(answer.id, None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(answer)
            error = _failure(grpc.StatusCode.UNAVAILABLE, "the hooks service ended the turn's hook stream")
        except grpc.aio.AioRpcError as failed:
            error = failed
        except asyncio.CancelledError:
            error = _failure(grpc.StatusCode.CANCELLED, "the turn's hook stream was closed")
        self.broken = error
        for waiting in self.waiting.values():
            if not waiting.done():
                waiting.set_exception(error)
        self.waiting.clear()

    async def send(self, request: hooks_pb2.TurnHooksRequest) -> None:
        async with self.writing:
            await self.call.write(request)


class TurnHookCalls:
    """The hook calls of one turn, on its stream."""

    def __init__(self, open_stream: OpenStream) -> None:
        self._open = open_stream
        self._stream: _OpenStream | None = None
        self._ids = itertools.count(1)

    def _current(self) -> _OpenStream:
        if self._stream is None or self._stream.broken is not None:
            self._stream = _OpenStream(self._open())
        return self._stream

    async def call(self, kind: str, request: Any, timeout_s: float | None) -> Answer:
        """`request` (a DispatchRequest, DispatchObservedRequest or CallExtensionRequest, as `kind` says) answered on the
        stream; its failure raised as its unary method's would be."""
        stream = self._current()
        call_id = next(self._ids)
        answered = asyncio.get_running_loop().create_future()
        stream.waiting[call_id] = answered
        message = hooks_pb2.TurnHooksRequest(id=call_id, timeout_ms=round(timeout_s * 1000) if timeout_s else 0,
                                             traceparent=tracing.trace_context().get("traceparent", ""), **{kind: request})
        try:
            await stream.send(message)
            answer = await asyncio.wait_for(answered, timeout_s)
        except grpc.aio.AioRpcError:
            raise
        except TimeoutError:
            self._cancel(stream, call_id)
            raise _failure(grpc.StatusCode.DEADLINE_EXCEEDED, "the hook call passed its timeout") from None
        except asyncio.CancelledError:
            self._cancel(stream, call_id)
            raise
        except Exception as error:  # the stream could not take the message (closed under it)
            raise _failure(grpc.StatusCode.UNAVAILABLE, f"the turn's hook stream is closed: {error}") from error
        finally:
            stream.waiting.pop(call_id, None)
        if answer.WhichOneof("answer") == "error":
            raise rpc_error(answer.error)
        return getattr(answer, kind)

    def _cancel(self, stream: _OpenStream, call_id: int) -> None:
        """Tell the server to stop a call nobody waits for any more (in the background: the caller may be cancelled)."""
        if stream.broken is None:
            task = asyncio.ensure_future(stream.send(hooks_pb2.TurnHooksRequest(id=call_id, cancel=True)))
            _CLOSING.add(task)
            task.add_done_callback(_forget)

    def close(self) -> None:
        """The turn is over: the stream ends once the server has answered what it still runs (each call is bounded).
        Done in the background, so a turn's cancelled task can call it."""
        stream, self._stream = self._stream, None
        if stream is not None and stream.broken is None:
            task = asyncio.ensure_future(self._done_writing(stream))
            _CLOSING.add(task)
            task.add_done_callback(_CLOSING.discard)

    @staticmethod
    async def _done_writing(stream: _OpenStream) -> None:
        try:
            async with stream.writing:
                await stream.call.done_writing()
        except Exception:  # already closed or broken: the reader has failed its calls
            stream.call.cancel()
