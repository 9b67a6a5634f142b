"""The service's side of the sandbox: a warm worker per plugin, calls to it, and its replacement.

`SandboxPool.plugin(plugin_id, root)` gives a `PluginWorkers`: the plugin's current worker, started
on first use and kept (a call costs one round trip), plus workers being retired. A call the caller
stops waiting for (its timeout, or a cancelled execution) is stopped in the worker: async code is
cancelled. A timeout, code that runs on in a thread, or a worker that does not confirm the stop
within COVEL_SANDBOX_STOP_GRACE_MS, gets the worker replaced: it takes calls until a fresh one is
up, and is SIGKILLed once its other calls are done (at once when it is hung), threads and all. A worker that exits
fails its calls in flight (`WorkerGone`) and is replaced on the next call. Each replacement counts
as a fault of the plugin (`faults`), with the reason in the log. A worker stopped on purpose (its
plugin forgotten, the pool closed) first runs the plugin's `teardown` (the hooks service leaves its
lifespans), bounded by TEARDOWN_TIMEOUT_S; one killed for a fault runs none.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import json
import socket
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from shared.logs import get_logger
from shared.sandbox.channel import ChannelClosed, encode, read_frame
from shared.sandbox.errors import WorkerGone, describe, rebuild
from shared.sandbox.isolation import IsolationConfig, prepare_writable, worker_env
from shared.sandbox.operations import operation_modules
from shared.sandbox.settings import SandboxSettings

log = get_logger(component="sandbox")

# Workers started at once (forks of the zygote, then each imports its plugin).
SPAWNS_AT_ONCE = 4
# What a call's ctx capabilities are: (operation, args, kwargs) -> answer, run by the host.
Capabilities = Callable[[str, list[Any], dict[str, Any]], Awaitable[Any]]
# One-way messages of a call (ctx.propose, ctx.emit_event).
Notes = Callable[[str, list[Any]], None]
# What a fresh worker must do before it serves (the hooks service loads the entry module).
Setup = Callable[["Worker"], Awaitable[None]]
# What a worker stopped on purpose does first (the hooks service leaves the plugin's lifespans), and its bound.
Teardown = Callable[["Worker"], Awaitable[None]]
TEARDOWN_TIMEOUT_S = 7.0


@dataclass
class _Pending:
    future: asyncio.Future
    capabilities: Capabilities | None
    notes: Notes | None
    deadline: float | None
    # The caller's context variables (the turn's unit, log fields, trace span): its ctx calls run in them.
    context: contextvars.Context = field(default_factory=contextvars.copy_context)
    tasks: set[asyncio.Task] = field(default_factory=set)


class ZygoteChild:
    """A worker forked by the zygote: the part of asyncio's Process a Worker uses (pid, kill, wait)."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.zygote = zygote
        self.pid = pid
        self.returncode: int | None = None
        self._exited = asyncio.get_running_loop().create_future()

    def kill(self) -> None:
        if self.returncode is None:
            self.zygote.kill(self.pid)

    def exited(self, code: int) -> None:
        self.returncode = code
        if not self._exited.done():
            self._exited.set_result(code)

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)


