"""gRPC surface of the hook dispatcher."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import grpc
import structlog

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.registry.v1 import registry_pb2_grpc
from covel.store.v1 import store_pb2_grpc
from services.hooks import admission
from services.hooks.catalogue_sync import CatalogueSync
from services.hooks.common.committed_turns import COMMITTED_TURNS
from services.hooks.common.hookspec_events import events_for
from services.hooks.dispatch_batches import Outcome
from services.hooks.dispatcher import ExecutionContext, dispatch
from services.hooks.event_keys import Audience, EventKeyBus, subscription_kind
from services.hooks.extension_host import call_extension, ordered_providers
from services.hooks.fault_breaker import FaultBreaker
from services.hooks.form_validators import validate_form
from services.hooks.hook_state import StoreState
from services.hooks.loaded_hookspecs import find_replacement, tell_tool_refused
from services.hooks.model_answers import model_answer_chunks
from services.hooks.observed_batches import observed_outcomes
from services.hooks.sandboxed_entries import WORKER_OPERATIONS
from services.hooks.settings import HooksSettings
from services.hooks.store_turns import StoreTurns
from services.hooks.tool_contexts import plugin_context, tool_response
from services.hooks.tool_host import action_tool, call_tool, service_tool
from shared.call_streams import ServedStream, StreamMethods
from shared.errors import invalid_argument, not_found, require, rpc
from shared.grpc_client import deadline_of, open_channel
from shared.grpc_server import RunningServer, start_server
from shared.hook_events import EVENTS_BY_NAME, HANDLER_FAULTS
from shared.hook_matches import match_to_proto
from shared.logs import get_logger
from shared.plugin_sdk.event_keys import EVENT_KEYS, KEY_PATTERN
from shared.plugin_sdk.registrar import PluginRegistrar, ToolRegistration
from shared.plugin_sdk.session_state import STATE_BACKEND
from shared.plugin_sdk.tools import tool_error, tool_ok
from shared.sandbox import SandboxSettings
from shared.sandbox.host import sandbox_pool
from shared.sandbox.operations import register_operations
from shared.structs import StructMap, from_struct, json_object_problem, to_json_bytes, to_struct, to_value
from shared.telemetry import metrics
from shared.telemetry.log_context import ids_of
from shared.telemetry.tracing import configure_tracing, traced

# One kind of registration of a plugin (its forms, its RPCs, ...).
R = TypeVar("R")
log = get_logger(component="hooks")


MAX_OBSERVED_EVENTS = 256
SERVICE = "covel.hooks.v1.HookDispatcher"


def _payload_of(request: hooks_pb2.DispatchRequest, where: str = "") -> dict[str, Any]:
    """The event's payload: its payload_json when sent (checked as a Struct would be), else its Struct."""
    if not request.payload_json:
        return from_struct(request.payload)
    payload, problem = json_object_problem(request.payload_json)
    if payload is None:
        raise invalid_argument(f"{where}payload_json", problem)
    return payload


def _unary_timeout_s(kind: str, request: Any) -> float | None:
    """A TurnHooks call that names no timeout has its unary method's deadline (shared/grpc_client.py)."""
    if kind == "extension":
        return (request.timeout_ms or 30_000) / 1000 + 10
    return deadline_of(SERVICE, "Dispatch" if kind == "dispatch" else "DispatchObserved").seconds


def _check_dispatch(request: hooks_pb2.DispatchRequest, where: str = "") -> None:
    if request.event not in EVENTS_BY_NAME:
        raise invalid_argument(f"{where}event", f"unknown hook event {request.event!r}; one of {', '.join(EVENTS_BY_NAME)}")
    if not request.context.session_id:
        raise invalid_argument(f"{where}context.session_id", "is required")


