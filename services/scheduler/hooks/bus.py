"""Dispatch hook events, costing no RPC for an event no active plugin listens to, or whose listeners' declarative
matches all refuse it."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2
from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from covel.store.v1 import store_pb2
from services.scheduler import outages
from services.scheduler.hooks.held_events import HeldEvents
from services.scheduler.hooks.payloads import HookPayload, PostStateCommit, TurnStop
from services.scheduler.session_views import session_view
from shared.call_streams import TurnCallStreams
from shared.grpc_client import deadline_of
from shared.hook_matches import match_from_proto
from shared.logs import get_logger
from shared.plugin_sdk.hook_match import DeclarativeMatch, MatchError
from shared.structs import from_struct, json_object, to_json_bytes, to_struct

if TYPE_CHECKING:
    from services.scheduler.hooks.event_keys import SchedulerEventKeys

log = get_logger(component="hook_bus")
SERVICE = "covel.hooks.v1.HookDispatcher"

# Refresh the subscription table at most this often (it changes only on plugin reload).
SUBSCRIPTIONS_TTL_S = 5.0
# Events an observer-only handler may receive later in the turn: those of its stages, before TurnStop flushes them.
DEFERRABLE = frozenset({"TurnStart", "PreCompaction", "PostCompaction", "PreSchedule", "PreRuntime", "PostContextAssembly", "PreStep",
                        "PreLLMCall", "PostLLMResponse", "PostRuntime", "PreToolUse", "PostToolUse"})


@dataclass
class Listeners:
    """Who handles one event: plugins that take every payload, and plugins that take only what one of
    their handlers' declarative matches accepts (hooks.proto Subscription.matched)."""

    always: frozenset[str] = frozenset()
    matched: dict[str, tuple[DeclarativeMatch, ...]] = field(default_factory=dict)
    # Plugins whose every handler of the event only observes (observe=True).
    observers: frozenset[str] = frozenset()

    @classmethod
    def from_proto(cls, subscription: hooks_pb2.Subscription) -> Listeners:
        matched = {}
        for plugin in subscription.matched:
            try:
                matched[plugin.plugin_id] = tuple(match_from_proto(match) for match in plugin.matches)
            except MatchError:
                continue  # a match this scheduler cannot read: the plugin gets every payload
        return cls(frozenset(subscription.plugin_ids) - matched.keys(), matched, frozenset(subscription.observers))

    def takers(self, scope: ExecutionScope, payload: dict[str, Any], plugin_id: str, runtime_id: str) -> list[str]:
        """The plugins active in the session that would run a handler for this payload."""
        active = scope.session.active_plugins
        found = [listener for listener in self.always if listener in active]
        context = None
        for listener, matches in self.matched.items():
            if listener in active:
                context = context or {"plugin_id": plugin_id, "runtime_id": runtime_id, "locale": scope.session.locale}
                if any(match.accepts(payload, context) for match in matches):
                    found.append(listener)
        return found


NO_LISTENERS = Listeners()


@dataclass
class HookOutcome:
    """What one dispatch came to: whether a handler aborted (and why), the payload as the handlers left it (the sent
    one with their replace; hooks/replies.py reads each event's), the handlers' trace and the payload as it was sent."""

    aborted: bool
    reason: str
    payload: dict[str, Any]
    trace: list[common_pb2.HookTraceEntry] = field(default_factory=list)
    sent: dict[str, Any] = field(kw_only=True)


