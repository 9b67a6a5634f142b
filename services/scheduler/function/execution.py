"""Function handlers, guards, nested calls and selfData of one turn: the code paths that build a
function ctx (ctx.inputs, ctx.plugin_data with in-execution visibility, ctx.random, …)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from covel.gateway.v1 import gateway_pb2_grpc
from covel.registry.v1 import registry_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.activation_payloads import payload_problem
from services.scheduler.execution.character_history import character_history
from services.scheduler.execution.framework_trace import NESTED_SUSPENSION_REASON, nested_suspension_dropped
from services.scheduler.execution.inputs import CommittedExports, Export, InputChecker, bind_inputs
from services.scheduler.execution.outcome import OutcomeStatus, RuntimeOutcome
from services.scheduler.execution.plugin_data import PluginDataViews
from services.scheduler.execution.plugin_services import ServicesView
from services.scheduler.execution.progress import ProgressRange
from services.scheduler.execution.running_turn import RunningTurn
from services.scheduler.execution.runtime_scope import RuntimeScope
from services.scheduler.execution.subagents import Subagents
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.execution.world_context import POINT as WORLD_CONTEXT
from services.scheduler.execution.world_context import world_context
from services.scheduler.execution.world_view import WorldView, world_view
from services.scheduler.function.runtime import FunctionContext, FunctionOutcome
from services.scheduler.function.sandboxed import prewarm_function_pool, run_function
from services.scheduler.function.services import STALL_RESEND_MIN_S, GatewayView, StoreView, ToolsView
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.kinds import RuntimeType, Visibility
from services.scheduler.plugin_locale import messages as plugin_messages
from shared.ids import new_id
from shared.manifest import CompiledManifest
from shared.manifest.runtime import InputSource
from shared.plugin_code import PluginFile
from shared.plugin_data.execution_view import BufferedWrite
from shared.plugin_sdk import CancellationSignal
from shared.plugin_sdk.http_client import function_http_client
from shared.plugin_sdk.seeded_random import seeded_random
from shared.structs import from_struct, from_value


def _missing_turn_value(source: InputSource, select: str | None, outputs: Mapping[str, dict[str, Any]],
                        providers: Mapping[str, list[str]]) -> str:
    """Why a required turn-scope input has no value, for the consumer's skip reason."""
    producers = [source.runtime] if source.runtime else list(providers.get(source.contract or "", []))
    with_value = [p for p in producers if p in outputs]
    if with_value and select:
        return f"select {select} matched nothing in the output of {', '.join(with_value)}"
    if producers:
        return f"{', '.join(producers)} gave no value (a function that returns nothing publishes none)"
    return f"no value from {source.runtime or source.contract} in this execution"


def nested_kernel_inputs(scope: ExecutionScope, last_player_input: dict[str, Any] | None, player_message: str) -> dict[str, Any]:
    """turn-digest@1 and operations@1 of a nested execution (ctx.recursive_call): it has no upstream
    of its own yet and sees none of its parent's (spec: 嵌套执行里看不到父执行的上游), so no runtime
    results, story text, tool calls or staged operations; no player actions; its own player message."""
    digest: dict[str, Any] = {"turnId": scope.turn_id, "playerMessage": player_message, "actions": [],
                              "lastPlayerInput": last_player_input, "narrativeText": "", "toolCallSummaries": [], "runtimeResults": []}
    if scope.session.locale:
        digest["locale"] = scope.session.locale
    return {"turn-digest@1": digest, "operations@1": {"operations": []}}


class NestedAgents(Protocol):
    """What a handler's ctx.agents and ctx.recursive_call of an agent runtime run on (agent/execution.py)."""

    def subagents_for(self, caller: Runtime, scope: ExecutionScope, shared: TurnShared) -> Subagents: ...

    async def run_nested(self, runtime: Runtime, scope: ExecutionScope, runtime_scope: RuntimeScope, player_message: str,
                         manifest: CompiledManifest, inputs: dict[str, Any] | None, root_agents: Subagents | None = None) -> RuntimeOutcome: ...


