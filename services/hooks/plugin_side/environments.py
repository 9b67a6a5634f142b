"""provide_environment (spec: python-hookspecs, "App Hooks"): the variables and the workspace folder a session's
runs of one plugin's code see (docs/hookspecs.md, "Environments").

The process that runs the plugin's code (its sandbox worker, or the hooks service when plugins are not
sandboxed) calls provide_environment(session_id, workspace) before the plugin's first call of a session there:
`workspace` is the plugin's folder for that session, `<data dir>/workspaces/<plugin>/<session>`, created first
(workspace_root; the sandbox makes the plugin's own folder, and only it, writable by its worker). The answer is
kept per session (SESSIONS_KEPT, least recent dropped; with several hooks replicas each calls it once, so it
should be deterministic) and handed to that plugin's own code only: `ctx.environment` / `ctx.workspace` of its
covel.on handlers, tools, services, extension providers and actions (`with_environment` wraps them at load),
and `state["environment"]` / `state["workspace"]` of its hookspec hooks. Never os.environ: a worker serves many
sessions at once.

The first answer that is not None wins (pluggy's order). `variables` keep the str -> str pairs (others: logged,
skipped); `workspace` must name a folder inside the given one (relative paths are taken from it), else it is
refused with a warning and the given folder stays. One that raises, answers the wrong type or takes over
ENVIRONMENT_TIMEOUT_S is logged (a raise reported to on_error) and skipped: that session has no environment.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import re
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shared.logs import get_logger
from shared.plugin_sdk.agent_plugins import RAISED, PluginAgentHooks
from shared.plugin_sdk.context import SessionEnvironment
from shared.plugin_sdk.hookspecs import Environment
from shared.plugin_sdk.registrar import PluginRegistrar
from shared.plugin_threads import call_sync

log = get_logger(component="hookspecs")
HOOK = "provide_environment"
SESSIONS_KEPT = 1024
ENVIRONMENT_TIMEOUT_S = 10.0
# A session id that is one safe folder name (the kernel's are UUIDs).
_FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class SessionEnvironments:
    """One plugin generation's provide_environment answers, by session, in the process that runs its code."""

    def __init__(self, plugin_id: str, hooks: PluginAgentHooks) -> None:
        self.plugin_id = plugin_id
        self._hooks = hooks
        # Set by the loader: where this process reaches the plugin's workspaces (None: no sessions run here).
        self.root: Path | None = None
        self._found: OrderedDict[str, SessionEnvironment | None] = OrderedDict()
        self._asking: dict[str, asyncio.Task] = {}

    @property
    def implemented(self) -> bool:
        return bool(self._hooks.impls(HOOK))

    async def of(self, session_id: str) -> SessionEnvironment | None:
        """The session's environment, asked once (concurrent first calls share the one answer)."""
        if self.root is None or not self.implemented:
            return None
        if session_id in self._found:
            self._found.move_to_end(session_id)
            return self._found[session_id]
        asking = self._asking.get(session_id)
        if asking is None:
            asking = self._asking[session_id] = asyncio.get_running_loop().create_task(self._ask(session_id))
            asking.add_done_callback(lambda _: self._asking.pop(session_id, None))
        # Shielded: a caller that stops waiting (its own timeout) leaves the answer to the others.
        return await asyncio.shield(asking)

    async def _ask(self, session_id: str) -> SessionEnvironment | None:
        found = await self._answer(session_id)
        self._found[session_id] = found
        while len(self._found) > SESSIONS_KEPT:
            self._found.popitem(last=False)
        return found

    async def _answer(self, session_id: str) -> SessionEnvironment | None:
        if self.root is None or not _FOLDER_NAME.fullmatch(session_id):
            log.warning("environment.refused", plugin_id=self.plugin_id, session_id=session_id,
                        why="the session id is not a folder name")
            return None
        folder = self.root / session_id
        try:
            await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
        except OSError as error:
            log.warning("environment.no_workspace", plugin_id=self.plugin_id, folder=str(folder), error=str(error))
            return None
        for impl in self._hooks.impls(HOOK):
            try:
                async with asyncio.timeout(ENVIRONMENT_TIMEOUT_S):
                    outcome = await self._hooks.call(HOOK, impl, session_id=session_id, workspace=folder)
            except TimeoutError:
                self._hooks.wrong_type(HOOK, impl, TimeoutError(), f"an answer within {ENVIRONMENT_TIMEOUT_S:g} s")
                continue
            if outcome is None or outcome is RAISED:
                continue
            if not isinstance(outcome, Environment):
                self._hooks.wrong_type(HOOK, impl, outcome, "Environment or None")
                continue
            workspace = self._workspace(impl, outcome.workspace, folder)
            try:
                await asyncio.to_thread(workspace.mkdir, parents=True, exist_ok=True)
            except OSError as error:
                log.warning("environment.workspace_refused", plugin_id=self.plugin_id, workspace=str(workspace), why=str(error))
                workspace = folder
            return SessionEnvironment(self._variables(impl, outcome.variables), workspace)
        return None

    def _variables(self, impl: Any, variables: Any) -> dict[str, str]:
        if not isinstance(variables, dict):
            self._hooks.wrong_type(HOOK, impl, variables, "Environment.variables: dict[str, str]")
            return {}
        kept = {name: value for name, value in variables.items() if isinstance(name, str) and isinstance(value, str)}
        if len(kept) != len(variables):
            skipped = sorted(str(name) for name in variables if name not in kept)
            log.warning("hookimpl.wrong_return_type", plugin_id=self.plugin_id, hook=HOOK, impl=impl.plugin_name,
                        skipped=skipped, expected="str names and str values")
        return kept

    def _workspace(self, impl: Any, chosen: Any, folder: Path) -> Path:
        if chosen is None:
            return folder
        # Lexically (the folder may be reached through a descriptor, /proc/self/fd/N, that resolving would leave).
        path = Path(os.path.normpath(folder / chosen)) if isinstance(chosen, (str, Path)) else None
        if path is None or not path.is_relative_to(folder):
            log.warning("environment.workspace_refused", plugin_id=self.plugin_id, impl=impl.plugin_name, workspace=str(chosen),
                        why=f"a workspace must be inside {folder}; that folder is kept")
            return folder
        return path