class HookDispatcherService(hooks_pb2_grpc.HookDispatcherServicer):
    def __init__(self, sync: CatalogueSync, breaker: FaultBreaker, state: StoreState, turns: StoreTurns | None = None) -> None:
        self._sync = sync
        self._breaker = breaker
        self._state = state
        # provide_tape_store's fill of a new tape (tape_mirror.py): the store's committed turns.
        self._turns = turns
        self.event_bus = EventKeyBus()
        self._turn_calls = StreamMethods("TurnHooks", {
            "dispatch": lambda request, _: self._dispatch(request),
            "observed": lambda request, _: self._observed(request),
            "extension": lambda request, _: self._extension(request),
        }, hooks_pb2.TurnHooksResponse, _unary_timeout_s)

    @rpc
    async def Dispatch(self, request: hooks_pb2.DispatchRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.DispatchResponse:
        return await self._dispatch(request)

    @rpc
    async def DispatchObserved(self, request: hooks_pb2.DispatchObservedRequest,
                               context: grpc.aio.ServicerContext) -> hooks_pb2.DispatchObservedResponse:
        return await self._observed(request)

    @rpc
    async def TurnHooks(self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[hooks_pb2.TurnHooksResponse]:
        """A turn's Dispatch, DispatchObserved and CallExtension calls on one stream, each answered by its id (shared/call_streams.py)."""
        async for answer in ServedStream(self._turn_calls).serve(requests):
            yield answer

    async def _observed(self, request: hooks_pb2.DispatchObservedRequest) -> hooks_pb2.DispatchObservedResponse:
        if len(request.events) > MAX_OBSERVED_EVENTS:
            raise invalid_argument("events", f"holds {len(request.events)} events; send at most {MAX_OBSERVED_EVENTS} at once")
        for index, event in enumerate(request.events):
            _check_dispatch(event, f"events[{index}].")  # all of them before any runs
        for event in request.events:
            await self._sync.load_approved(event.context.approved_plugin_ids)
        STATE_BACKEND.set(self._state)  # ctx.state of this RPC's handlers (its own task's context)
        items = [(event.event, self._execution(event.context), _payload_of(event, f"events[{index}].")) for index, event in enumerate(request.events)]
        # A plugin's watchers of these events run first, in one round trip to its worker (observed_batches.py).
        prefetched = await observed_outcomes(self._sync.current.table, items)
        trace: list[common_pb2.HookTraceEntry] = []
        for event, (_, execution, payload), outcomes in zip(request.events, items, prefetched, strict=True):
            with structlog.contextvars.bound_contextvars(**ids_of(event)):  # each event's ids on its log lines
                trace.extend((await self._dispatch(event, execution, payload, outcomes)).trace)
        return hooks_pb2.DispatchObservedResponse(trace=trace)

    def _execution(self, ctx: hooks_pb2.HookContext) -> ExecutionContext:
        paused = self._breaker.excluded(ctx)
        return ExecutionContext(
            session_id=ctx.session_id,
            turn_id=ctx.turn_id,
            locale=ctx.locale or "en",
            active_plugin_ids=tuple(plugin for plugin in ctx.active_plugin_ids if plugin not in paused),
            approved_plugin_ids=frozenset(ctx.approved_plugin_ids),
            plugin_id=ctx.plugin_id or None,
            runtime_id=ctx.runtime_id or None,
            logical_turn=ctx.logical_turn or None,
            plugin_settings=StructMap(ctx.plugin_settings),  # each plugin's converted when its handler reads it
            execution_id=ctx.execution_id, root_execution_id=ctx.root_execution_id,
            subagent_call_id=ctx.subagent_call_id, parent_runtime_id=ctx.parent_runtime_id,
        )

    @traced("covel.hooks.dispatch", lambda self, request, *rest: {"covel.hook.event": request.event, "covel.turn_id": request.context.turn_id})
    async def _dispatch(self, request: hooks_pb2.DispatchRequest, execution: ExecutionContext | None = None,
                        payload: dict[str, Any] | None = None, prefetched: dict[int, Outcome] | None = None,
                        ) -> hooks_pb2.DispatchResponse:
        if execution is None:
            _check_dispatch(request)
            await self._sync.load_approved(request.context.approved_plugin_ids)
            STATE_BACKEND.set(self._state)  # ctx.state of this RPC's handlers (its own task's context)
            execution = self._execution(request.context)
        ctx = request.context
        running = dispatch(self._sync.current.table, request.event, execution,
                           _payload_of(request) if payload is None else payload, prefetched)
        if EVENTS_BY_NAME[request.event].cancelled_with_execution:
            result = await running
        else:
            # These events' handlers are not cancelled with the execution (their signal fires on timeout only).
            result = await asyncio.shield(running)
        if result.aborted and request.event == "PreToolUse":
            # Hookspec plugins' after_tool_call hears of refused calls too (spec: python-hookspecs).
            await tell_tool_refused(self._sync.current.load_result.loaded, self._sync.current.table, execution,
                                    result.payload, result.reason)
        trace = result.trace
        metrics.record_hook_trace(trace)
        await self._breaker.record(ctx, trace)
        for entry in trace:
            if entry.status in HANDLER_FAULTS:
                # session_id and turn_id come bound from the request (shared/telemetry/log_context.py).
                log.warning("hook.handler_failed", hook_event=entry.event, plugin_id=entry.handler_plugin_id,
                            status=entry.status, message=entry.message)
        return hooks_pb2.DispatchResponse(
            outcome=hooks_pb2.OUTCOME_ABORT if result.aborted else hooks_pb2.OUTCOME_CONTINUE,
            reason=result.reason,
            **({"payload_json": to_json_bytes(result.payload)} if request.payload_json else {"payload": to_struct(result.payload)}),
            trace=[common_pb2.HookTraceEntry(event=entry.event, handler_plugin_id=entry.handler_plugin_id, status=entry.status,
                                             message=entry.message, duration_us=entry.duration_us, runtime_id=ctx.runtime_id)
                   for entry in trace],
        )

    @rpc
    async def AdmitMessage(self, request: hooks_pb2.AdmitMessageRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.AdmitMessageResponse:
        """A submit meeting the session's running turn: the first admit_message decision of its plugins (admission.py)."""
        require(request.context.session_id, "context.session_id", "the session the message was submitted to")
        require(request.turn_id, "turn_id", "the session's running turn")
        if request.step < 0 or request.pending < 0:
            raise invalid_argument("step" if request.step < 0 else "pending", "must be 0 or more")
        ctx = request.context
        await self._sync.load_approved(ctx.approved_plugin_ids)
        asked = admission.asked_in_order(self._sync.current.load_result.loaded, list(ctx.active_plugin_ids),
                                         set(ctx.approved_plugin_ids), self._breaker.excluded(ctx))
        message = {**from_struct(request.message), "session_id": ctx.session_id}
        decided = await admission.admit(asked, ctx.session_id, message,
                                        {"turn_id": request.turn_id, "step": request.step, "pending": request.pending})
        return hooks_pb2.AdmitMessageResponse(action=decided.action, reason=decided.reason, plugin_id=decided.plugin_id)

    @rpc
    async def StreamModelAnswer(self, request: hooks_pb2.StreamModelAnswerRequest,
                                context: grpc.aio.ServicerContext) -> AsyncIterator[hooks_pb2.StreamModelAnswerChunk]:
        """The pieces of a run_model_stream answer PreLLMCall's replace.responseStream names, as they come (model_answers.py)."""
        async for chunk in model_answer_chunks(self._sync.current.load_result.loaded, request):
            yield chunk

    @rpc
    async def GetSubscriptions(
        self, request: hooks_pb2.GetSubscriptionsRequest, context: grpc.aio.ServicerContext
    ) -> hooks_pb2.GetSubscriptionsResponse:
        return self._subscriptions()

    @rpc
    async def Reload(self, request: hooks_pb2.ReloadRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.ReloadResponse:
        loaded = await self._sync.reload()
        return hooks_pb2.ReloadResponse(generation=loaded.generation)

    @rpc
    async def LoadApprovedPlugins(self, request: hooks_pb2.LoadApprovedPluginsRequest,
                                  context: grpc.aio.ServicerContext) -> hooks_pb2.LoadApprovedPluginsResponse:
        """A session approved these plugins: their entry modules load now, not at its first call (catalogue_sync.py)."""
        loaded = await self._sync.load_approved(request.plugin_ids)
        errors = self._subscriptions().load_errors
        return hooks_pb2.LoadApprovedPluginsResponse(generation=self._sync.current.generation, loaded=loaded,
                                                     load_errors=[e for e in errors if e.plugin_id in request.plugin_ids])

    @rpc
    async def ListPausedPlugins(
        self, request: hooks_pb2.ListPausedPluginsRequest, context: grpc.aio.ServicerContext
    ) -> hooks_pb2.ListPausedPluginsResponse:
        require(request.session_id, "session_id", "the session to look at")
        return hooks_pb2.ListPausedPluginsResponse(plugins=await self._breaker.paused(request.session_id))

    @rpc
    async def ResetPluginFaults(
        self, request: hooks_pb2.ResetPluginFaultsRequest, context: grpc.aio.ServicerContext
    ) -> hooks_pb2.ResetPluginFaultsResponse:
        require(request.session_id, "session_id", "the session the plugin is paused in")
        require(request.plugin_id, "plugin_id", "the paused plugin")
        return hooks_pb2.ResetPluginFaultsResponse(was_paused=await self._breaker.reset(request.session_id, request.plugin_id))

    @rpc
    async def ListTools(self, request: hooks_pb2.ListToolsRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.ListToolsResponse:
        wanted = set(request.plugin_ids)
        loaded = self._sync.current
        tools = [
            hooks_pb2.ToolInfo(
                plugin_id=tool.plugin_id, name=tool.name, description=tool.description,
                parameters=to_struct(tool.parameters), read_only=tool.read_only,
            )
            for plugin in loaded.load_result.loaded
            if not wanted or plugin.entry.plugin_id in wanted
            for tool in plugin.registrar.tools
        ]
        return hooks_pb2.ListToolsResponse(tools=tools, generation=loaded.generation)

    @rpc
    async def CallTool(self, request: hooks_pb2.CallToolRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.CallToolResponse:
        require(request.context.session_id, "context.session_id", "the execution's session")
        require(request.plugin_id, "plugin_id", "the plugin that registered the tool")
        require(request.name, "name", "the tool's name")
        await self._sync.load_approved(request.context.approved_plugin_ids)
        found = self._tool(request.plugin_id, request.name)
        if found is None:
            raise not_found(f"plugin {request.plugin_id!r} registers no tool {request.name!r}", "covel.hooks.v1.Tool",
                            f"{request.plugin_id}/{request.name}", reason="TOOL_NOT_FOUND")
        tool, source = found
        ctx = request.context
        if source == "community" and request.plugin_id not in ctx.approved_plugin_ids:
            refused = tool_error("unavailable", f"plugin {request.plugin_id} is not approved to run server code in this session",
                                 "the player approves it with SetPluginApprovals")
            return hooks_pb2.CallToolResponse(result=json.dumps(refused), ok=False)
        tool_context = plugin_context(ctx, request.plugin_id, request.plugin_data, request=request,
                                      random_key=f"{ctx.runtime_id}:{request.plugin_id}/{request.name}:{request.call_id}")
        replaced = await find_replacement(self._sync.current.load_result.loaded, ctx, request.call_id, request.name, request.arguments)
        # A hookspec's ToolCallDecision.replace(result) answers for the tool: it does not run.
        result = await call_tool(tool, tool_context, request.arguments) if replaced is None else tool_ok(replaced[0])
        return tool_response(result, tool_context)

    @rpc
    async def CallService(self, request: hooks_pb2.CallServiceRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.CallToolResponse:
        require(request.context.session_id, "context.session_id", "the execution's session")
        require(request.contract, "contract", "the service contract, e.g. notes.search@1")
        ctx = request.context
        await self._sync.load_approved(ctx.approved_plugin_ids)
        active = set(ctx.active_plugin_ids)
        providers = [
            (service, plugin.entry.source)
            for plugin in self._sync.current.load_result.loaded if plugin.entry.plugin_id in active
            for service in plugin.registrar.services if service.contract == request.contract
        ]
        if not providers:
            refused = tool_error("not-found", f"no active plugin of this session provides the service {request.contract}")
            return hooks_pb2.CallToolResponse(result=json.dumps(refused), ok=False)
        if len(providers) > 1:
            names = ", ".join(sorted(service.plugin_id for service, _ in providers))
            refused = tool_error("ambiguous", f"several active plugins provide {request.contract}: {names}")
            return hooks_pb2.CallToolResponse(result=json.dumps(refused), ok=False)
        service, source = providers[0]
        if source == "community" and service.plugin_id not in ctx.approved_plugin_ids:
            refused = tool_error("unavailable", f"plugin {service.plugin_id} is not approved to run server code in this session",
                                 "the player approves it with SetPluginApprovals")
            return hooks_pb2.CallToolResponse(result=json.dumps(refused), ok=False)
        service_context = plugin_context(ctx, service.plugin_id, request.plugin_data)
        result = await call_tool(service_tool(service), service_context, request.arguments or "{}")
        if service.access == "read":
            # A read service changes nothing: whatever it proposed is dropped.
            service_context.proposals.clear()
        return tool_response(result, service_context)

    def _registration(self, ctx: hooks_pb2.HookContext, plugin_id: str, registrations: Callable[[PluginRegistrar], Sequence[R]],
                      wanted: Callable[[R], bool]) -> tuple[R, bool] | tuple[None, bool]:
        """One registration of an active plugin of the session (None when there is none), and whether its code may run
        (a community plugin's only once the player approved it)."""
        for plugin in self._sync.current.load_result.loaded:
            if plugin.entry.plugin_id != plugin_id or plugin_id not in ctx.active_plugin_ids:
                continue
            found = next((item for item in registrations(plugin.registrar) if wanted(item)), None)
            approved = plugin.entry.source != "community" or plugin_id in ctx.approved_plugin_ids
            return (None, approved) if found is None else (found, approved)
        return None, False

    @rpc
    async def ValidateForm(self, request: hooks_pb2.ValidateFormRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.ValidateFormResponse:
        require(request.context.session_id, "context.session_id", "the execution's session")
        require(request.plugin_id, "plugin_id", "the plugin whose form was answered")
        require(request.form_id, "form_id", "the form's id (Interaction.form_id)")
        ctx = request.context
        await self._sync.load_approved(ctx.approved_plugin_ids)
        form, approved = self._registration(ctx, request.plugin_id, lambda registrar: registrar.forms, lambda f: f.form_id == request.form_id)
        if form is None:
            return hooks_pb2.ValidateFormResponse(found=False)
        if not approved:
            return hooks_pb2.ValidateFormResponse(found=True, error=f"plugin {form.plugin_id} is not approved to run server code in this session")
        return await validate_form(form, plugin_context(ctx, form.plugin_id), from_struct(request.values))

    @rpc
    async def CallAction(self, request: hooks_pb2.CallActionRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.CallToolResponse:
        require(request.context.session_id, "context.session_id", "the execution's session")
        require(request.plugin_id, "plugin_id", "the plugin whose action to call")
        require(request.action, "action", "an action the plugin registered with covel.register_rpc")
        ctx = request.context
        await self._sync.load_approved(ctx.approved_plugin_ids)
        action, approved = self._registration(ctx, request.plugin_id, lambda registrar: registrar.rpcs, lambda r: r.action == request.action)
        if action is None:
            refused = tool_error("not-found", f"plugin {request.plugin_id} has no action {request.action!r} running in this session")
            return hooks_pb2.CallToolResponse(result=json.dumps(refused), ok=False)
        if not approved:
            refused = tool_error("unavailable", f"plugin {action.plugin_id} is not approved to run server code in this session",
                                 "the player approves it with SetPluginApprovals")
            return hooks_pb2.CallToolResponse(result=json.dumps(refused), ok=False)
        action_context = plugin_context(ctx, action.plugin_id, request=request, random_key=f"{action.plugin_id}/action:{request.action}")
        result = await call_tool(action_tool(action), action_context, request.payload or "{}")
        return tool_response(result, action_context)

    @rpc
    async def EmitEvent(self, request: hooks_pb2.EmitEventRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.EmitEventResponse:
        if not KEY_PATTERN.match(request.key):
            raise invalid_argument("key", f"{request.key!r} is not an event key; write lowercase words joined by `:`, e.g. command:new")
        if request.wait_budget_ms < 0:
            raise invalid_argument("wait_budget_ms", "0 (wait for every handler) or a positive number of milliseconds")
        audience = Audience()
        STATE_BACKEND.set(self._state)  # the session's ctx.state for handlers that read it (turn_share.py)
        COMMITTED_TURNS.set(self._turns)  # the session's committed turns for a tape mirror (tape_mirror.py)
        if request.HasField("session"):
            require(request.session.session_id, "session.session_id", "the session the event is about, or leave session unset")
            await self._sync.load_approved(request.session.approved_plugin_ids)
            audience = Audience(request.session.session_id, frozenset(request.session.active_plugin_ids),
                                frozenset(request.session.approved_plugin_ids))
        emission = await self.event_bus.emit(
            self._sync.current.event_keys, request.key, audience, from_struct(request.context),
            budget_s=request.wait_budget_ms / 1000 if request.wait_budget_ms else None,
        )
        return hooks_pb2.EmitEventResponse(
            completed=emission.completed,
            context=to_struct(emission.context),
            handler_count=emission.handler_count,
            trace=[
                common_pb2.HookTraceEntry(event=entry.key, handler_plugin_id=entry.handler_plugin_id, status=entry.status,
                                          message=entry.message, duration_us=entry.duration_us)
                for entry in list(emission.trace)
            ],
        )

    @rpc
    async def ListEventKeys(self, request: hooks_pb2.ListEventKeysRequest, context: grpc.aio.ServicerContext) -> hooks_pb2.ListEventKeysResponse:
        loaded = self._sync.current
        return hooks_pb2.ListEventKeysResponse(
            keys=[
                hooks_pb2.EventKeyInfo(key=key.key, family=key.family, delivery=key.delivery.value, budget_ms=key.budget_ms,
                                       fired_at=key.fired_at, required_context=key.required, optional_context=key.optional)
                for key in EVENT_KEYS
            ],
            subscriptions=[
                hooks_pb2.EventKeySubscription(plugin_id=r.plugin_id, key=r.key, kind=subscription_kind(r.key),
                                               warning=r.warning or "", timeout_ms=r.timeout_ms)
                for r in loaded.event_keys.registrations
            ],
            hookspec_plugins=[
                hooks_pb2.HookspecPlugin(plugin_id=plugin.entry.plugin_id, hooks=sorted(plugin.hookspecs.implemented()),
                                         events=events_for(plugin.hookspecs.implemented()))
                for plugin in loaded.load_result.loaded if plugin.hookspecs is not None
            ],
            generation=loaded.generation,
        )

    @rpc
    async def CallExtension(
        self, request: hooks_pb2.CallExtensionRequest, context: grpc.aio.ServicerContext
    ) -> hooks_pb2.CallExtensionResponse:
        return await self._extension(request)

    async def _extension(self, request: hooks_pb2.CallExtensionRequest) -> hooks_pb2.CallExtensionResponse:
        require(request.context.session_id, "context.session_id", "the execution's session")
        require(request.point, "point", "the extension point, e.g. history.compact@2")
        ctx = request.context
        await self._sync.load_approved(ctx.approved_plugin_ids)
        active = set(ctx.active_plugin_ids)
        providers = ordered_providers([
            extension
            for plugin in self._sync.current.load_result.loaded
            if plugin.entry.plugin_id in active and (not request.plugin_id or plugin.entry.plugin_id == request.plugin_id)
            # Community server code runs only once the player approved it.
            and (plugin.entry.source != "community" or plugin.entry.plugin_id in ctx.approved_plugin_ids)
            for extension in plugin.registrar.extensions if extension.point == request.point
        ])
        payload = from_struct(request.input)
        answers = []
        for extension in providers:
            provider_context = plugin_context(ctx, extension.plugin_id)
            answer = await call_extension(extension, provider_context, payload, (request.timeout_ms or 30_000) / 1000)
            answers.append(hooks_pb2.ExtensionAnswer(
                plugin_id=answer.plugin_id, id=answer.id, ok=answer.ok, output=to_value(answer.output) if answer.ok else None,
                error=answer.error, duration_us=answer.duration_us))
        return hooks_pb2.CallExtensionResponse(answers=answers)

    def _tool(self, plugin_id: str, name: str) -> tuple[ToolRegistration, str] | None:
        """(registration, package source) of a plugin's tool, or None."""
        for plugin in self._sync.current.load_result.loaded:
            if plugin.entry.plugin_id == plugin_id:
                tool = next((tool for tool in plugin.registrar.tools if tool.name == name), None)
                return (tool, plugin.entry.source) if tool is not None else None
        return None

    def _subscriptions(self) -> hooks_pb2.GetSubscriptionsResponse:
        loaded = self._sync.current
        matched, observers = loaded.table.matched(), loaded.table.observers()
        return hooks_pb2.GetSubscriptionsResponse(
            subscriptions=[
                hooks_pb2.Subscription(event=event, plugin_ids=plugin_ids, observers=observers.get(event, []), matched=[
                    hooks_pb2.PluginMatches(plugin_id=plugin_id, matches=[match_to_proto(match) for match in matches])
                    for plugin_id, matches in matched.get(event, {}).items()
                ])
                for event, plugin_ids in loaded.table.subscribers().items()
            ],
            generation=loaded.generation,
            load_errors=[
                common_pb2.Diagnostic(
                    severity=common_pb2.SEVERITY_ERROR,
                    code="entry-load-failed",
                    message=message,
                    plugin_id=plugin_id,
                    file="server/index.py",
                )
                for plugin_id, message in loaded.load_result.errors.items()
            ],
            admitting_plugin_ids=admission.admitting_plugins(loaded.load_result.loaded),
        )


async def start(settings: HooksSettings, sandbox: SandboxSettings | None = None) -> RunningServer:
    """The hooks service; plugin code in sandbox workers as `sandbox` (else COVEL_SANDBOX_*) says."""
    # Before the registry channel opens, so it carries the trace context.
    configure_tracing("hooks", settings)
    registry_channel = open_channel(settings.registry_addr, security=settings)
    # The fault breaker's counts live in the store, shared by every hooks replica (fault_breaker.py).
    store_channel = open_channel(settings.store_addr, security=settings)
    pool = sandbox_pool("hooks", settings.log_level, settings.log_format, sandbox)
    if pool is not None:
        # What this service's workers serve: registered before the zygote starts, so it preloads them.
        register_operations(WORKER_OPERATIONS)
        # The sandbox's zygote starts while the registry may still be coming up.
        pool.prewarm()
    sync = CatalogueSync(registry_pb2_grpc.PluginRegistryStub(registry_channel), pool)
    await sync.reload_when_registry_is_up(settings.hooks_registry_wait_s)
    store = store_pb2_grpc.TransactionalStoreStub(store_channel)
    service = HookDispatcherService(sync, FaultBreaker(store, settings.hooks_fault_threshold, settings.hooks_fault_window_s),
                                    StoreState(store), StoreTurns(store))

    def add(server: grpc.aio.Server) -> list[str]:
        hooks_pb2_grpc.add_HookDispatcherServicer_to_server(service, server)
        return [hooks_pb2.DESCRIPTOR.services_by_name["HookDispatcher"].full_name]

    running = await start_server(settings.hooks_addr, add, settings=settings, service="hooks")
    # Event-key handlers still running (past a budget or their timeout) finish before the process exits.
    # Not bounded by the stop's budget: the spec joins the hook work before shared state closes.
    running.on_stopped.append(service.event_bus.join)
    following = asyncio.create_task(sync.follow_registry(), name="hooks-follow-registry")

    async def stop_following() -> None:
        following.cancel()
        await asyncio.gather(following, return_exceptions=True)

    running.on_stopped.append(stop_following)
    # provide_lifespan: the plugins' lifespans are left (bounded) before their workers stop (services/hooks/plugin_side/lifespans.py).
    running.on_stopped.append(sync.leave_lifespans)
    running.on_stopped.append(registry_channel.close)
    running.on_stopped.append(store_channel.close)
    if pool is not None:
        running.on_stopped.append(pool.close)
    return running


