"""provide_lifespan seen from the hooks service: every loaded plugin's lifespans entered and left at once
(`enter_all`, `leave_all`: their adapters in this process, or their workers' stand-ins), and the stand-in of a
sandboxed plugin's lifespans, which live in its worker (plugin_side/lifespans.py, the `lifespans` operation).
"""

from __future__ import annotations

import asyncio
from typing import Any

from services.hooks.common.bounds import ENTER_TIMEOUT_S, EXIT_TIMEOUT_S
from services.hooks.common.worker_messages import LifespansArgs, LifespansReply
from shared.logs import get_logger

log = get_logger(component="hookspecs")


async def enter_all(loaded: list[Any], timeout_s: float = ENTER_TIMEOUT_S) -> None:
    """The lifespans of every loaded plugin (LoadedPlugin), all at once; each plugin's own failures are its own."""
    await asyncio.gather(*(plugin.hookspecs.lifespans.enter(timeout_s) for plugin in loaded
                           if plugin.hookspecs is not None and plugin.hookspecs.lifespans.implemented))


async def leave_all(loaded: list[Any], timeout_s: float = EXIT_TIMEOUT_S) -> None:
    """Leave the lifespans of every loaded plugin, all at once, each bounded by `timeout_s`."""
    await asyncio.gather(*(plugin.hookspecs.lifespans.leave(timeout_s) for plugin in loaded
                           if plugin.hookspecs is not None and plugin.hookspecs.lifespans.implemented),
                         return_exceptions=True)


class WorkerLifespans:
    """The host's side of a sandboxed plugin's lifespans (they live in its worker: the `lifespans` operation,
    services/hooks/plugin_side/operations.py). A worker call that fails is logged: the plugin loads all the same."""

    def __init__(self, plugin: Any, implemented: bool) -> None:
        # A SandboxedPlugin (services/hooks/sandboxed_entries.py): its workers, generation and id.
        self._plugin = plugin
        self.implemented = implemented
        # Which load of the generation was entered: a later load of the same generation (a Reload) is another.
        self._load: int | None = None

    async def enter(self, timeout_s: float = ENTER_TIMEOUT_S, worker: Any = None) -> None:
        """Entered in the plugin's worker (or in `worker`, a fresh one that is not serving yet)."""
        if not self.implemented:
            return
        args = LifespansArgs("enter", self._plugin.generation, timeout_s=timeout_s)
        try:
            calling = (worker.call("lifespans", args, reply=LifespansReply) if worker is not None
                       else self._plugin.workers.call("lifespans", args, reply=LifespansReply))
            answer = await asyncio.wait_for(calling, timeout_s + 5.0)
        except Exception as error:  # the worker's failure (gone, hung): the plugin's other code still serves
            log.warning("lifespan.not_entered", plugin_id=self._plugin.plugin_id, error=f"{type(error).__name__}: {error}")
            return
        self._load = answer.load

    async def leave(self, timeout_s: float = EXIT_TIMEOUT_S) -> None:
        """Left in the plugin's worker, if that worker is still kept (a forgotten one leaves them in its teardown)."""
        workers = self._plugin.workers
        if not self.implemented or self._load is None or not workers.pool.is_kept(workers):
            return
        args = LifespansArgs("leave", self._plugin.generation, self._load, timeout_s)
        self._load = None
        try:
            await asyncio.wait_for(workers.call("lifespans", args, reply=LifespansReply), timeout_s + 2.0)
        except Exception as error:  # the worker's failure: nothing more to leave there
            log.warning("lifespan.not_left", plugin_id=self._plugin.plugin_id, error=f"{type(error).__name__}: {error}")

    async def leave_all(self, worker: Any) -> None:
        """A worker stopped on purpose (PluginWorkers.teardown): every generation's lifespans left there."""
        await worker.call("lifespans", LifespansArgs("leave", timeout_s=EXIT_TIMEOUT_S), reply=LifespansReply)