def with_environment(function: Callable[..., Any], environments: SessionEnvironments) -> Callable[..., Any]:
    """`function(ctx, …)` that first sets ctx's environment (HookContext or ToolContext, by ctx.session_id).
    Always a coroutine function: a plain `function` runs in a plugin thread, as it would have."""

    async def run(context: Any, *args: Any) -> Any:
        session_id = getattr(context, "session_id", "") or ""
        if session_id:
            context._environment = await environments.of(session_id)
        if inspect.iscoroutinefunction(function):
            return await function(context, *args)
        # Made here, on the loop, so that the plain function's thread and its caller's timer share one.
        _ = getattr(context, "signal", None)
        return await call_sync(function, context, *args)

    run.__name__ = getattr(function, "__name__", "handler")
    run.__qualname__ = getattr(function, "__qualname__", run.__name__)
    return run


class _ServiceWithEnvironment:
    """A service object whose `call` sets ctx's environment first; its other attributes are the object's."""

    def __init__(self, implementation: Any, environments: SessionEnvironments) -> None:
        self._implementation = implementation
        self.call = with_environment(implementation.call, environments)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._implementation, name)


def attach(registrar: PluginRegistrar, environments: SessionEnvironments, root: Path | None) -> None:
    """Where this process keeps the plugin's workspaces, and its code wrapped to see its environment
    (only when it implements provide_environment: nothing changes for the others)."""
    environments.root = root
    if root is None or not environments.implemented:
        return
    registrar.hooks[:] = [dataclasses.replace(hook, handler=with_environment(hook.handler, environments), is_async=True)
                          for hook in registrar.hooks]
    registrar.tools[:] = [dataclasses.replace(tool, handler=with_environment(tool.handler, environments))
                          for tool in registrar.tools]
    registrar.rpcs[:] = [dataclasses.replace(rpc, handler=with_environment(rpc.handler, environments)) for rpc in registrar.rpcs]
    registrar.extensions[:] = [dataclasses.replace(extension, provider=with_environment(extension.provider, environments))
                               for extension in registrar.extensions]
    registrar.services[:] = [dataclasses.replace(service, implementation=_service(service.implementation, environments))
                             for service in registrar.services]


def _service(implementation: Any, environments: SessionEnvironments) -> Any:
    if callable(implementation):
        wrapped = with_environment(implementation, environments)
        for name in ("description", "parameters"):
            if hasattr(implementation, name):
                setattr(wrapped, name, getattr(implementation, name))
        return wrapped
    if callable(getattr(implementation, "call", None)):
        return _ServiceWithEnvironment(implementation, environments)
    return implementation


def state_fields(environment: SessionEnvironment | None) -> dict[str, Any]:
    """The hookspec state's `environment` (a dict) and `workspace` (a Path or None)."""
    return {"environment": dict(environment.variables) if environment is not None else {},
            "workspace": environment.workspace if environment is not None else None}
