"""The host's handle on one sandbox worker: its process and channel, the calls in flight on it (each
with the ctx capabilities and notes of its caller), stopping a call, and the worker's end: replaced,
killed, or gone by itself. What the worker asks of the sandbox itself (covel.http, log lines) is
answered here with the plugin's rules and limits (shared/sandbox/http_gate.py, plugin_output.py).
The lifecycle around it is shared/sandbox/host.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from shared.plugin_sdk.http_client import HttpRule
from shared.sandbox.channel import ChannelClosed, frame, read_body
from shared.sandbox.errors import WorkerGone, describe, rebuild
from shared.sandbox.protocol import (
    Ack,
    Answer,
    Ask,
    Log,
    Note,
    Reply,
    Retire,
    Stop,
    WorkerFrame,
    decode_as,
    decode_worker_frame,
    encode,
)
from shared.sandbox.protocol import Call as CallFrame
from shared.sandbox.zygote_client import ZygoteChild

if TYPE_CHECKING:
    from shared.sandbox.http_gate import HttpGate
    from shared.sandbox.plugin_output import PluginOutput
    from shared.sandbox.settings import SandboxSettings


class WorkerPool(Protocol):
    """What a worker needs of the pool it belongs to (shared/sandbox/host.py's SandboxPool)."""

    @property
    def settings(self) -> SandboxSettings: ...

    @property
    def http_gate(self) -> HttpGate: ...

    def discard(self, worker: Worker) -> None: ...


class PluginWorkers(Protocol):
    """What a worker needs of its plugin's workers (shared/sandbox/host.py's PluginWorkers)."""

    @property
    def pool(self) -> WorkerPool: ...

    @property
    def plugin_id(self) -> str: ...

    @property
    def http_rules(self) -> tuple[HttpRule, ...]: ...

    @property
    def output(self) -> PluginOutput: ...

    def retired(self, worker: Worker) -> None: ...

    def fault(self, worker: Worker, why: str) -> None: ...

    def watch(self, coroutine: Awaitable[None]) -> None: ...

# covel.http requests of one worker in flight or waiting, per COVEL_SANDBOX_HTTP_CONCURRENCY; more are refused.
HTTP_REQUESTS_QUEUED = 4

# What a call's ctx capabilities are: (operation, args, kwargs) -> answer, run by the host.
Capabilities = Callable[[str, list[Any], dict[str, Any]], Awaitable[Any]]
# One-way messages of a call (ctx.propose, ctx.emit_event).
Notes = Callable[[str, list[Any]], None]


@dataclass
class _Pending:
    future: asyncio.Future
    # The operation, and the type its reply is decoded to (None: any JSON).
    op: str
    reply: Any
    capabilities: Capabilities | None
    notes: Notes | None
    deadline: float | None
    # The caller's context variables (the turn's unit, log fields, trace span): its ctx calls run in them.
    context: contextvars.Context = field(default_factory=contextvars.copy_context)
    tasks: set[asyncio.Task] = field(default_factory=set)
    # What covel.http may reach during the call (None: its plugin's rules, PluginWorkers.http_rules).
    http: tuple[HttpRule, ...] | None = None


class Worker:
    """One worker process and its channel."""

    def __init__(self, owner: PluginWorkers, process: ZygoteChild, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, report: dict[str, Any]) -> None:
        self.owner = owner
        self.process = process
        self.pid = process.pid
        self.report = report
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        # Calls sent to this worker (round trips): what a batch saves is seen here.
        self.calls = 0
        self._pending: dict[int, _Pending] = {}
        self._acks: dict[int, asyncio.Future] = {}
        self.retiring = False
        # Retiring, with a fresh worker serving: it goes once its calls are done.
        self._replaced = False
        self.gone: str | None = None
        # Requests to the host outside any call (covel.http in a lifespan's task).
        self._background: set[asyncio.Task] = set()
        self._http_requests = 0
        # Its own context: not that of whichever call happened to start the worker.
        self._reading = asyncio.get_running_loop().create_task(self._read(), name=f"sandbox-read-{owner.plugin_id}",
                                                               context=contextvars.Context())

    @property
    def serving(self) -> bool:
        return self.gone is None and not self.retiring

    async def call(self, op: str, args: Any, *, reply: Any = None, capabilities: Capabilities | None = None,
                   notes: Notes | None = None, deadline: float | None = None, http: Sequence[HttpRule] | None = None) -> Any:
        """`op` in the worker with `args` (its arguments' Struct, or JSON data of that shape); its reply decoded as
        `reply` (a type: a reply that is not of it is a malformed frame, the worker is stopped; None: any JSON), its
        error re-raised here. Cancelling the caller stops the call there.
        `http`: what covel.http may reach during this call (else the plugin's PluginWorkers.http_rules)."""
        if self.gone is not None:
            raise WorkerGone(self.gone)
        call_id = next(self._ids)
        self.calls += 1
        pending = _Pending(asyncio.get_running_loop().create_future(), op, reply, capabilities, notes, deadline,
                           http=tuple(http) if http is not None else None)
        self._pending[call_id] = pending
        try:
            self._writer.write(frame(encode(CallFrame(call_id, op, msgspec.Raw(encode(args))))))
            return await pending.future
        except asyncio.CancelledError:
            self._abandon(call_id, pending)
            raise
        finally:
            self._end(call_id, pending)

    def _end(self, call_id: int, pending: _Pending) -> None:
        self._pending.pop(call_id, None)
        for task in pending.tasks:
            task.cancel()
        if self.retiring and self._replaced and not self._pending:
            self.kill("replaced, its other calls done")

    def _abandon(self, call_id: int, pending: _Pending) -> None:
        # Without a deadline (a tool's or provider's time is its caller's) a stop counts as a timeout.
        why = "timeout" if pending.deadline is None or time.monotonic() >= pending.deadline - 0.001 else "cancelled"
        if self.gone is not None:
            return
        ack = self._acks[call_id] = asyncio.get_running_loop().create_future()
        with contextlib.suppress(ConnectionError, RuntimeError):
            self._writer.write(frame(encode(Stop(call_id, why))))
        self.owner.watch(self._confirm_stop(call_id, ack, why))

    async def _confirm_stop(self, call_id: int, ack: asyncio.Future, why: str) -> None:
        try:
            running = await asyncio.wait_for(ack, self.owner.pool.settings.sandbox_stop_grace_ms / 1000)
        except TimeoutError:
            self.owner.fault(self, f"a call's {why} was not confirmed: the worker is hung")
            self.kill("hung")
            return
        finally:
            self._acks.pop(call_id, None)
        if running or why == "timeout":
            # Code of that call may run on in a thread (its own, or one it started): only ending the process stops it.
            self.owner.fault(self, f"a call's {why}" + (": its code ran on in a thread" if running else ""))
            self.retire()

    def retire(self) -> None:
        """Replace this worker: it keeps taking calls until the fresh one is up, then goes once they are done."""
        if self.retiring or self.gone is not None:
            return
        self.retiring = True
        self.owner.retired(self)

    def replaced(self) -> None:
        self._replaced = True
        if not self._pending:
            self.kill("replaced")

    def kill(self, why: str) -> None:
        if self.gone is None:
            self._gone(f"its worker process was stopped ({why})")
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    def _gone(self, why: str) -> None:
        self.gone = why
        self.owner.retired(self)
        self.owner.pool.discard(self)
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(WorkerGone(why))
        for ack in self._acks.values():
            if not ack.done():
                ack.set_result(False)
        for task in self._background:
            task.cancel()
        self._writer.close()

    async def _read(self) -> None:
        try:
            while True:
                self._dispatch(decode_worker_frame(await read_body(self._reader)))
        except ChannelClosed as closed:
            if self.gone is None:
                code = await self._exit_code()
                self.owner.fault(self, f"it exited ({code})" if code else f"its channel broke ({closed})")
                self._gone(f"its worker process exited ({code or closed}); a fresh one takes the next call")
        except Exception as error:  # a frame that makes no sense: the worker is not to be trusted further
            self.owner.fault(self, f"it sent a malformed frame ({type(error).__name__}: {error})")
            self.kill(f"malformed frame: {error}")

    async def _exit_code(self) -> str:
        try:
            code = await asyncio.wait_for(self.process.wait(), 2.0)
        except TimeoutError:
            return ""
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def _dispatch(self, message: WorkerFrame) -> None:
        if isinstance(message, Reply):
            self._replied(message)
        elif isinstance(message, Ask):
            if message.op.startswith("sandbox."):
                self._sandbox_request(message)
            else:
                self._capability(message)
        elif isinstance(message, Log):
            pending = self._pending.get(message.of)
            self.owner.output.write(message, pending.context if pending is not None else None)
        elif isinstance(message, Note):
            pending = self._pending.get(message.of)
            if pending is not None and pending.notes is not None:
                pending.notes(message.op, message.a)
        elif isinstance(message, Ack):
            ack = self._acks.get(message.id)
            if ack is not None and not ack.done():
                ack.set_result(message.running)
        elif isinstance(message, Retire):
            self.owner.fault(self, f"it reached {message.why or 'a limit'}")
            self.retire()

    def _replied(self, message: Reply) -> None:
        pending = self._pending.get(message.id)
        if pending is None or pending.future.done():
            return
        if message.ok:
            # A reply that is not of its operation's type is the worker's malformed frame (ProtocolError: _read).
            pending.future.set_result(decode_as(message.v, pending.reply if pending.reply is not None else Any,
                                                f"its reply to {pending.op!r}"))
        else:
            pending.future.set_exception(rebuild(message.e))

    def _capability(self, message: Ask) -> None:
        request_id, pending = message.id, self._pending.get(message.of)
        if pending is None or pending.capabilities is None:
            self._answer(request_id, error=LookupError("that call is over, or has no ctx capabilities"))
            return
        task = asyncio.get_running_loop().create_task(
            self._run_capability(request_id, pending.capabilities, message.op, message.a, message.kw), context=pending.context)
        pending.tasks.add(task)
        task.add_done_callback(pending.tasks.discard)

    def _sandbox_request(self, message: Ask) -> None:
        """What the sandbox itself does for a worker: covel.http (shared/sandbox/http_gate.py), with the host's rules."""
        request_id, pending = message.id, self._pending.get(message.of)
        args = message.a
        if message.op != "sandbox.http" or len(args) != 1 or not isinstance(args[0], dict) or message.kw:
            self._answer(request_id, error=LookupError(f"the sandbox has no {message.op!r} with these arguments"))
            return
        if self._http_requests >= HTTP_REQUESTS_QUEUED * self.owner.pool.settings.sandbox_http_concurrency:
            self._answer(request_id, error=RuntimeError("http: too many requests of this plugin are waiting to be sent"))
            return
        rules = pending.http if pending is not None and pending.http is not None else self.owner.http_rules
        gate, plugin_id = self.owner.pool.http_gate, self.owner.plugin_id

        async def send(op: str, args: list, kwargs: dict) -> Any:
            return await gate.request(plugin_id, rules, args[0])

        task = asyncio.get_running_loop().create_task(self._run_capability(request_id, send, "sandbox.http", args, {}),
                                                      context=pending.context if pending is not None else contextvars.Context())
        tasks = pending.tasks if pending is not None else self._background
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        self._http_requests += 1
        task.add_done_callback(self._http_request_done)

    def _http_request_done(self, task: asyncio.Task) -> None:
        self._http_requests -= 1

    async def _run_capability(self, request_id: int, capabilities: Capabilities, op: str, args: list, kwargs: dict) -> None:
        try:
            value = await capabilities(op, args, kwargs)
        except Exception as error:  # the plugin's ctx call failed: the plugin gets the error
            self._answer(request_id, error=error)
            return
        self._answer(request_id, value=value)

    def _answer(self, request_id: int, *, value: Any = None, error: BaseException | None = None) -> None:
        if self.gone is not None:
            return
        try:
            body = encode(Answer(request_id, True, value) if error is None else Answer(request_id, False, e=describe(error)))
        except (TypeError, ValueError) as bad:
            body = encode(Answer(request_id, False, e=describe(TypeError(f"the answer is not JSON: {bad}"))))
        self._writer.write(frame(body))
