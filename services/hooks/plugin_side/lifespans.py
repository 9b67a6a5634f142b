"""provide_lifespan (spec: python-hookspecs, "App Hooks"): a plugin's lifespans, entered with its code and left
when that code is unloaded, in the process that runs it (docs/hookspecs.md, "Lifespans").

The hooks service enters one plugin generation's lifespans after its register(covel) succeeded and the load
was accepted, before that generation takes any call (CatalogueSync.reload; in a sandbox worker, the `lifespans`
operation, also when a fresh worker replaces one); it leaves them when that code is unloaded: a Reload (the old
generation, once the new one serves), a worker stopped on purpose (the plugin left the catalogue, the service
stops), the service's graceful shutdown. A worker killed for an overrun, a crash or a limit runs no exits.

Each answer of provide_lifespan may be an async or sync context manager, or an async or sync generator that
yields once (the forms AgentPlugins.running() takes, shared/plugin_sdk/agent_plugins.py). They are entered in
pluggy's order and left in reverse, all by one task of their own (a context manager built on a task group or a
cancel scope must be left by the task that entered it); sync code runs in a plugin thread, never on the loop.

Plugin code is untrusted: an enter that raises, or hangs past ENTER_TIMEOUT_S (the load's bound), is logged,
reported to on_error(stage="provide_lifespan") and skipped (each lifespan has its own bound); the plugin still loads (its other hooks do not
depend on it; a plugin that needs its lifespan checks in its hooks). The exits share EXIT_TIMEOUT_S: one that
raises is logged and reported, one still running at the bound is abandoned (logged), and so are those after it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from services.hooks.common.bounds import ENTER_TIMEOUT_S, EXIT_TIMEOUT_S
from shared.logs import get_logger
from shared.plugin_sdk.agent_plugins import RAISED, PluginAgentHooks
from shared.plugin_threads import call_plugin_code, thread_owner

log = get_logger(component="hookspecs")
HOOK = "provide_lifespan"

Exit = Callable[[], Awaitable[Any]]


class LifespanFailed(Exception):
    """on_error's error for a lifespan that could not be entered or left (the cause is chained)."""


class NotALifespan(TypeError):
    """provide_lifespan answered something that is neither a context manager nor a generator."""


