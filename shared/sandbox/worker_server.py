"""A sandbox worker's server: the host's calls over the channel (typed frames: shared/sandbox/protocol.py), several
at once, each run by the operation it names (shared/sandbox/operations.py) with its arguments decoded against that
operation's type; a call's ctx capabilities that need the kernel are calls back to the host (`host`), its one-way
messages notes (`note`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from shared.plugin_sdk import CancellationSignal
from shared.plugin_threads import call_plugin_code, thread_owner, threads_running
from shared.sandbox.channel import frame, read_body
from shared.sandbox.errors import describe, rebuild
from shared.sandbox.isolation import Isolation
from shared.sandbox.protocol import Ack, Answer, Ask, Note, Reply, Stop, WorkerFrame, decode_as, decode_host_frame, encode
from shared.sandbox.protocol import Call as CallFrame

if TYPE_CHECKING:
    from shared.sandbox.operations import Operation


@dataclass
class Call:
    """One call of the host in this worker: its id, and the signal a stop fires."""

    id: int
    signal: CancellationSignal = field(default_factory=CancellationSignal)
    task: asyncio.Task | None = None
    # The signals of the handlers a batch runs (each its own: one's timeout is not the others'); a stop fires them all.
    parts: list[CancellationSignal] = field(default_factory=list)

    def part_signal(self) -> CancellationSignal:
        signal = CancellationSignal()
        self.parts.append(signal)
        return signal


class WorkerServer:
    """One worker's end of the channel: the host's calls run as operations, ctx capabilities are calls back."""

    def __init__(self, plugin_id: str, isolation: Isolation, writer: asyncio.StreamWriter,
                 operations: Mapping[str, Operation]) -> None:
        self.plugin_id = plugin_id
        self.isolation = isolation
        self._writer = writer
        self._calls: dict[int, Call] = {}
        self._host_calls: dict[int, asyncio.Future] = {}
        self._next_id = 0
        # Operations by name (shared/sandbox/operations.py); kept here so a test can add its own.
        self._operations = operations
        self.state: dict[str, Any] = {}

    def send(self, message: WorkerFrame) -> None:
        """A frame to the host; TypeError/ValueError when it holds something that is not JSON data."""
        self._writer.write(frame(encode(message)))

    async def host(self, call: Call, op: str, *args: Any, **kwargs: Any) -> Any:
        """A ctx capability: `op` run by the host for call `call`."""
        return await self.host_any(call.id, op, *args, **kwargs)

    async def host_any(self, call_id: int, op: str, *args: Any, **kwargs: Any) -> Any:
        """`op` run by the host for call `call_id` (0: none, e.g. a lifespan's task; only the sandbox's own ops)."""
        self._next_id += 1
        request_id = self._next_id
        future = asyncio.get_running_loop().create_future()
        self._host_calls[request_id] = future
        try:
            self.send(Ask(request_id, call_id, op, list(args), kwargs))
            return await future
        finally:
            self._host_calls.pop(request_id, None)

    def note(self, call: Call, op: str, *args: Any) -> None:
        """A one-way message of a call, in order with its other messages (ctx.propose, ctx.emit_event)."""
        self.send(Note(call.id, op, list(args)))

    async def run_plugin(self, call: Call, function: Any, *args: Any, **kwargs: Any) -> Any:
        """Plugin code: a coroutine function on this loop, anything else in a plugin thread counted for the call."""
        return await call_plugin_code(function, *args, **kwargs)

    async def serve(self, reader: asyncio.StreamReader) -> None:
        while True:
            message = decode_host_frame(await read_body(reader))
            if type(message) is CallFrame:
                self._start(message)
            elif type(message) is Answer:
                self._answered(message)
            elif type(message) is Stop:
                self._stop(message)

    def _start(self, message: CallFrame) -> None:
        call = Call(message.id)
        self._calls[call.id] = call
        call.task = asyncio.get_running_loop().create_task(self._run(call, message.op, message.a))

    async def _run(self, call: Call, op: str, raw: msgspec.Raw) -> None:
        # Threads this call starts count as its own while they run (see _stop).
        thread_owner.set(call.id)
        try:
            operation = self._operations.get(op)
            if operation is None:
                raise LookupError(f"the sandbox worker has no operation {op!r}")
            value = await operation.run(self, call, decode_as(raw, operation.args, f"the arguments of {op}"))
            try:
                body = encode(value)
            except (TypeError, ValueError) as error:
                self.send(Reply(call.id, False, e={"type": "NotJson", "message": str(error)}))
            else:
                self.send(Reply(call.id, True, msgspec.Raw(body)))
        except asyncio.CancelledError:
            self.send(Reply(call.id, False, e={"type": "Cancelled", "message": call.signal.reason}))
        except Exception as error:
            self.send(Reply(call.id, False, e=describe(error)))
        finally:
            self._calls.pop(call.id, None)

    def _answered(self, message: Answer) -> None:
        future = self._host_calls.get(message.id)
        if future is None or future.done():
            return
        if message.ok:
            future.set_result(message.v)
        else:
            future.set_exception(rebuild(message.e))

    def _stop(self, message: Stop) -> None:
        call = self._calls.get(message.id)
        if call is not None:
            call.signal.abort(message.why or "cancelled")
            for part in call.parts:
                part.abort(message.why or "cancelled")
            if call.task is not None:
                call.task.cancel()
        # Threads cannot be stopped: the host replaces a worker whose cancelled call runs on in one.
        self.send(Ack(message.id, threads_running(message.id) > 0))