@dataclass
class ExecutionScope:
    """The parts of the hook context fixed for one execution."""

    session: store_pb2.Session
    turn_id: str
    logical_turn: int
    # Which execution of a runtime the hooks are told of (hooks.proto HookContext): set by execution().
    execution_id: str = ""
    root_execution_id: str = ""
    subagent_call_id: str = ""
    parent_runtime_id: str = ""
    # The session's player messages with this turn's own: a tool's or action's context.turn_number.
    turn_number: int = 0

    def execution(self, execution_id: str, *, subagent_call_id: str = "", parent_runtime_id: str = "") -> ExecutionScope:
        """This scope for one execution of a runtime: a run the turn scheduled (from the turn's scope,
        it becomes the root), or a nested or subagent run started within one (the root is kept)."""
        return dataclasses.replace(self, execution_id=execution_id, root_execution_id=self.root_execution_id or execution_id,
                                   subagent_call_id=subagent_call_id, parent_runtime_id=parent_runtime_id)

    def context(self, plugin_id: str = "", runtime_id: str = "") -> hooks_pb2.HookContext:
        context = hooks_pb2.HookContext()
        context.CopyFrom(self._context)  # one copy, not the session's lists and settings built again each call
        context.plugin_id, context.runtime_id = plugin_id, runtime_id
        return context

    @functools.cached_property
    def _context(self) -> hooks_pb2.HookContext:
        """What every call of this execution tells the hooks service, but for the calling plugin and runtime."""
        return hooks_pb2.HookContext(
            session_id=self.session.id,
            turn_id=self.turn_id,
            locale=self.session.locale,
            active_plugin_ids=list(self.session.active_plugins),
            approved_plugin_ids=list(self.session.approved_plugins),
            plugin_settings=dict(self.session.plugin_settings),
            logical_turn=self.logical_turn,
            execution_id=self.execution_id,
            root_execution_id=self.root_execution_id,
            subagent_call_id=self.subagent_call_id,
            parent_runtime_id=self.parent_runtime_id,
            turn_number=self.turn_number,
            paused_plugin_ids=[pause.plugin_id for pause in self.session.paused_plugins],
        )