@dataclass
class _NestedCall:
    """The execution a ctx.recursive_call comes from, and the scope the nested one runs in."""

    parent: Runtime
    parent_manifest: CompiledManifest
    depth: int
    parent_context: FunctionContext
    runtime_scope: RuntimeScope


def _input_gate(bindings: Mapping[str, Any], bound: Mapping[str, Any], rejected: Mapping[str, str], committed_specs: Mapping[str, Any],
                nested: bool, runtime_scope: RuntimeScope) -> str:
    """Why the runtime must not run for want of a required input ("" when it may). Kernel inputs always have a value."""
    for binding, spec in bindings.items():
        if not spec.required or binding in bound:
            continue
        if binding in rejected:
            return rejected[binding]
        if binding in committed_specs:
            return f"input {binding}: nothing recorded under {spec.record_as or 'its recordAs'} yet"
        source = spec.from_
        if nested:
            return (f"input {binding}: no value from {source.runtime or source.contract} in this nested "
                    "execution (a nested run sees only its own upstream, not its parent's)")
        return f"input {binding}: {_missing_turn_value(source, spec.select, runtime_scope.outputs, runtime_scope.providers)}"
    return ""


class FunctionExecution:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, running: Callable[[str], RunningTurn | None],
                 plugin_data: PluginDataViews, agents: NestedAgents | None = None, hooks: HookBus | None = None,
                 gateway: gateway_pb2_grpc.LlmGatewayStub | None = None, stall_resend_min_s: float = STALL_RESEND_MIN_S,
                 registry: registry_pb2_grpc.PluginRegistryStub | None = None) -> None:
        self._store = store
        # ctx.world.worldRecord is the registry's record of the session's world.
        self._registry = registry
        self._stall_resend_min_s = stall_resend_min_s
        self._running = running
        self._plugin_data = plugin_data
        # ctx.agents and nested agent runs; without them a handler has no ctx.agents.
        self._agents = agents
        # ctx.tools goes through the hooks service, ctx.gateway through the LLM gateway.
        self._hooks = hooks
        self._gateway = gateway
        # The sandbox's zygote starts with the scheduler, not at its first handler.
        prewarm_function_pool()

    async def committed_exports(self, session_id: str, shared: TurnShared) -> CommittedExports:
        """The session's exports as this turn found them: read once per turn (only commits change them)."""
        if shared.exports is None:
            reply = await shared.read_once("exports", lambda: self._store.ListExports(store_pb2.ListExportsRequest(session_id=session_id)))
            providers: dict[str, set[str]] = {}
            for runtime_id, contract in shared.output_contracts().items():
                providers.setdefault(contract, set()).add(runtime_id)
            shared.exports = CommittedExports(
                [Export(e.plugin_id, e.record_as, e.runtime_id, from_value(e.value), e.logical_turn, e.updated_at.ToMicroseconds() / 1e6)
                 for e in reply.exports],
                providers,
            )
        return shared.exports

    async def _kernel_inputs(self, scope: ExecutionScope, runtime_scope: RuntimeScope, manifest: CompiledManifest,
                             nested_message: str | None) -> dict[str, Any] | None:
        """The kernel inputs the runtime binds: the turn's (the world context read once, when it declares it), or
        a nested execution's own; None when it declares none."""
        declared = manifest.io.kernel_inputs()
        if not declared:
            return None
        kernel = runtime_scope.kernel_inputs
        if WORLD_CONTEXT in declared and self._hooks is not None:
            shared, hooks = runtime_scope.turn, self._hooks
            shared.world_context = await shared.read_once(WORLD_CONTEXT, lambda: world_context(
                hooks, scope, shared.session, shared.world, shared.packages.values()))
            kernel = {**(kernel or {}), WORLD_CONTEXT: shared.world_context}
        if nested_message is not None:
            return nested_kernel_inputs(scope, runtime_scope.last_player_input, nested_message)
        return kernel

    async def bind(self, runtime: Runtime, scope: ExecutionScope, runtime_scope: RuntimeScope, manifest: CompiledManifest,
                   nested_message: str | None = None) -> tuple[dict[str, Any], str]:
        """The runtime's inputs, and why it must not run ("" when it may): a required input whose
        value failed its checks, a required committed input with no export yet, or a required
        turn input whose producer succeeded without a value there (no value returned, or `select`
        matched nothing): a consumer never runs without a required input.

        `nested_message` (a str) binds for a nested execution (ctx.recursive_call) with that player
        message: it sees only its own upstream, never its parent's (nor a detached job's source
        snapshot), so turn-scope inputs from runtimes and contracts have no value; committed
        inputs read the recorded exports as usual."""
        shared = runtime_scope.turn
        specs = manifest.io.inputs
        bindings = manifest.io.bindings()
        kernel = await self._kernel_inputs(scope, runtime_scope, manifest, nested_message)
        committed_specs = {b: s for b, s in bindings.items() if s.scope == "committed"}
        committed = await self.committed_exports(scope.session.id, shared) if committed_specs else None
        checker = None
        if committed_specs or any(s.accepts for s in bindings.values()):
            package = shared.packages[runtime.plugin_id]
            checker = InputChecker(Path(package.root_dir), manifest.file, shared.packages.values(), shared.output_contracts())
        rejected: dict[str, str] = {}
        nested = nested_message is not None
        if nested or runtime_scope.source_inputs is not None:
            # A nested execution sees no upstream; a detached job's turn-scope and kernel inputs are the source turn's snapshot.
            bound = bind_inputs(manifest, {}, {}, kernel if nested else None, committed=committed, check=checker, rejected=rejected)
            if not nested and runtime_scope.source_inputs is not None:
                bound.update({b: v for b, v in runtime_scope.source_inputs.items() if b in specs and b not in committed_specs})
        else:
            bound = bind_inputs(manifest, runtime_scope.outputs, runtime_scope.providers, kernel, committed=committed,
                                check=checker, rejected=rejected)
        return bound, _input_gate(bindings, bound, rejected, committed_specs, nested, runtime_scope)

    async def world_view(self, scope: ExecutionScope, shared: TurnShared, *, upstream: bool = True) -> WorldView:
        """ctx.world: the committed world (read once per turn) with the world proposals of finished upstream runtimes
        (none for a nested run: it reads the committed world)."""
        return await world_view(self._store, self._registry, scope, shared, upstream=upstream)

    def context(
        self, runtime: Runtime, scope: ExecutionScope, runtime_scope: RuntimeScope, player_message: str, manifest: CompiledManifest,
        depth: int = 0, inputs: dict[str, Any] | None = None, world: WorldView | None = None,
    ) -> FunctionContext:
        """The ctx of a function handler, and of any runtime's guard."""
        session = scope.session
        shared = runtime_scope.turn
        if inputs is None:
            inputs = bind_inputs(manifest, runtime_scope.outputs, runtime_scope.providers, runtime_scope.kernel_inputs)
        context = FunctionContext(
            runtime_id=runtime.runtime_id,
            plugin_id=runtime.plugin_id,
            inputs=MappingProxyType(inputs),
            player_message=player_message,
            player_actions=runtime_scope.player_actions,
            logical_turn=scope.logical_turn,
            execution=MappingProxyType({"origin": runtime_scope.origin, "locale": session.locale or "en",
                                        **({"sourceTurnId": runtime_scope.source_turn_id} if runtime_scope.source_turn_id else {})}),
            messages=MappingProxyType(plugin_messages(shared.packages[runtime.plugin_id], session.locale)),
            activation=MappingProxyType(runtime_scope.activation),
            recursion_depth=depth,
            random=seeded_random(scope.logical_turn, runtime.runtime_id, session.id),
            plugin_data=self._plugin_data.view(runtime, session.id, shared),
            signal=CancellationSignal(),
            user_settings=MappingProxyType(from_struct(session.plugin_settings[runtime.plugin_id])
                                           if runtime.plugin_id in session.plugin_settings else {}),
        )

        async def recursive_call(runtime_id: str, input: dict[str, Any] | None = None, *,
                                 player_message: str | None = None) -> dict[str, Any]:
            """A nested execution of a runtime of the same package (spec: recursiveCall({playerMessage,
            manualTrigger: {runtimeId, payload}})); its writes follow this one. The nested run reads
            `player_message` if given, else this run's."""
            message = player_message if isinstance(player_message, str) else context.player_message
            call = _NestedCall(runtime, manifest, depth, context, runtime_scope.nested_call(input))
            return await self._recursive_call(call, runtime_id, scope, message)

        context.recursive_call = recursive_call
        context.session = MappingProxyType({"lastPlayerInput": runtime_scope.last_player_input})
        context.http = function_http_client(runtime.plugin_id, shared.packages[runtime.plugin_id].permissions, manifest)
        context.world = world

        async def history_for(character_id: str, limit: int | None = None) -> dict[str, Any]:
            """CharacterHistory: the story the character witnessed (execution/character_history.py)."""
            characters = world.as_data()["characters"] if world is not None else []  # as_data: no read dependency
            return character_history(shared.history, characters, character_id, limit)

        context.history_for = history_for
        if isinstance(world, WorldView):
            world.record_reads_into(context.plugin_data.read_from)  # reading characters depends on their upstream writers
        context.store = StoreView(self._store, session.id, context.plugin_data)
        if self._hooks is not None:
            context.services = ServicesView(self._hooks, scope, runtime, shared.packages)
            context.tools = ToolsView(runtime, scope, self._hooks, manifest.function.tools if manifest.function else [], context.trace,
                                      world=lambda: world.as_data() if isinstance(world, WorldView) else None)
        if self._gateway is not None:
            context.gateway = GatewayView(self._gateway, runtime, scope, manifest.gateway_slot, lambda: context.deadline,
                                          self._stall_resend_min_s)
        return context

    async def run_guard(self, runtime: Runtime, scope: ExecutionScope, runtime_scope: RuntimeScope, player_message: str,
                        manifest: CompiledManifest, inputs: dict[str, Any] | None = None) -> RuntimeOutcome | None:
        """The runtime's guard, before any model call or handler: None to run as usual, or the skip.

        `{skip: true, ...fields}` skips the runtime with those fields as its output (checked and
        bound like any output); the guard's writes commit only when it skips."""
        if manifest.guard is None or manifest.guard_timeout_ms is None:
            return None
        package = runtime_scope.turn.packages[runtime.plugin_id]
        # The registry compiles the guard to a package-relative path, like function.handler.
        guard = PluginFile(runtime.plugin_id, Path(package.root_dir), manifest.guard)
        world = await self.world_view(scope, runtime_scope.turn)
        context = self.context(runtime, scope, runtime_scope, player_message, manifest, inputs=inputs, world=world)
        done = await run_function(context, guard, manifest.guard_timeout_ms, entry="guard", turn_id=scope.turn_id)
        if done.status != OutcomeStatus.SUCCESS:
            return RuntimeOutcome(OutcomeStatus.FAILED, f"guard: {done.reason}", trace=context.trace)
        verdict = done.canonical_value if done.has_value else None
        if not isinstance(verdict, dict) or verdict.get("skip") is not True:
            return None
        output = {key: value for key, value in verdict.items() if key != "skip"}
        return RuntimeOutcome(OutcomeStatus.SKIPPED, "guard skipped", output=output, writes=done.writes, read_from=done.read_from,
                              events=done.events, canonical_value=output, has_value=True, guard_skipped=True, trace=context.trace)
    async def _recursive_call(self, call: _NestedCall, runtime_id: str, scope: ExecutionScope, player_message: str) -> dict[str, Any]:
        limit = call.parent_manifest.max_recursion_depth
        if call.depth + 1 > limit:
            raise RecursionError(f"recursive_call({runtime_id!r}): past the recursion depth limit ({limit})")
        shared = call.runtime_scope.turn
        package = shared.packages[call.parent.plugin_id]
        target = next((r for r in package.runtimes if r.runtime_id == runtime_id), None)
        if target is None:
            raise LookupError(f"recursive_call({runtime_id!r}): only runtimes of {call.parent.plugin_id} can be called")
        manifest = target.manifest
        if manifest.schedule.subagent_only:
            raise LookupError(f"recursive_call({runtime_id!r}): a subagentOnly runtime runs through ctx.agents.run")
        problem = payload_problem(target, package, call.runtime_scope.activation)
        if problem is not None:
            raise ValueError(f"recursive_call({runtime_id!r}): the input {problem}")
        # An execution of its own: hooks tell it from its parent's and from other nested runs (HookContext.execution_id).
        scope = scope.execution(new_id())
        # The nested execution binds from its own upstream only (none): not the parent turn's results.
        inputs, gate = await self.bind(target, scope, call.runtime_scope, manifest, nested_message=player_message)
        if gate:
            # A runtime never runs without a required input, nested or not.
            return {"status": OutcomeStatus.SKIPPED, "reason": gate, "output": None}
        if target.type != RuntimeType.FUNCTION:
            return await self._recursive_agent(target, scope, call, player_message, manifest, inputs)
        return await self._recursive_function(target, scope, call, player_message, manifest, inputs)

    async def _recursive_function(self, target: Runtime, scope: ExecutionScope, call: _NestedCall, player_message: str,
                                  manifest: CompiledManifest, inputs: dict[str, Any]) -> dict[str, Any]:
        """A nested function run: its writes and events follow the parent's if it succeeds."""
        parent_context = call.parent_context
        # A nested run does not inherit its parent's upstream: it reads the committed world.
        world = await self.world_view(scope, call.runtime_scope.turn, upstream=False)
        context = self.context(target, scope, call.runtime_scope, player_message, manifest, call.depth + 1, inputs=inputs, world=world)
        # Plugin data: committed values and its own writes. A nested execution sees only the upstream
        # of its own execution (none): not its parent's upstream runtimes (spec: 执行内的插件数据可见性).
        context.plugin_data.upstream = []
        if parent_context.progress is not None:
            # Nested calls report in the root execution's range, under their own runtime id.
            context.progress = parent_context.progress._range.reporter(target.runtime_id)
        # ctx.agents of a nested run is its root's: one subagent budget per root execution (spec: 执行名额).
        context.agents = parent_context.agents
        package = call.runtime_scope.turn.packages[call.parent.plugin_id]
        handler = PluginFile(call.parent.plugin_id, Path(package.root_dir), manifest.function_part.handler)
        done = await run_function(context, handler, manifest.function_part.timeout_ms, turn_id=scope.turn_id)
        if done.status == OutcomeStatus.SUCCESS:
            # Writes follow the parent: they commit with its unit, or not at all if it fails (or a
            # PostRuntime hook changes its status): plugin data, tool proposals, write services' changes.
            parent_context.plugin_data.own.extend(context.plugin_data.own)
            parent_context.emitted.extend(context.emitted)
            if context.tools is not None and parent_context.tools is not None:
                parent_context.tools.writes.extend(context.tools.writes)
            if context.services is not None and parent_context.services is not None:
                parent_context.services.writes.extend(context.services.writes)
        parent_context.trace.extend(context.trace)
        if done.status == OutcomeStatus.SUSPENDED:
            # A nested run that suspends is not kept: nothing of it is saved or resumed (spec: nested-suspension-dropped).
            parent_context.trace.append(nested_suspension_dropped(target.runtime_id))
            return {"status": OutcomeStatus.FAILED, "reason": NESTED_SUSPENSION_REASON, "output": {}}
        return {"status": done.status, "reason": done.reason, "output": done.output}

    async def _recursive_agent(self, target: Runtime, scope: ExecutionScope, call: _NestedCall, player_message: str,
                               manifest: CompiledManifest, inputs: dict[str, Any]) -> dict[str, Any]:
        """A nested agent run (non-story): its tool writes and events follow the parent like a nested function's."""
        if self._agents is None or target.visibility == Visibility.STORY:
            raise LookupError(f"recursive_call({target.runtime_id!r}): a story runtime cannot run nested; call a system runtime")
        parent_context = call.parent_context
        # The nested agent's delegate calls share the root execution's subagent budget.
        outcome = await self._agents.run_nested(target, scope, call.runtime_scope, player_message, manifest, inputs, parent_context.agents)
        if outcome.status == OutcomeStatus.SUCCESS:
            parent_context.plugin_data.own.extend(
                BufferedWrite(target.runtime_id, write["type"], write["payload"]) for write in outcome.writes)
            parent_context.emitted.extend(outcome.events)
            if parent_context.services is not None:
                parent_context.services.writes.extend(outcome.foreign_writes)
        parent_context.trace.extend(outcome.trace)
        return {"status": outcome.status, "reason": outcome.reason, "output": outcome.output}

    # Handlers and guards run in their plugin's sandbox worker (in this process when the sandbox is off).
    async def run_function(self, runtime: Runtime, scope: ExecutionScope, runtime_scope: RuntimeScope, player_message: str,
                           manifest: CompiledManifest, inputs: dict[str, Any] | None = None) -> RuntimeOutcome:
        session = scope.session
        shared = runtime_scope.turn
        function = manifest.function_part
        handler = PluginFile(runtime.plugin_id, Path(shared.packages[runtime.plugin_id].root_dir), function.handler)
        world = await self.world_view(scope, shared)
        context = self.context(runtime, scope, runtime_scope, player_message, manifest, inputs=inputs, world=world)
        running = self._running(session.id)
        if running is not None and running.turn_id == scope.turn_id:  # not a player's turn running beside a detached job
            running.signals.append(context.signal)
        agents = self._agents.subagents_for(runtime, scope, shared) if self._agents is not None else None
        if agents is not None:
            context.agents = agents
        progress = ProgressRange(runtime_scope.emit)
        context.progress = progress.reporter(runtime.runtime_id)
        done = await run_function(context, handler, function.timeout_ms, turn_id=scope.turn_id)
        # Jobs the handler left open end with it.
        await progress.close(done.status == OutcomeStatus.SUCCESS)
        if agents is not None:
            # Subagents the handler did not wait for finish before the runtime does.
            await agents.close()
            context.trace.extend(agents.trace)
        return _function_outcome(done, context, agents, inputs)