class Zygote:
    """The pool's fork server (shared/sandbox/zygote.py): started once, forks every worker."""

    def __init__(self, process: asyncio.subprocess.Process, requests: socket.socket, events: asyncio.StreamReader,
                 events_writer: asyncio.StreamWriter) -> None:
        self.process = process
        self._requests = requests
        self._events = events
        self._events_writer = events_writer
        self._ids = itertools.count(1)
        self._spawning: dict[int, asyncio.Future] = {}
        self._children: dict[int, ZygoteChild] = {}
        self.gone = False
        self._reading = asyncio.get_running_loop().create_task(self._read(), name="sandbox-zygote", context=contextvars.Context())

    @classmethod
    async def start(cls, env: dict[str, str]) -> Zygote:
        requests, requests_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        events, events_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "shared.sandbox.zygote", str(requests_child.fileno()), str(events_child.fileno()),
                json.dumps(operation_modules()),
                env=env, cwd="/", stdin=asyncio.subprocess.DEVNULL, pass_fds=(requests_child.fileno(), events_child.fileno()),
                start_new_session=True,
            )
        finally:
            requests_child.close()
            events_child.close()
        reader, writer = await asyncio.open_unix_connection(sock=events)
        return cls(process, requests, reader, writer)

    async def spawn(self, config: dict[str, Any], channel: socket.socket, timeout_s: float) -> ZygoteChild:
        spawn_id = next(self._ids)
        future = self._spawning[spawn_id] = asyncio.get_running_loop().create_future()
        try:
            socket.send_fds(self._requests, [json.dumps({"spawn": spawn_id, "config": config}).encode()], [channel.fileno()])
            return await asyncio.wait_for(future, timeout_s)
        finally:
            self._spawning.pop(spawn_id, None)

    def kill(self, pid: int) -> None:
        if not self.gone:
            with contextlib.suppress(OSError):
                self._requests.send(json.dumps({"kill": pid}).encode())

    async def _read(self) -> None:
        try:
            while True:
                event = await read_frame(self._events)
                if "spawned" in event:
                    child = self._children[int(event["pid"])] = ZygoteChild(self, int(event["pid"]))
                    future = self._spawning.get(int(event["spawned"]))
                    if future is not None and not future.done():
                        future.set_result(child)
                    else:
                        child.kill()
                elif "exited" in event:
                    exited = self._children.pop(int(event["exited"]), None)
                    if exited is not None:
                        exited.exited(int(event["code"]))
        except (ChannelClosed, KeyError, TypeError, ValueError) as error:
            log.warning("sandbox.zygote_gone", why=f"{type(error).__name__}: {error}")
        finally:
            # Its workers die with it (PR_SET_PDEATHSIG): their channels close, and the next spawn starts a new zygote.
            self.gone = True
            for future in self._spawning.values():
                if not future.done():
                    future.set_exception(RuntimeError("the sandbox's zygote exited"))
            for child in self._children.values():
                child.exited(-9)

    def close(self) -> None:
        self.gone = True
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self._requests.close()
        self._events_writer.close()


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
        self._pending: dict[int, _Pending] = {}
        self._acks: dict[int, asyncio.Future] = {}
        self.retiring = False
        # Retiring, with a fresh worker serving: it goes once its calls are done.
        self._replaced = False
        self.gone: str | None = None
        # Its own context: not that of whichever call happened to start the worker.
        self._reading = asyncio.get_running_loop().create_task(self._read(), name=f"sandbox-read-{owner.plugin_id}",
                                                               context=contextvars.Context())

    @property
    def serving(self) -> bool:
        return self.gone is None and not self.retiring

    async def call(self, op: str, args: dict[str, Any], *, capabilities: Capabilities | None = None,
                   notes: Notes | None = None, deadline: float | None = None) -> Any:
        """`op` in the worker; its error re-raised here. Cancelling the caller stops the call there."""
        if self.gone is not None:
            raise WorkerGone(self.gone)
        call_id = next(self._ids)
        pending = _Pending(asyncio.get_running_loop().create_future(), capabilities, notes, deadline)
        self._pending[call_id] = pending
        try:
            self._writer.write(encode({"k": "req", "id": call_id, "op": op, "a": args}))
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
            self._writer.write(encode({"k": "stop", "id": call_id, "why": why}))
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
        self._writer.close()

    async def _read(self) -> None:
        try:
            while True:
                self._dispatch(await read_frame(self._reader))
        except ChannelClosed as closed:
            if self.gone is None:
                code = await self._exit_code()
                self.owner.fault(self, f"it exited ({code})" if code else f"its channel broke ({closed})")
                self._gone(f"its worker process exited ({code or closed}); a fresh one takes the next call")
        except Exception as error:  # a frame that makes no sense: the worker is not to be trusted further
            self.owner.fault(self, f"it sent a malformed frame ({type(error).__name__}: {error})")
            self.kill("malformed frame")

    async def _exit_code(self) -> str:
        try:
            code = await asyncio.wait_for(self.process.wait(), 2.0)
        except TimeoutError:
            return ""
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("k")
        if kind == "res":
            pending = self._pending.get(int(message["id"]))
            if pending is not None and not pending.future.done():
                if message.get("ok"):
                    pending.future.set_result(message.get("v"))
                else:
                    pending.future.set_exception(rebuild(message.get("e")))
        elif kind == "req":
            self._capability(message)
        elif kind == "note":
            pending = self._pending.get(int(message["of"]))
            if pending is not None and pending.notes is not None:
                pending.notes(str(message.get("op")), list(message.get("a") or []))
        elif kind == "ack":
            ack = self._acks.get(int(message["id"]))
            if ack is not None and not ack.done():
                ack.set_result(bool(message.get("running")))
        elif kind == "retire":
            self.owner.fault(self, f"it reached {message.get('why') or 'a limit'}")
            self.retire()

    def _capability(self, message: dict[str, Any]) -> None:
        request_id, pending = int(message["id"]), self._pending.get(int(message.get("of") or 0))
        if pending is None or pending.capabilities is None:
            self._answer(request_id, error=LookupError("that call is over, or has no ctx capabilities"))
            return
        args, kwargs = message.get("a"), message.get("kw")
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            self._answer(request_id, error=TypeError("a ctx call's arguments are a list and an object"))
            return
        task = asyncio.get_running_loop().create_task(
            self._run_capability(request_id, pending.capabilities, str(message.get("op")), args, kwargs), context=pending.context)
        pending.tasks.add(task)
        task.add_done_callback(pending.tasks.discard)

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
        message = {"k": "res", "id": request_id, "ok": error is None}
        message.update({"e": describe(error)} if error is not None else {"v": value})
        try:
            frame = encode(message)
        except (TypeError, ValueError) as bad:
            frame = encode({"k": "res", "id": request_id, "ok": False, "e": describe(TypeError(f"the answer is not JSON: {bad}"))})
        self._writer.write(frame)