class HookBus:
    def __init__(self, hooks: hooks_pb2_grpc.HookDispatcherStub, events: SchedulerEventKeys | None = None) -> None:
        self._hooks = hooks
        # The gateway event keys (hooks/event_keys.py), carried to context assembly and compaction.
        self.events = events
        self._listeners: dict[str, Listeners] = {}
        # Plugins implementing the admit_message hookspec (GetSubscriptions' admitting_plugin_ids).
        self._admitting: frozenset[str] = frozenset()
        self._fetched_at = 0.0
        self._lock = asyncio.Lock()
        self._tools: dict[str, tuple[float, dict]] = {}
        self._read_only: dict[str, set[str]] = {}
        # Events sent together: a turn's held ones with its TurnStop, its PostStateCommit events (held_events.py).
        self._held = HeldEvents(self._observed)
        # The running turns' hook calls, each turn's on its TurnHooks stream (begin_turn .. end_turn; shared/call_streams.py).
        self._turns = TurnCallStreams(lambda: self._hooks.TurnHooks(), hooks_pb2.TurnHooksRequest)
        # Approved plugins this scheduler last asked its hooks service to load, and when (ensure_loaded).
        self._asked_to_load: dict[str, float] = {}

    async def _subscriptions(self) -> dict[str, Listeners]:
        if time.monotonic() - self._fetched_at > SUBSCRIPTIONS_TTL_S:
            async with self._lock:
                if time.monotonic() - self._fetched_at > SUBSCRIPTIONS_TTL_S:
                    reply = await self._hooks.GetSubscriptions(hooks_pb2.GetSubscriptionsRequest())
                    self._listeners = {sub.event: Listeners.from_proto(sub) for sub in reply.subscriptions}
                    self._admitting = frozenset(reply.admitting_plugin_ids)
                    self._fetched_at = time.monotonic()
        return self._listeners

    async def admitting_plugins(self) -> frozenset[str]:
        """The plugins that implement admit_message (any session's): none, and a submit never asks AdmitMessage."""
        await self._subscriptions()
        return self._admitting

    async def admit_message(self, context: hooks_pb2.HookContext, message: dict[str, Any], turn_id: str, *, step: int = 0,
                            pending: int = 0, timeout_s: float) -> hooks_pb2.AdmitMessageResponse:
        """The session's plugins' admit_message decision for a message submitted while `turn_id` runs."""
        return await self._hooks.AdmitMessage(
            hooks_pb2.AdmitMessageRequest(context=context, message=to_struct(message), turn_id=turn_id, step=step, pending=pending),
            timeout=timeout_s)

    def refresh(self) -> None:
        self._fetched_at = 0.0
        self._tools = {}

    async def load_approved(self, plugin_ids: list[str]) -> None:
        """A session approved these plugins: the hooks service loads the community ones' code now (once), and the
        subscription table (and the event keys') is read afresh, so the session's next hook event reaches them.
        A hooks service that cannot be reached loads them at the first call naming them (services/hooks/catalogue_sync.py)."""
        if not plugin_ids:
            return
        try:
            reply = await self._hooks.LoadApprovedPlugins(hooks_pb2.LoadApprovedPluginsRequest(plugin_ids=plugin_ids))
        except grpc.aio.AioRpcError as error:
            log.warning("hooks.approved_load_failed", plugins=plugin_ids, code=error.code().name, details=error.details())
            return
        for diagnostic in reply.load_errors:
            log.warning("hooks.approved_plugin_failed", plugin_id=diagnostic.plugin_id, message=diagnostic.message)
        if reply.loaded:
            self.refresh()
            if self.events is not None:
                self.events.refresh()

    async def ensure_loaded(self, session: store_pb2.Session) -> None:
        """The session's approved plugins are loaded on this scheduler's hooks service before its turn dispatches: another
        replica, or a hooks service that restarted, loads them here (at most once a subscription period per plugin)."""
        now = time.monotonic()
        wanted = [plugin for plugin in session.approved_plugins if plugin in session.active_plugins
                  and now - self._asked_to_load.get(plugin, -SUBSCRIPTIONS_TTL_S) >= SUBSCRIPTIONS_TTL_S]
        if wanted:
            self._asked_to_load.update(dict.fromkeys(wanted, now))
            await self.load_approved(wanted)

    async def tools(self, plugin_id: str) -> dict[str, gateway_pb2.ToolDefinition]:
        """The tools a plugin's entry module registered, as the model is offered them (cached)."""
        cached = self._tools.get(plugin_id)
        if cached is not None and time.monotonic() - cached[0] < SUBSCRIPTIONS_TTL_S:
            return cached[1]
        reply = await self._hooks.ListTools(hooks_pb2.ListToolsRequest(plugin_ids=[plugin_id]))
        tools = {
            tool.name: gateway_pb2.ToolDefinition(name=tool.name, description=tool.description, parameters=tool.parameters)
            for tool in reply.tools
        }
        self._tools[plugin_id] = (time.monotonic(), tools)
        self._read_only[plugin_id] = {tool.name for tool in reply.tools if tool.read_only}
        return tools

    def read_only(self, plugin_id: str, name: str) -> bool:
        """Whether the tool is annotated readOnly (known once tools() was asked for the plugin)."""
        return name in self._read_only.get(plugin_id, set())

    async def flush_observed(self, scope: ExecutionScope) -> list[common_pb2.HookTraceEntry]:
        """Send the turn's gathered observer-only events (one DispatchObserved call); their handlers' trace."""
        await self._held.settled(scope.session.id)
        return await self._held.send_with(scope.turn_id)

    def begin_turn(self, turn_id: str) -> None:
        """The turn's Dispatch, DispatchObserved and CallExtension calls go on one TurnHooks stream until end_turn (opened
        at its first call)."""
        self._turns.begin(turn_id)

    def end_turn(self, turn_id: str) -> None:
        """The turn is over: its stream closes, and a turn cancelled or failed midway tells its watchers nothing more."""
        self._held.drop(turn_id)
        self._turns.end(turn_id)

    async def _call(self, turn_id: str, kind: str, request: Any, timeout_s: float | None, unary: Any) -> Any:
        """One hook call: on its turn's stream while the turn runs, else as its unary method (`unary`)."""
        calls = self._turns.of(turn_id)
        if calls is None:
            return await unary(request, timeout=timeout_s)
        return await calls.call(kind, request, timeout_s)

    async def _observed(self, request: hooks_pb2.DispatchObservedRequest, turn_id: str = "") -> hooks_pb2.DispatchObservedResponse:
        return await self._call(turn_id, "observed", request, deadline_of(SERVICE, "DispatchObserved").seconds, self._hooks.DispatchObserved)

    async def stop(self, record: TurnStop, scope: ExecutionScope) -> list[common_pb2.HookTraceEntry]:
        """The turn's held events and its TurnStop in one DispatchObserved call: TurnStop's handlers change nothing
        (parallel, no guard, no replace), so it needs no call of its own. The handlers' trace, in order."""
        found = await self._request(record, scope, "", "")
        await self._held.settled(scope.session.id)
        return await self._held.send_with(scope.turn_id, *([found[0]] if found is not None else []))

    async def committed(self, records: list[tuple[PostStateCommit, str, str]], scope: ExecutionScope) -> list[common_pb2.HookTraceEntry]:
        """PostStateCommit of each committed proposal ((record, plugin id, runtime id)), in one call; the events only
        watchers take go after the turn has answered (held_events.py). The trace of those sent now."""
        now: list[hooks_pb2.DispatchRequest] = []
        later: list[hooks_pb2.DispatchRequest] = []
        for record, plugin_id, runtime_id in records:
            found = await self._request(record, scope, plugin_id, runtime_id)
            if found is not None:
                (later if found[1] else now).append(found[0])
        if not now:
            self._held.send_after(scope.session.id, later)
            return []
        await self._held.settled(scope.session.id)
        trace = await self._held.send(now, scope.turn_id)
        self._held.send_after(scope.session.id, later)
        return trace

    async def call_tool(self, scope: ExecutionScope, plugin_id: str, runtime_id: str, call: dict[str, Any],
                        writes: list[dict[str, Any]] | None = None, plugin_data: dict[str, Any] | None = None,
                        world: dict[str, Any] | None = None) -> str:
        """Run one plugin tool in the hooks service; the unified result as JSON text. The proposals a
        successful call made are added to `writes` ({type, payload}). `plugin_data`: the plugin's own
        data as the calling run sees it (ToolContext.get_plugin_data); `world`: its ctx.world (context.world)."""
        try:
            reply = await self._hooks.CallTool(
                hooks_pb2.CallToolRequest(
                    context=scope.context(plugin_id, runtime_id), plugin_id=plugin_id, name=call["name"],
                    arguments=call.get("arguments") or "{}", call_id=call.get("id", ""),
                    plugin_data=to_struct(plugin_data) if plugin_data else None,
                    world=to_struct(world) if world is not None else None, session_view=to_struct(session_view(scope.session)),
                ),
            )
        except grpc.aio.AioRpcError as error:
            outages.note("hooks", error)
            raise
        if writes is not None:
            writes.extend({"type": p.type, "payload": from_struct(p.payload)} for p in reply.proposals)
        return reply.result

    async def call_service(self, scope: ExecutionScope, caller_plugin_id: str, runtime_id: str, contract: str,
                           arguments: str, plugin_data: dict[str, Any] | None = None) -> hooks_pb2.CallToolResponse:
        """Call another plugin's service (covel.register_service) in the hooks service (`plugin_data`: the
        service's plugin's own data as the calling run sees it)."""
        try:
            return await self._hooks.CallService(
                hooks_pb2.CallServiceRequest(context=scope.context(caller_plugin_id, runtime_id), contract=contract,
                                             arguments=arguments or "{}", caller_plugin_id=caller_plugin_id,
                                             plugin_data=to_struct(plugin_data) if plugin_data else None),
            )
        except grpc.aio.AioRpcError as error:
            outages.note("hooks", error)
            raise

    async def call_action(self, scope: ExecutionScope, plugin_id: str, action: str, payload_json: str,
                          world: dict[str, Any] | None = None) -> hooks_pb2.CallToolResponse:
        """A plugin's registered action (covel.register_rpc): the unified result and the proposals it made. `world`:
        its context.world."""
        return await self._hooks.CallAction(hooks_pb2.CallActionRequest(
            context=scope.context(plugin_id), plugin_id=plugin_id, action=action, payload=payload_json,
            world=to_struct(world) if world is not None else None, session_view=to_struct(session_view(scope.session))))

    async def validate_form(self, scope: ExecutionScope, plugin_id: str, form_id: str, values: dict[str, Any]) -> hooks_pb2.ValidateFormResponse:
        """A plugin's form validator on a player's answer (found: false when the plugin registered none)."""
        return await self._hooks.ValidateForm(
            hooks_pb2.ValidateFormRequest(context=scope.context(plugin_id), plugin_id=plugin_id, form_id=form_id, values=to_struct(values)))

    def stream_model_answer(self, scope: ExecutionScope, plugin_id: str, runtime_id: str, stream_plugin_id: str, stream_id: str,
                            timeout_s: float) -> Any:
        """A plugin's run_model_stream answer (PreLLMCall's replace.responseStream): the call whose chunks to read."""
        return self._hooks.StreamModelAnswer(hooks_pb2.StreamModelAnswerRequest(
            context=scope.context(plugin_id, runtime_id), plugin_id=stream_plugin_id, stream_id=stream_id), timeout=timeout_s)

    async def call_extension(self, scope: ExecutionScope, point: str, payload: dict[str, Any], *, plugin_id: str = "",
                             timeout_ms: int = 30_000) -> list[hooks_pb2.ExtensionAnswer]:
        """The answers of a kernel extension point's providers among the session's active plugins."""
        reply = await self._call(
            scope.turn_id, "extension",
            hooks_pb2.CallExtensionRequest(context=scope.context(plugin_id), point=point, plugin_id=plugin_id,
                                           input=to_struct(payload), timeout_ms=timeout_ms),
            timeout_ms / 1000 + 10,  # per call: the point's own timeout (shared/grpc_client.py DEADLINES)
            self._hooks.CallExtension,
        )
        return list(reply.answers)

    async def _request(self, record: HookPayload, scope: ExecutionScope, plugin_id: str, runtime_id: str,
                       payload: dict[str, Any] | None = None) -> tuple[hooks_pb2.DispatchRequest, bool] | None:
        """The Dispatch request of `record` and whether only watchers take it; None when no active plugin would run a
        handler for it."""
        payload = record.wire() if payload is None else payload
        listeners = (await self._subscriptions()).get(record.event, NO_LISTENERS)
        takers = listeners.takers(scope, payload, plugin_id, runtime_id)
        if not takers:
            return None
        request = hooks_pb2.DispatchRequest(event=record.event, context=scope.context(plugin_id, runtime_id), payload_json=to_json_bytes(payload))
        return request, listeners.observers.issuperset(takers)

    async def dispatch(
        self,
        record: HookPayload,
        scope: ExecutionScope,
        *,
        plugin_id: str = "",
        runtime_id: str = "",
        timeout_s: float | None = None,  # None: Dispatch's deadline in shared/grpc_client.py
    ) -> HookOutcome:
        """Run `record`'s event with its payload for the plugins that take it."""
        event, payload = record.event, record.wire()
        found = await self._request(record, scope, plugin_id, runtime_id, payload)
        if found is None:
            return HookOutcome(False, "", payload, sent=payload)
        request, watchers_only = found
        if event in DEFERRABLE and scope.turn_id and watchers_only:
            # Only watchers take it: it goes with the turn's others, at once, with TurnStop (stop).
            self._held.hold(scope.turn_id, request)
            return HookOutcome(False, "", payload, sent=payload)
        await self._held.settled(scope.session.id)
        reply = await self._call(scope.turn_id, "dispatch", request, timeout_s or deadline_of(SERVICE, "Dispatch").seconds,
                                 self._hooks.Dispatch)
        return HookOutcome(
            aborted=reply.outcome == hooks_pb2.OUTCOME_ABORT,
            reason=reply.reason,
            payload=json_object(reply.payload_json) if reply.payload_json else from_struct(reply.payload),
            trace=list(reply.trace),  # each entry names the event's runtime (the hooks service sets it)
            sent=payload,
        )