def _function_outcome(done: FunctionOutcome, context: FunctionContext, agents: Subagents | None,
                      inputs: dict[str, Any] | None) -> RuntimeOutcome:
    # Write services' staged changes (the handler's own calls and its subagents'), for a success only.
    foreign = [*(context.services.writes if context.services is not None else []), *(agents.writes if agents else [])]
    if done.status == OutcomeStatus.SUSPENDED and done.suspension is not None:
        # Held until the answer runs the handler again: its writes (its tools' too), its events, its inputs.
        held = {**done.suspension, "writes": [*(context.tools.writes if context.tools is not None else []), *done.suspension["writes"]],
                "foreign": foreign, "inputs": dict(inputs or {})}
        return RuntimeOutcome(OutcomeStatus.SUSPENDED, done.reason, trace=context.trace, shown=done.shown, suspension=held)
    tool_writes = context.tools.writes if context.tools is not None and done.status == OutcomeStatus.SUCCESS else []
    return RuntimeOutcome(
        done.status, done.reason, output=done.output, writes=[*tool_writes, *done.writes],
        canonical_value=done.canonical_value, has_value=done.has_value, read_from=done.read_from, events=done.events,
        trace=context.trace, foreign_writes=foreign if done.status == OutcomeStatus.SUCCESS else [], shown=done.shown, completion=done.completion,
    )