class PluginWorkers:
    """One plugin's workers: the one serving, the one starting, and one being retired."""

    def __init__(self, pool: SandboxPool, plugin_id: str, root: str) -> None:
        self.pool = pool
        self.plugin_id = plugin_id
        self.root = root
        self.current: Worker | None = None
        self.setup: Setup | None = None
        self.teardown: Teardown | None = None
        # Folders its workers may write (IsolationConfig.writable), made by the pool before each start.
        self.writable: list[str] = []
        self.faults = 0
        # A worker whose cancelled call runs on in a thread: it takes calls until its replacement is up.
        self._draining: Worker | None = None
        self._starting: asyncio.Task | None = None
        self._failed_start: tuple[float, str] | None = None
        self._watched: set[asyncio.Task] = set()

    async def worker(self) -> Worker:
        current = self.current
        if current is not None and current.serving:
            return current
        if self._failed_start is not None and time.monotonic() - self._failed_start[0] < 1.0:
            raise WorkerGone(self._failed_start[1])
        starting = self._start()
        draining = self._draining
        if draining is not None and draining.gone is None and not starting.done():
            return draining
        # Shielded: a caller that stops waiting (its timeout) leaves the start to finish for the next one.
        return await asyncio.shield(starting)

    def _start(self) -> asyncio.Task:
        if self._starting is None or self._starting.done():
            self._starting = asyncio.get_running_loop().create_task(self._spawn(), name=f"sandbox-start-{self.plugin_id}",
                                                                    context=contextvars.Context())
            self._starting.add_done_callback(lambda task: task.cancelled() or task.exception())
        return self._starting

    async def _spawn(self) -> Worker:
        try:
            worker = await self.pool.spawn(self)
            try:
                if self.setup is not None:
                    await self.setup(worker)
            except BaseException:
                worker.kill("its setup failed")
                raise
        except Exception as error:
            self._failed_start = (time.monotonic(), f"its worker process could not start: {error}")
            raise WorkerGone(self._failed_start[1]) from error
        self._failed_start = None
        self.current = worker
        draining, self._draining = self._draining, None
        if draining is not None:
            draining.replaced()
        return worker

    async def call(self, op: str, args: dict[str, Any], **options: Any) -> Any:
        return await (await self.worker()).call(op, args, **options)

    def retired(self, worker: Worker) -> None:
        """`worker` takes no new calls once another is up (gone: none at all); a replacement starts now."""
        if self.current is worker:
            self.current = None
        if worker.gone is None:
            self._draining = worker
        elif self._draining is worker:
            self._draining = None
        if self.pool.is_kept(self):
            self._start()

    def fault(self, worker: Worker, why: str) -> None:
        self.faults += 1
        self.pool.faults[self.plugin_id] += 1
        log.warning("sandbox.worker_fault", plugin_id=self.plugin_id, pid=worker.pid, why=why, faults=self.faults)

    def watch(self, coroutine: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._watched.add(task)
        task.add_done_callback(self._watched.discard)

    async def tear_down(self) -> None:
        """Its live workers run the teardown (stopped on purpose), each bounded; what fails is logged."""
        teardown = self.teardown
        workers = [worker for worker in (self.current, self._draining) if worker is not None and worker.gone is None]
        if teardown is None or not workers:
            return
        outcomes = await asyncio.gather(*(asyncio.wait_for(teardown(worker), TEARDOWN_TIMEOUT_S) for worker in workers),
                                        return_exceptions=True)
        for worker, outcome in zip(workers, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                log.warning("sandbox.teardown_failed", plugin_id=self.plugin_id, pid=worker.pid,
                            error=f"{type(outcome).__name__}: {outcome}")

    async def close(self) -> None:
        for worker in (self.current, self._draining):
            if worker is not None:
                worker.kill("the service stops")
        for task in [*self._watched, *([self._starting] if self._starting is not None else [])]:
            task.cancel()


class SandboxPool:
    """The workers of one service, by plugin (and folder)."""

    def __init__(self, settings: SandboxSettings, service: str, *, data_dir: Path | None = None,
                 log_level: str = "info", log_format: str = "json") -> None:
        self.settings = settings
        self.service = service
        self.data_dir = data_dir
        self._log = {"log_level": log_level, "log_format": log_format}
        self._plugins: dict[tuple[str, str], PluginWorkers] = {}
        self.faults: Counter[str] = Counter()
        self.isolation_report: dict[str, Any] | None = None
        self._workers: set[Worker] = set()
        self._spawning = asyncio.Semaphore(SPAWNS_AT_ONCE)
        self._zygote_start: asyncio.Task[Zygote] | None = None
        # Forgotten plugins whose workers run their teardown before they go.
        self._forgetting: set[asyncio.Task] = set()

    def plugin(self, plugin_id: str, root: str | Path) -> PluginWorkers:
        key = (plugin_id, str(root))
        found = self._plugins.get(key)
        if found is None:
            found = self._plugins[key] = PluginWorkers(self, plugin_id, str(root))
        return found

    def plugins(self) -> list[PluginWorkers]:
        return list(self._plugins.values())

    def forget(self, workers: PluginWorkers) -> None:
        """A plugin (folder) no longer loaded: its workers run its teardown, then go once their calls are done."""
        self._plugins.pop((workers.plugin_id, workers.root), None)
        if workers.teardown is not None:
            task = asyncio.get_running_loop().create_task(self._retire_after_teardown(workers), context=contextvars.Context())
            self._forgetting.add(task)
            task.add_done_callback(self._forgetting.discard)
            return
        self._retire(workers)

    async def _retire_after_teardown(self, workers: PluginWorkers) -> None:
        try:
            await workers.tear_down()
        finally:
            self._retire(workers)

    @staticmethod
    def _retire(workers: PluginWorkers) -> None:
        for worker in (workers.current, workers._draining):
            if worker is not None:
                worker.retire()
                worker.replaced()

    def is_kept(self, workers: PluginWorkers) -> bool:
        return self._plugins.get((workers.plugin_id, workers.root)) is workers

    async def spawn(self, owner: PluginWorkers) -> Worker:
        # A few at a time: a service loading many plugins must not starve the others of CPU.
        async with self._spawning:
            return await self._spawn(owner)

    def prewarm(self) -> None:
        """Start the zygote now (a Python start and its imports), e.g. while the service waits for its peers."""
        if self._zygote_start is None or (self._zygote_start.done() and (self._zygote_start.cancelled()
                                                                          or self._zygote_start.exception() is not None
                                                                          or self._zygote_start.result().gone)):
            self._zygote_start = asyncio.get_running_loop().create_task(Zygote.start(worker_env(self.settings.sandbox_pass_env)))

    async def _zygote(self) -> Zygote:
        self.prewarm()
        assert self._zygote_start is not None
        return await asyncio.shield(self._zygote_start)

    async def _spawn(self, owner: PluginWorkers) -> Worker:
        zygote = await self._zygote()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        isolation = IsolationConfig.of(self.settings, [owner.root], self.data_dir, owner.writable)
        for problem in prepare_writable(isolation):
            log.warning("sandbox.writable_refused", plugin_id=owner.plugin_id, problem=problem)
        config = {"plugin_id": owner.plugin_id, "service": self.service, **self._log, "isolation": asdict(isolation),
                  "operations": operation_modules()}
        try:
            process = await zygote.spawn(config, child, self.settings.sandbox_start_timeout_s)
        finally:
            child.close()
        reader, writer = await asyncio.open_unix_connection(sock=parent)
        try:
            ready = await asyncio.wait_for(read_frame(reader), self.settings.sandbox_start_timeout_s)
        except (TimeoutError, ChannelClosed) as error:
            process.kill()
            writer.close()
            raise RuntimeError(f"no ready message ({type(error).__name__}: {error})") from error
        found = ready.get("report")
        report: dict[str, Any] = found if isinstance(found, dict) else {}
        if self.isolation_report is None:
            self.isolation_report = report
            log.info("sandbox.isolation", service=self.service, **{k: v for k, v in report.items() if k != "pid"})
        worker = Worker(owner, process, reader, writer, report)
        self._workers.add(worker)
        return worker

    def discard(self, worker: Worker) -> None:
        self._workers.discard(worker)

    async def close(self) -> None:
        plugins = self.plugins()
        # Forgotten first, so that no worker killed here is replaced.
        self._plugins.clear()
        # Stopped on purpose: every plugin's teardown first, all at once (each bounded).
        await asyncio.gather(*(plugin.tear_down() for plugin in plugins), *self._forgetting, return_exceptions=True)
        for plugin in plugins:
            await plugin.close()
        for worker in list(self._workers):
            worker.kill("the service stops")
        if self._zygote_start is not None:
            if self._zygote_start.done() and not self._zygote_start.cancelled() and self._zygote_start.exception() is None:
                self._zygote_start.result().close()
            else:
                self._zygote_start.cancel()


def sandbox_pool(service: str, log_level: str = "info", log_format: str = "json",
                 settings: SandboxSettings | None = None) -> SandboxPool | None:
    """The service's pool from `settings` (else COVEL_SANDBOX_*), hiding the data dir; None when the sandbox is off."""
    from shared.settings import DataDirSetting

    settings = settings if settings is not None else SandboxSettings()
    if not settings.sandbox_enabled:
        log.warning("sandbox.disabled", service=service,
                    why="COVEL_SANDBOX_ENABLED=false: plugin code runs inside the service and reaches its secrets")
        return None
    return SandboxPool(settings, service, data_dir=DataDirSetting().data_dir, log_level=log_level, log_format=log_format)
