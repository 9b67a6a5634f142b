"""PluginAgentHooks, AgentPlugins and AgentComponents as the spec types them (python-hookspecs, "订阅方式"):
hookimpl objects driving an agent in process, with the hookspec rules.

    plugins = AgentPlugins(plugins=[Policy(), Memory()])
    async with plugins.running():                  # provide_lifespan entered, left at the end
        agent = plugins.attach(my_agent)           # my_agent.events: an agent_events.EventBus
        state = await plugins.build_state("s-1", message={"content": "hi"})

The rules (the same the hooks service applies to a plugin's hookimpls, services/hooks/plugin_side/hookspec_adapter.py,
which runs its decision chains through PluginAgentHooks): impls run in pluggy's order (the last registered
first, tryfirst/trylast); one that raises is logged and skipped (`on_raised` hears of it), one that returns
the wrong type is logged and skipped. A changed LLMCallRequest and proceed(arguments) pass to the next impl;
finish, replace and deny end the chain.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import replace as dataclass_replace
from typing import Any, TypedDict

import pluggy

from shared.logs import get_logger
from shared.plugin_sdk.agent_events import (
    EventBus,
    LLMCallFinished,
    LLMCallStarted,
    MessagesPending,
    StepFinished,
    SystemPrompt,
    ToolCallFinished,
    ToolCallStarted,
)
from shared.plugin_sdk.app_types import AsyncTapeStore, TapeContext, TapeSidecar, TapeStore
from shared.plugin_sdk.hookspecs import (
    HOOK_NAMES,
    PROJECT,
    CovelHookSpecs,
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    ToolCall,
    ToolCallDecision,
    ToolCallResult,
    TurnState,
)
from shared.plugin_sdk.turn_types import Envelope
from shared.plugin_threads import call_plugin_code

log = get_logger(component="hookspecs")
HookRuntime = pluggy.PluginManager
OnRaised = Callable[[str, Exception], Awaitable[None]]
# What an impl that raised gives back.
RAISED = object()


class PluginAgentHooks:
    """The four interception hooks of a runtime's hookimpls, as the spec's methods and as bus handlers."""

    def __init__(self, runtime: HookRuntime, *, plugin_id: str = "", on_raised: OnRaised | None = None) -> None:
        self.runtime = runtime
        self.plugin_id = plugin_id
        self.on_raised = on_raised

    def impls(self, name: str) -> list:
        # pluggy calls the last of get_hookimpls() first.
        return list(reversed(getattr(self.runtime.hook, name).get_hookimpls()))

    async def call(self, name: str, impl: pluggy.HookImpl, **arguments: Any) -> Any:
        """One impl; what it raised is logged, told to on_raised, and RAISED is returned."""
        try:
            return await call_plugin_code(impl.function, **{arg: arguments[arg] for arg in impl.argnames})
        except Exception as error:  # plugin code: logged and skipped (spec)
            log.warning("hookimpl.raised", plugin_id=self.plugin_id, hook=name, impl=impl.plugin_name,
                        error=f"{type(error).__name__}: {error}")
            if self.on_raised is not None:
                await self.on_raised(name, error)
            return RAISED

    def wrong_type(self, name: str, impl: pluggy.HookImpl, outcome: Any, expected: str) -> None:
        log.warning("hookimpl.wrong_return_type", plugin_id=self.plugin_id, hook=name, impl=impl.plugin_name,
                    returned=type(outcome).__name__, expected=expected)

    async def notify_all(self, name: str, **arguments: Any) -> None:
        for impl in self.impls(name):
            outcome = await self.call(name, impl, **arguments)
            if outcome is not None and outcome is not RAISED:
                self.wrong_type(name, impl, outcome, "None")

    async def first_text(self, name: str, **arguments: Any) -> str | None:
        """The first impl's answer that is a str (continue_prompt, run_model); None and a raise pass to the next
        impl, another type is logged and skipped."""
        for impl in self.impls(name):
            outcome = await self.call(name, impl, **arguments)
            if isinstance(outcome, str):
                return outcome
            if outcome is not None and outcome is not RAISED:
                self.wrong_type(name, impl, outcome, "str or None")
        return None

    async def merged_state(self, message: Envelope, session_id: str) -> TurnState:
        """Every load_state answer merged (the impl pluggy calls first wins a key); a non-dict is logged and skipped."""
        state: TurnState = {}
        for impl in reversed(self.impls("load_state")):
            outcome = await self.call("load_state", impl, message=message, session_id=session_id)
            if isinstance(outcome, dict):
                state.update(outcome)
            elif outcome is not None and outcome is not RAISED:
                self.wrong_type("load_state", impl, outcome, "dict")
        return state

    def provided(self, name: str, *, having: tuple[str, ...], expected: str) -> list[Any]:
        """A provide_* hook called once (at load): every answer with the methods `having`; one that raises is
        logged and skipped, one without them logged as the wrong type."""
        found = []
        for impl in self.impls(name):
            try:
                component = impl.function()
            except Exception as error:  # plugin code: logged and skipped (spec)
                log.warning("hookimpl.raised", plugin_id=self.plugin_id, hook=name, impl=impl.plugin_name,
                            error=f"{type(error).__name__}: {error}")
                continue
            if all(callable(getattr(component, method, None)) for method in having):
                found.append(component)
            elif component is not None:
                self.wrong_type(name, impl, component, expected)
        return found

    async def before_llm_call(self, request: LLMCallRequest, state: TurnState) -> tuple[LLMCallRequest, LLMCallDecision | None]:
        for impl in self.impls("before_llm_call"):
            outcome = await self.call("before_llm_call", impl, request=request, state=state)
            if outcome is None or outcome is RAISED:
                continue
            if isinstance(outcome, LLMCallDecision) and outcome.action == "finish" and isinstance(outcome.text, str):
                return request, outcome
            if isinstance(outcome, LLMCallRequest):
                request = outcome
                continue
            self.wrong_type("before_llm_call", impl, outcome, "LLMCallRequest, LLMCallDecision.finish(text) or None")
        return request, None

    async def after_llm_call(self, request: LLMCallRequest, result: LLMCallResult, state: TurnState) -> None:
        await self.notify_all("after_llm_call", request=request, result=result, state=state)

    async def before_tool_call(self, call: ToolCall, state: TurnState) -> tuple[ToolCall, ToolCallDecision]:
        for impl in self.impls("before_tool_call"):
            outcome = await self.call("before_tool_call", impl, call=call, state=state)
            if outcome is None or outcome is RAISED:
                continue
            if not isinstance(outcome, ToolCallDecision) or outcome.action not in ("proceed", "replace", "deny"):
                self.wrong_type("before_tool_call", impl, outcome, "ToolCallDecision or None")
                continue
            if outcome.action != "proceed":
                return call, outcome
            if outcome.arguments is not None:
                if not isinstance(outcome.arguments, dict):
                    self.wrong_type("before_tool_call", impl, outcome.arguments, "proceed(arguments: dict)")
                    continue
                call = dataclass_replace(call, arguments=outcome.arguments)
        return call, ToolCallDecision.proceed(call.arguments)

    async def after_tool_call(self, call: ToolCall, result: ToolCallResult, state: TurnState) -> None:
        await self.notify_all("after_tool_call", call=call, result=result, state=state)

    def subscribe(self, events: EventBus | None = None) -> EventBus:
        """The four hooks as handlers of LLMCallStarted/Finished and ToolCallStarted/Finished on `events` (a new bus without one)."""
        bus = events if events is not None else EventBus()

        async def llm_started(event: LLMCallStarted) -> None:
            event.request, event.decision = await self.before_llm_call(event.request, event.state)

        async def tool_started(event: ToolCallStarted) -> None:
            event.call, event.decision = await self.before_tool_call(event.call, event.state)

        async def llm_finished(event: LLMCallFinished) -> None:
            await self.after_llm_call(event.request, event.result, event.state)

        async def tool_finished(event: ToolCallFinished) -> None:
            await self.after_tool_call(event.call, event.result, event.state)

        for event_type, handler in ((LLMCallStarted, llm_started), (LLMCallFinished, llm_finished),
                                    (ToolCallStarted, tool_started), (ToolCallFinished, tool_finished)):
            bus.on(event_type, handler)
        return bus


class AgentComponents(TypedDict, total=False):
    store: TapeStore | AsyncTapeStore
    context: TapeContext
    sidecars: Sequence[TapeSidecar]


def hook_runtime(plugins: Iterable[object]) -> HookRuntime:
    """A pluggy manager of CovelHookSpecs with `plugins` registered; wrappers are refused (ValueError)."""
    runtime = pluggy.PluginManager(PROJECT)
    runtime.add_hookspecs(CovelHookSpecs)
    for index, plugin in enumerate(plugins):
        runtime.register(plugin, name=f"{index}:{type(plugin).__name__}")
    runtime.check_pending()
    wrappers = [f"{impl.plugin_name}.{name}" for name in HOOK_NAMES
                for impl in getattr(runtime.hook, name).get_hookimpls() if impl.hookwrapper or impl.wrapper]
    if wrappers:
        raise ValueError(f"{', '.join(wrappers)}: pluggy wrappers are not supported; use a plain @hookimpl (tryfirst/trylast)")
    return runtime


class AgentPlugins:
    """hookimpl objects around one agent: lifespans, tape components, the agent's event bus, turn state."""

    def __init__(self, framework: Any = None, *, plugins: Iterable[object] | None = None) -> None:
        self.framework = framework
        self.runtime = hook_runtime([*getattr(framework, "plugins", ()), *(plugins or ())])
        self.hooks = PluginAgentHooks(self.runtime)

    def _first(self, name: str, **arguments: Any) -> Any:
        """The first answer that is not None, in hook order."""
        return next((value for value in self._all(name, **arguments) if value is not None), None)

    def _all(self, name: str, **arguments: Any) -> list[Any]:
        values = []
        for impl in self.hooks.impls(name):
            try:
                values.append(impl.function(**{arg: arguments[arg] for arg in impl.argnames}))
            except Exception as error:  # plugin code: logged and skipped (spec)
                log.warning("hookimpl.raised", hook=name, impl=impl.plugin_name, error=f"{type(error).__name__}: {error}")
        return values

    def running(self) -> AbstractAsyncContextManager[AsyncExitStack]:
        """provide_lifespan of every plugin entered (in hook order), left in reverse when the block ends."""
        return _lifespans(self._all("provide_lifespan"))

    def components(self) -> AgentComponents:
        found: AgentComponents = {}
        store = self._first("provide_tape_store")
        if store is not None:
            found["store"] = store
        context = self._first("build_tape_context")
        if context is not None:
            found["context"] = context
        sidecars = [sidecar for sidecar in self._all("provide_tape_sidecar") if sidecar is not None]
        if sidecars:
            found["sidecars"] = sidecars
        return found

    def attach(self, agent: Any, *, tools: bool = True) -> Any:
        """The four hooks, continue_prompt, the steering inbox and system_prompt on `agent.events` (a new
        bus when it has none); with `tools`, provide_tools' tools added to `agent.tools` when it has a list."""
        bus = getattr(agent, "events", None)
        if bus is None:
            bus = EventBus()
            agent.events = bus
        self.hooks.subscribe(bus)
        bus.on(StepFinished, self._continue_prompt)
        bus.on(MessagesPending, self._steering)
        bus.on(SystemPrompt, self._system_prompt)
        if tools and isinstance(getattr(agent, "tools", None), list):
            agent.tools.extend(tool for offered in self._all("provide_tools") if isinstance(offered, list) for tool in offered)
        return agent

    async def _continue_prompt(self, event: StepFinished) -> None:
        if event.status != "continue":
            return
        text = await self.hooks.first_text("continue_prompt", prompt=event.prompt, tape=event.tape, state=event.state)
        if text is not None:
            event.next_prompt = text

    async def _steering(self, event: MessagesPending) -> None:
        for inbox in self._all("provide_steering_inbox"):
            if inbox is not None:
                drained = inbox.drain(event.session_id)
                event.messages.extend(await drained if inspect.isawaitable(drained) else drained)

    async def _system_prompt(self, event: SystemPrompt) -> None:
        for impl in self.hooks.impls("system_prompt"):
            outcome = await self.hooks.call("system_prompt", impl, prompt=event.prompt, state=event.state)
            if isinstance(outcome, str) and outcome.strip():
                event.parts.append(outcome.strip())
            elif outcome is not None and outcome is not RAISED and not isinstance(outcome, str):
                self.hooks.wrong_type("system_prompt", impl, outcome, "str")

    async def build_state(self, session_id: str, *, message: Envelope | None = None, agent: Any = None) -> TurnState:
        """load_state of every plugin merged (the impl pluggy calls first wins a key), with session_id (and agent)."""
        state: TurnState = await self.hooks.merged_state(message, session_id) if message is not None else {}
        state["session_id"] = session_id
        if agent is not None:
            state["agent"] = agent
        return state


@asynccontextmanager
async def _lifespans(lifespans: list[Any]) -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as stack:
        for lifespan in lifespans:
            await _enter(stack, lifespan)
        yield stack


async def _enter(stack: AsyncExitStack, lifespan: Any) -> None:
    """A context manager (sync or async), or a generator that yields once (sync or async)."""
    if lifespan is None:
        return
    if hasattr(lifespan, "__aenter__"):
        await stack.enter_async_context(lifespan)
    elif hasattr(lifespan, "__enter__"):
        stack.enter_context(lifespan)
    elif inspect.isasyncgen(lifespan):
        await lifespan.__anext__()
        stack.push_async_callback(_finish_async, lifespan)
    elif inspect.isgenerator(lifespan):
        next(lifespan)
        stack.callback(_finish_sync, lifespan)
    else:
        log.warning("hookimpl.wrong_return_type", hook="provide_lifespan", returned=type(lifespan).__name__,
                    expected="a context manager or a generator")


async def _finish_async(generator: Any) -> None:
    try:
        await generator.__anext__()
    except StopAsyncIteration:
        return


def _finish_sync(generator: Any) -> None:
    try:
        next(generator)
    except StopIteration:
        return