class Lifespans:
    """One plugin generation's provide_lifespan answers, held open by a task of their own."""

    def __init__(self, hooks: PluginAgentHooks) -> None:
        self._hooks = hooks
        self._task: asyncio.Task | None = None
        self._entered = asyncio.Event()
        self._leave = asyncio.Event()
        self._exit_timeout_s = EXIT_TIMEOUT_S
        # Left once: this load's code is unloaded for good.
        self._left = False
        # (impl name, its exit) of each lifespan entered, in order.
        self.open: list[tuple[str, Exit]] = []

    @property
    def implemented(self) -> bool:
        return bool(self._hooks.impls(HOOK))

    async def enter(self, timeout_s: float = ENTER_TIMEOUT_S) -> list[str]:
        """Enter every lifespan (once: later calls return at once, none after leave); the names of the impls entered."""
        if self._task is None and self.implemented and not self._left:
            self._task = asyncio.get_running_loop().create_task(self._hold(timeout_s), name=f"lifespans-{self._hooks.plugin_id}")
        if self._task is not None:
            # Shielded: a caller that stops waiting does not cancel the lifespans half entered.
            await asyncio.shield(self._entered.wait())
        return [name for name, _ in self.open]

    async def leave(self, timeout_s: float = EXIT_TIMEOUT_S) -> None:
        """Leave the lifespans entered, in reverse order, within `timeout_s` (then abandoned, logged)."""
        task, self._task = self._task, None
        self._left = True
        if task is None:
            return
        self._exit_timeout_s = timeout_s
        self._leave.set()
        # The task bounds each exit by the time left; the margin covers a thread that does not give back the loop.
        done, _ = await asyncio.wait({task}, timeout=timeout_s + 1.0)
        if not done:
            task.cancel()
            log.warning("lifespan.abandoned", plugin_id=self._hooks.plugin_id, why=f"its exits took over {timeout_s:g} s")

    async def _hold(self, enter_timeout_s: float) -> None:
        # Not the threads of whichever call started the load (a sandbox worker counts those per call).
        thread_owner.set(None)
        try:
            for impl in self._hooks.impls(HOOK):
                exit_ = await self._enter_one(impl, enter_timeout_s)
                if exit_ is not None:
                    self.open.append((impl.plugin_name, exit_))
        finally:
            self._entered.set()
        await self._leave.wait()
        await self._exit_all(self._exit_timeout_s)

    async def _enter_one(self, impl: Any, timeout_s: float) -> Exit | None:
        """One impl's lifespan (provide_lifespan called, then entered) within `timeout_s`."""
        lifespan: Any = None
        try:
            async with asyncio.timeout(timeout_s):
                lifespan = await self._hooks.call(HOOK, impl)
                if lifespan is None or lifespan is RAISED:
                    return None
                return await enter_lifespan(lifespan)
        except NotALifespan as error:
            self._hooks.wrong_type(HOOK, impl, lifespan, str(error))
        except TimeoutError:
            await self._failed(impl.plugin_name, "enter", TimeoutError(f"its enter did not return within {timeout_s:g} s; abandoned"))
        except Exception as error:  # plugin code: logged, reported, skipped (spec)
            await self._failed(impl.plugin_name, "enter", error)
        return None

    async def _exit_all(self, timeout_s: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self.open:
            name, exit_ = self.open.pop()
            try:
                async with asyncio.timeout_at(deadline):
                    await exit_()
                log.debug("lifespan.left", plugin_id=self._hooks.plugin_id, impl=name)
            except TimeoutError:
                abandoned = [name, *(other for other, _ in reversed(self.open))]
                self.open.clear()
                log.warning("lifespan.abandoned", plugin_id=self._hooks.plugin_id, impls=abandoned,
                            why=f"its exit did not return within {timeout_s:g} s")
            except Exception as error:  # plugin code: logged, reported, the next one is left all the same
                await self._failed(name, "exit", error)

    async def _failed(self, name: str, step: str, error: Exception) -> None:
        log.warning("hookimpl.raised", plugin_id=self._hooks.plugin_id, hook=HOOK, impl=name, step=step,
                    error=f"{type(error).__name__}: {error}")
        if self._hooks.on_raised is not None:
            failure = LifespanFailed(f"{name}: its {step} failed: {type(error).__name__}: {error}")
            failure.__cause__ = error
            await self._hooks.on_raised(HOOK, failure)


async def enter_lifespan(lifespan: Any) -> Exit:
    """Enter one lifespan; what leaves it. NotALifespan: not a context manager or a generator."""
    if hasattr(lifespan, "__aenter__") and hasattr(lifespan, "__aexit__"):
        await lifespan.__aenter__()
        return lambda: lifespan.__aexit__(None, None, None)
    if hasattr(lifespan, "__enter__") and hasattr(lifespan, "__exit__"):
        await call_plugin_code(lifespan.__enter__)
        return lambda: call_plugin_code(lifespan.__exit__, None, None, None)
    if inspect.isasyncgen(lifespan):
        try:
            await lifespan.__anext__()
        except StopAsyncIteration:
            raise RuntimeError("its generator returned without yielding") from None
        return lambda: _finish_async(lifespan)
    if inspect.isgenerator(lifespan):
        try:
            await call_plugin_code(next, lifespan)
        except StopIteration:
            raise RuntimeError("its generator returned without yielding") from None
        return lambda: call_plugin_code(_finish_sync, lifespan)
    raise NotALifespan("a context manager or a generator that yields once (sync or async)")


async def _finish_async(generator: Any) -> None:
    try:
        await generator.__anext__()
    except StopAsyncIteration:
        return
    await generator.aclose()
    raise RuntimeError("its generator yielded more than once")


def _finish_sync(generator: Any) -> None:
    try:
        next(generator)
    except StopIteration:
        return
    generator.close()
    raise RuntimeError("its generator yielded more than once")

