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
import contextvars
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from shared.logs import get_logger
from shared.plugin_sdk.http_client import HttpRule
from shared.sandbox.channel import ChannelClosed, read_body
from shared.sandbox.errors import WorkerGone
from shared.sandbox.http_gate import HttpGate
from shared.sandbox.isolation import IsolationConfig, network_probe, prepare_writable, worker_env
from shared.sandbox.operations import operation_modules
from shared.sandbox.plugin_output import PluginOutput
from shared.sandbox.protocol import ProtocolError, Ready, check_version, decode_worker_frame
from shared.sandbox.settings import SandboxSettings
from shared.sandbox.worker_handle import Worker
from shared.sandbox.zygote_client import Zygote

log = get_logger(component="sandbox")

# Workers started at once (forks of the zygote, then each imports its plugin).
SPAWNS_AT_ONCE = 4
# What a fresh worker must do before it serves (the hooks service loads the entry module).
Setup = Callable[["Worker"], Awaitable[None]]
# What a worker stopped on purpose does first (the hooks service leaves the plugin's lifespans), and its bound.
Teardown = Callable[["Worker"], Awaitable[None]]
TEARDOWN_TIMEOUT_S = 7.0


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
        # What covel.http may reach (its permissions.http, as the host read them) when a call names nothing else.
        self.http_rules: tuple[HttpRule, ...] = ()
        # Its log lines (covel.log, print), rate-limited.
        self.output = PluginOutput(plugin_id, pool.settings)
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

    async def call(self, op: str, args: Any, **options: Any) -> Any:
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
        from shared.telemetry.metrics import record_sandbox_fault  # as below: not at import, where workers import this module

        record_sandbox_fault(self.plugin_id)
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
        # covel.http of every worker: sent by the host, checked here.
        self.http_gate = HttpGate(settings)
        # "isolated", or why workers share the service's network: checked at start, then by each worker's report.
        self.network: str | None = None
        self._network_check: asyncio.Task | None = None
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
        if self._network_check is None:
            self._network_check = asyncio.get_running_loop().create_task(self._check_network(), context=contextvars.Context())

    async def _check_network(self) -> None:
        """At start: whether workers will have a network of their own (each worker's report says it again)."""
        argv = network_probe(self.settings)
        if argv is None:
            self._note_network("shared (COVEL_SANDBOX_NAMESPACES or COVEL_SANDBOX_NETWORK_ISOLATION is false)")
            return
        process = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                                                       stderr=asyncio.subprocess.DEVNULL)
        if await process.wait() == 0:
            self._note_network("isolated")
        else:
            self._note_network("shared (the kernel refuses a network namespace)")

    def _note_network(self, network: str) -> None:
        """Said once, and again only if a worker finds otherwise than the check at start."""
        if self.network is None or (network == "isolated") != (self.network == "isolated"):
            note_network(self.service, network)
        self.network = network

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
            ready = decode_worker_frame(await asyncio.wait_for(read_body(reader), self.settings.sandbox_start_timeout_s))
        except (TimeoutError, ChannelClosed, ProtocolError) as error:
            process.kill()
            writer.close()
            raise RuntimeError(f"no ready message ({type(error).__name__}: {error})") from error
        try:
            if not isinstance(ready, Ready):
                raise ProtocolError(f"its first frame is {type(ready).__name__}, not ready")
            check_version(ready)
        except ProtocolError as error:
            process.kill()
            writer.close()
            log.warning("sandbox.protocol_mismatch", plugin_id=owner.plugin_id, error=str(error))
            raise RuntimeError(f"its worker does not speak this host's protocol ({error})") from error
        report = ready.report
        if self.isolation_report is None:
            self.isolation_report = report
            log.info("sandbox.isolation", service=self.service, **{k: v for k, v in report.items() if k != "pid"})
        self._note_network(str(report.get("network")))
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
        if self._network_check is not None:
            self._network_check.cancel()
        if self._zygote_start is not None:
            if self._zygote_start.done() and not self._zygote_start.cancelled() and self._zygote_start.exception() is None:
                self._zygote_start.result().close()
            else:
                self._zygote_start.cancel()


def note_network(service: str, network: str) -> None:
    """Whether workers have a network of their own, as a gauge (covel_sandbox_network_isolated) and, when not, a warning."""
    from shared.telemetry.metrics import record_sandbox_network

    isolated = network == "isolated"
    record_sandbox_network(service, isolated)
    if not isolated:
        log.warning("sandbox.network_shared", service=service, network=network,
                    why="plugin code reaches the network as the service does: its own sockets to services, databases, "
                        "the cloud metadata address (docs/security.md, \"What plugin code can reach\")")


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
