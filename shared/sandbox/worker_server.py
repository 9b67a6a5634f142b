"""A sandbox worker's server: the host's calls over the channel (shared/sandbox/channel.py), several at
once, each run by the operation it names (shared/sandbox/operations.py); a call's ctx capabilities that
need the kernel are calls back to the host (`host`), its one-way messages notes (`note`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.plugin_sdk import CancellationSignal
from shared.plugin_threads import call_plugin_code, thread_owner, threads_running
from shared.sandbox.channel import encode, read_frame
from shared.sandbox.errors import describe, rebuild
from shared.sandbox.isolation import Isolation


@dataclass
class Call:
    id: int
    signal: CancellationSignal = field(default_factory=CancellationSignal)
    task: asyncio.Task | None = None


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

    def send(self, message: dict[str, Any]) -> None:
        self._writer.write(encode(message))

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
            self.send({"k": "req", "id": request_id, "of": call_id, "op": op, "a": list(args), "kw": kwargs})
            return await future
        finally:
            self._host_calls.pop(request_id, None)

    def note(self, call: Call, op: str, *args: Any) -> None:
        """A one-way message of a call, in order with its other messages (ctx.propose, ctx.emit_event)."""
        self.send({"k": "note", "of": call.id, "op": op, "a": list(args)})

    async def run_plugin(self, call: Call, function: Any, *args: Any, **kwargs: Any) -> Any:
        """Plugin code: a coroutine function on this loop, anything else in a plugin thread counted for the call."""
        return await call_plugin_code(function, *args, **kwargs)

    async def serve(self, reader: asyncio.StreamReader) -> None:
        while True:
            message = await read_frame(reader)
            kind = message.get("k")
            if kind == "req":
                self._start(message)
            elif kind == "res":
                self._answered(message)
            elif kind == "stop":
                self._stop(message)

    def _start(self, message: dict[str, Any]) -> None:
        call = Call(int(message["id"]))
        self._calls[call.id] = call
        call.task = asyncio.get_running_loop().create_task(self._run(call, str(message.get("op")), message.get("a") or {}))

    async def _run(self, call: Call, op: str, args: dict[str, Any]) -> None:
        # Threads this call starts count as its own while they run (see _stop).
        thread_owner.set(call.id)
        try:
            operation = self._operations.get(op)
            if operation is None:
                raise LookupError(f"the sandbox worker has no operation {op!r}")
            value = await operation(self, call, args)
            try:
                self.send({"k": "res", "id": call.id, "ok": True, "v": value})
            except (TypeError, ValueError) as error:
                self.send({"k": "res", "id": call.id, "ok": False, "e": {"type": "NotJson", "message": str(error)}})
        except asyncio.CancelledError:
            self.send({"k": "res", "id": call.id, "ok": False, "e": {"type": "Cancelled", "message": call.signal.reason}})
        except Exception as error:
            self.send({"k": "res", "id": call.id, "ok": False, "e": describe(error)})
        finally:
            self._calls.pop(call.id, None)

    def _answered(self, message: dict[str, Any]) -> None:
        future = self._host_calls.get(int(message.get("id") or 0))
        if future is None or future.done():
            return
        if message.get("ok"):
            future.set_result(message.get("v"))
        else:
            future.set_exception(rebuild(message.get("e")))

    def _stop(self, message: dict[str, Any]) -> None:
        call_id = int(message.get("id") or 0)
        call = self._calls.get(call_id)
        if call is not None:
            call.signal.abort(str(message.get("why") or "cancelled"))
            if call.task is not None:
                call.task.cancel()
        # Threads cannot be stopped: the host replaces a worker whose cancelled call runs on in one.
        self.send({"k": "ack", "id": call_id, "running": threads_running(call_id) > 0})


# What the worker does for one call: (server, call, arguments) -> plain data.
Operation = Callable[[WorkerServer, Call, dict[str, Any]], Awaitable[Any]]
