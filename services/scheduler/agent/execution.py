"""Run one agent runtime of a turn: give it the kernel's tools (datasets, characters, memory,
delegate), its output schemas and the player's interjections, then run the agent loop.

Subagents (delegate here, ctx.agents.run in functions) run the provider through the same loop
with the subagent rules: read-only tools, actor profile, no history, no PreRuntime /
PostRuntime / PostContextAssembly, and only output handed back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2
from covel.hooks.v1 import hooks_pb2
from covel.store.v1 import store_pb2
from services.scheduler.agent.dimension_prompt import dimension_segment
from services.scheduler.agent.dimension_tools import (
    UPDATE_DIMENSIONS,
    add_dimension_tools,
    add_update_dimensions,
    dimension_snapshot,
)
from services.scheduler.agent.history_transforms import transform_history
from services.scheduler.agent.indexed_vectors import IndexedVectors
from services.scheduler.agent.loop import run_agent
from services.scheduler.agent.lorebook_turn import LorebookTurn
from services.scheduler.agent.memory_search import character_records as character_memory_records
from services.scheduler.agent.memory_search import lorebook_records, plugin_data_record, search_memory
from services.scheduler.agent.prompt_segments import dynamic_segments
from services.scheduler.agent.prompt_templates import template_values
from services.scheduler.agent.story_stream import StreamedPiece, narrative_deltas
from services.scheduler.agent.suspension import SUSPEND, add_suspend_tool
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.framework_trace import NESTED_SUSPENSION_REASON, nested_suspension_dropped
from services.scheduler.execution.kernel_tools import (
    DELEGATE,
    KernelTools,
    add_character_tools,
    add_dataset_tools,
    add_emit_event,
    add_memory_search,
    wanted_datasets,
)
from services.scheduler.execution.origins import TurnOrigin
from services.scheduler.execution.outcome import OutcomeStatus, Resume, RuntimeOutcome, StopReason, SubagentCall, is_story_runtime
from services.scheduler.execution.output_contracts import SchemaUnavailable, check_output, output_schemas
from services.scheduler.execution.plugin_data import PluginDataViews
from services.scheduler.execution.plugin_services import add_service_tools
from services.scheduler.execution.runtime_scope import RuntimeScope
from services.scheduler.execution.subagents import (
    FRAMEWORK,
    INTERNAL_FAILURE,
    SubagentBudget,
    SubagentPlan,
    Subagents,
    subagent_error,
    subagent_limits,
)
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.execution.world_view import world_view
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.kinds import ProposalType
from services.scheduler.peers import Peers
from services.scheduler.world_records import character_records
from shared.logs import get_logger
from shared.manifest import CompiledManifest
from shared.structs import from_struct

log = get_logger(component="agent_execution")


def execution_story(proposals: list[store_pb2.Proposal]) -> str:
    """The story text this execution's story runtimes told so far (their narrative.append proposals)."""
    texts = [str(from_struct(p.payload).get("text") or "") for p in proposals if p.type == ProposalType.NARRATIVE_APPEND]
    return "\n\n".join(text for text in texts if text)


class AgentExecution:
    def __init__(self, peers: Peers, hooks: HookBus, plugin_data: PluginDataViews, history_max_turns: int,
                 interjections: Callable[[str], list[str]] | None = None) -> None:
        self._peers = peers
        self._hooks = hooks
        self._plugin_data = plugin_data
        self._history_max_turns = history_max_turns
        self._interjections = interjections

    async def _segments(self, runtime: Runtime, scope: ExecutionScope, run: TurnShared, player_message: str,
                        story: bool) -> tuple[list[dict[str, Any]], list[Any]]:
        """A run's prompt segments: a story's lorebook (its activation rules evaluated for this turn) and dimensions, the
        plugins' segments, then the lorebook's entries placed after them; and the lorebook's trace entries."""
        lore_turn = LorebookTurn(self._peers.store, scope.session.id, scope.logical_turn, runtime.runtime_id) if story else None
        if lore_turn is not None:
            await lore_turn.evaluate(run.world, run.history, player_message)
        segments, lore_after = lore_turn.segments(scope.session.locale) if lore_turn is not None else ([], [])
        segments += dimension_segment(run.world, scope.session.locale) if story else []
        segments += await dynamic_segments(
            hooks=self._hooks, committed=lambda plugin_id: self._plugin_data.as_execution_sees(run, scope.session.id, plugin_id),
            scope=scope, runtime=runtime, story=story, packages=list(run.packages.values()), player_message=player_message)
        lore_entry = lore_turn.trace_entry() if lore_turn is not None else None
        return segments + lore_after, [lore_entry] if lore_entry is not None else []

    async def run(self, runtime: Runtime, scope: ExecutionScope, runtime_scope: RuntimeScope, player_message: str,
                  manifest: CompiledManifest, inputs: dict[str, Any] | None, root_budget: SubagentBudget | None = None,
                  resume: Resume | None = None) -> RuntimeOutcome:
        """One agent execution; `root_budget` is the subagent budget of the root execution a nested run belongs to.
        A nested run (ctx.recursive_call) reads no upstream plugin data: it sees none of its parent's upstream;
        its story text reaches no stream."""
        run = runtime_scope.turn
        nested = runtime_scope.nested
        package = run.packages[runtime.plugin_id]
        story = is_story_runtime(runtime)
        schemas: list = []
        if not story:
            try:
                schemas = output_schemas(manifest, package.contracts, Path(package.root_dir))
            except SchemaUnavailable as error:
                return RuntimeOutcome(OutcomeStatus.FAILED, f"output-schema-invalid: {error}")
        plugin_data = self._plugin_data.view(runtime, scope.session.id, run)
        if nested:
            plugin_data.upstream = []
        tools = KernelTools()

        async def own_data(plugin_id: str) -> dict[str, dict[str, Any]]:
            # The run's own tool writes count for its own plugin's tools; a service's plugin sees those attributed to it.
            mine = tools.tool_writes if plugin_id == runtime.plugin_id else [w for w in tools.foreign_writes if w.get("pluginId") == plugin_id]
            return await self._plugin_data.as_run_sees(run, scope.session.id, plugin_id, mine)

        tools.plugin_data = own_data

        async def tool_world() -> dict[str, Any]:
            # The run's ctx.world (a nested run's: the committed world), with what its tools proposed so far.
            view = await world_view(self._peers.store, self._peers.registry, scope, run, upstream=not nested)
            for write in tools.tool_writes:
                view.buffer(write["type"], write["payload"])
            return view.as_data()

        tools.world = tool_world
        topics = _story_topics(run) if story else list(package.event_topics)
        if topics:
            add_emit_event(tools, topics)
        declared = package.contributes.datasets or {}
        add_dataset_tools(tools, wanted_datasets(manifest, declared), declared, package.root_dir, plugin_data)
        add_service_tools(tools, manifest, run.packages, self._hooks, scope, runtime)
        characters = _CharacterCache(self._peers, scope.session.id, run)
        if story:
            if await characters.load():
                add_character_tools(tools, characters.load)
            add_dimension_tools(tools, dimension_snapshot(run.world))
            searchable = _searchable_namespaces(run)
            lore = [entry for entry in (run.world.lorebook if run.world is not None else []) if not entry.disabled]
            # Characters are searched too, but alone do not offer the tool (list-characters / get-character find them).
            if searchable or lore:
                origin = gateway_pb2.CallOrigin(session_id=scope.session.id, turn_id=scope.turn_id, runtime_id=runtime.runtime_id)
                add_memory_search(tools, lambda query, limit: self._memory_search(run, scope.session.id, searchable, query, limit, lore,
                                                                                  characters, origin))
        elif manifest.agent_part.finish_with == UPDATE_DIMENSIONS:
            # A dimension maintainer: it reads the dimensions as the turn found them and settles them.
            add_dimension_tools(tools, dimension_snapshot(run.world))
            add_update_dimensions(tools, dimension_snapshot(run.world))
        started = time.monotonic()
        loop_timeout_s = manifest.agent_part.loop.timeout_ms / 1000
        subagents = self.subagents_for(runtime, scope, run, characters, lambda: loop_timeout_s - (time.monotonic() - started),
                                       budget=_budget_of(root_budget, resume))
        tools.subagent_budget = subagents.budget
        if subagents.available:
            _add_delegate(tools, subagents)
        if SUSPEND in manifest.agent_part.tools.plugin:
            # A nested run that suspends is dropped (run_nested); a subagent's tools leave it out.
            add_suspend_tool(tools)
        pending = self._interjections
        # A player's words reach the player's turn only, not a detached job's running beside it (turn/lease_hold.py).
        interjections = (lambda: pending(scope.session.id)) if pending and runtime_scope.origin != TurnOrigin.BACKGROUND else None
        segments, lore_trace = await self._segments(runtime, scope, run, player_message, story)
        history = await transform_history(
            hooks=self._hooks, committed=lambda plugin_id: self._plugin_data.as_execution_sees(run, scope.session.id, plugin_id),
            scope=scope, runtime=runtime, story=story, packages=list(run.packages.values()), history=run.history)
        outcome = await run_agent(
            runtime=runtime, scope=scope, history=history, player_message=player_message, gateway=self._peers.gateway,
            hooks=self._hooks, on_narrative=narrative_deltas(runtime.runtime_id, runtime_scope.emit), history_max_turns=self._history_max_turns, inputs=inputs,
            self_data=await self._plugin_data.self_data_blocks(runtime, scope, run, manifest, upstream=not nested),
            packages=list(run.packages.values()), manifest=manifest, kernel_tools=tools, output_schemas=schemas,
            interjections=interjections, extra_segments=segments, world_values=template_values(run.world), resume=resume,
            execution_story="" if story or nested else execution_story(run.proposals),
            activation=runtime_scope.activation, characters=character_records(run.world),
        )
        await subagents.close()
        outcome.trace[0:0] = lore_trace
        outcome.trace.extend(subagents.trace)
        if outcome.status == OutcomeStatus.SUCCESS:
            outcome.writes = plugin_data.writes + tools.tool_writes
            outcome.foreign_writes = list(tools.foreign_writes) + subagents.writes
            outcome.read_from = set(plugin_data.read_from)
        return outcome

    async def run_nested(self, runtime: Runtime, scope: ExecutionScope, runtime_scope: RuntimeScope, player_message: str,
                         manifest: CompiledManifest, inputs: dict[str, Any] | None, root_agents: Subagents | None = None) -> RuntimeOutcome:
        """ctx.recursive_call of an agent runtime (`runtime_scope` a nested one): a full agent run whose writes the
        caller keeps or drops. Its delegate calls use the root execution's budget (`root_agents`, the root's ctx.agents)."""
        root_budget = root_agents.budget if root_agents is not None else None
        outcome = await self.run(runtime, scope, runtime_scope, player_message, manifest, inputs, root_budget=root_budget)
        if outcome.status != OutcomeStatus.SUSPENDED:
            return outcome
        # A nested run that suspends is not kept: nothing of it is saved or resumed (spec: nested-suspension-dropped).
        return RuntimeOutcome(OutcomeStatus.FAILED, NESTED_SUSPENSION_REASON, trace=[*outcome.trace, nested_suspension_dropped(runtime.runtime_id)])

    def subagents_for(self, caller: Runtime, scope: ExecutionScope, run: TurnShared, characters: _CharacterCache | None = None,
                      remaining_s: Callable[[], float] | None = None, budget: SubagentBudget | None = None) -> Subagents:
        """ctx.agents / delegate for `caller`: a root execution gets a new budget from the session's
        settings; a nested run passes its root's `budget` (calls, actors and the 8 running are shared)."""
        characters = characters or _CharacterCache(self._peers, scope.session.id, run)
        if budget is None:
            # Only the two owners subagent_limits reads (every plugin's settings were converted for each caller).
            stored = scope.session.plugin_settings
            settings = {owner: from_struct(stored[owner]) for owner in (caller.plugin_id, FRAMEWORK) if owner in stored}
            max_calls, max_actors = subagent_limits(settings, caller.plugin_id)
            budget = SubagentBudget(max_calls=max_calls, max_actors=max_actors)
        providers = run.subagent_providers()

        async def run_provider(plan: SubagentPlan) -> dict[str, Any]:
            return await self._run_subagent(plan, caller, scope, run, characters, subagents.writes, subagents.trace)

        subagents = Subagents(
            caller_plugin_id=caller.plugin_id, caller_runtime_id=caller.runtime_id, providers=providers,
            run_provider=run_provider, characters=characters.load,
            remaining_s=remaining_s or (lambda: 120.0), is_paused=lambda plugin_id: self._paused(scope.session.id, plugin_id),
            budget=budget, history=lambda: run.history,
        )
        return subagents

    async def _paused(self, session_id: str, plugin_id: str) -> bool:
        """Whether the fault breaker paused the plugin in this session (its providers answer unavailable)."""
        reply = await self._peers.hooks.ListPausedPlugins(hooks_pb2.ListPausedPluginsRequest(session_id=session_id))
        return any(paused.plugin_id == plugin_id for paused in reply.plugins)

    async def _run_subagent(self, plan: SubagentPlan, caller: Runtime, scope: ExecutionScope, run: TurnShared,
                            characters: _CharacterCache, sink: list[dict[str, Any]],
                            trace: list[common_pb2.HookTraceEntry]) -> dict[str, Any]:
        provider, manifest = plan.provider, plan.manifest
        package = run.packages[provider.plugin_id]
        try:
            schemas = output_schemas(manifest, package.contracts, Path(package.root_dir))
        except SchemaUnavailable as error:
            log.warning("subagent output schema unavailable", provider=provider.runtime_id, reason=str(error))
            return subagent_error("internal", INTERNAL_FAILURE, StopReason.ERROR)
        tools = KernelTools()
        declared = package.contributes.datasets or {}
        # A subagent reads the committed world (recursive upstream is not inherited): a fresh view.
        plugin_data = self._plugin_data.view(provider, scope.session.id, TurnShared(history=[], packages=run.packages))
        add_dataset_tools(tools, wanted_datasets(manifest, declared), declared, package.root_dir, plugin_data)
        add_service_tools(tools, manifest, run.packages, self._hooks, scope, provider)

        async def no_stream(_piece: StreamedPiece) -> None:
            return None

        started = time.monotonic()
        concealed = manifest.io.concealed
        # A concealed provider's entries are hidden from clients like a concealed runtime's (concealment.py).
        trace.append(_subagent_entry("subagent.started", "ok", provider, caller, plan.call_id,
                                     message=json.dumps({"concealed": True}) if concealed else ""))
        # Its loop hooks are told which run they belong to (several subagents of one provider may run at once).
        subagent_scope = scope.execution(plan.call_id, subagent_call_id=plan.call_id, parent_runtime_id=caller.runtime_id)
        outcome = await run_agent(
            runtime=provider, scope=subagent_scope, history=[], player_message="", gateway=self._peers.gateway, hooks=self._hooks,
            on_narrative=no_stream, history_max_turns=0, manifest=manifest, kernel_tools=tools, output_schemas=schemas,
            subagent=SubagentCall(plan.brief, plan.budget, plan.call_id, caller.runtime_id),
        )
        for entry in outcome.trace:
            entry.subagent_call_id, entry.parent_runtime_id = plan.call_id, caller.runtime_id
        trace.extend(outcome.trace)
        problem = check_output(outcome.output, schemas) if schemas and outcome.status == OutcomeStatus.SUCCESS else None
        failed = outcome.status != OutcomeStatus.SUCCESS or problem
        trace.append(_subagent_entry("subagent.failed" if failed else "subagent.completed", "error" if failed else "ok",
                                     provider, caller, plan.call_id, int((time.monotonic() - started) * 1e6)))
        usage = {key: value for key, value in outcome.usage.items() if isinstance(value, int)}
        if outcome.status != OutcomeStatus.SUCCESS:
            # The caller reads a fixed text; the real reason is for the operator.
            log.warning("subagent failed", provider=provider.runtime_id, caller=caller.runtime_id, call_id=plan.call_id,
                        reason=outcome.reason)
            code = "timeout" if outcome.stop_reason == StopReason.TIMEOUT else ("cancelled" if outcome.stop_reason == StopReason.CANCELLED else "internal")
            message = {"timeout": f"the subagent {provider.runtime_id} used its time",
                       "cancelled": "the subagent was cancelled"}.get(code, INTERNAL_FAILURE)
            # Output still invalid after its repair: internal / invalid-output (spec: 角色委托).
            stop_reason = StopReason.INVALID_OUTPUT if outcome.reason.startswith("invalid-output") else (outcome.stop_reason or StopReason.ERROR)
            return {**subagent_error(code, message, stop_reason), "usage": usage}
        if problem:
            log.warning("subagent output invalid", provider=provider.runtime_id, call_id=plan.call_id, reason=problem)
            return {**subagent_error("internal", INTERNAL_FAILURE, StopReason.INVALID_OUTPUT), "usage": usage}
        sink.extend(tools.foreign_writes)
        return {"ok": True, "output": outcome.output, "stopReason": outcome.stop_reason or StopReason.COMPLETED, "usage": usage}

    async def _memory_search(self, run: TurnShared, session_id: str, searchable: list[tuple[str, str, str]], query: str, limit: int,
                             lore: list[store_pb2.LorebookEntry], characters: _CharacterCache,
                             origin: gateway_pb2.CallOrigin) -> dict:
        """The archival scope (services/scheduler/agent/memory_search.py): searchable plugin data of this session's
        plugins, the lorebook and the characters, ranked by keywords and by meaning. The plugin data is the committed
        data the turn reads once (PluginDataViews.committed): the session's next turns read it with their lease."""
        records = lorebook_records(lore) + character_memory_records(await characters.load())
        for plugin_id, namespace, text_field in searchable:
            for (_, key), value in (await self._plugin_data.committed(run, session_id, plugin_id, namespace)).items():
                text = value.get(text_field) if isinstance(value, dict) else None
                if isinstance(text, str) and text.strip():
                    records.append(plugin_data_record(plugin_id, namespace, key, text))
        return await search_memory(records, query, limit, IndexedVectors(self._peers, session_id, origin))


def _budget_of(root_budget: SubagentBudget | None, resume: Resume | None) -> SubagentBudget | None:
    """A nested run's root budget; a resumed run's saved one (None: a new budget)."""
    if root_budget is not None or resume is None:
        return root_budget
    return SubagentBudget.restored(resume.state.get("subagentBudget"))


def _subagent_entry(event: str, status: str, provider: Runtime, caller: Runtime, call_id: str, duration_us: int = 0,
                    message: str = "") -> common_pb2.HookTraceEntry:
    return common_pb2.HookTraceEntry(event=event, handler_plugin_id="framework", status=status, runtime_id=provider.runtime_id,
                                     subagent_call_id=call_id, parent_runtime_id=caller.runtime_id, duration_us=duration_us,
                                     message=message)


class _CharacterCache:
    """The session's characters, from the committed world the turn read with its lease (else read once)."""

    def __init__(self, peers: Peers, session_id: str, run: TurnShared) -> None:
        self._peers = peers
        self._session_id = session_id
        self._run = run
        self._characters: list[dict[str, Any]] | None = None

    async def load(self) -> list[dict[str, Any]]:
        if self._characters is None:
            if self._run.world is None:
                self._run.world = await self._peers.store.GetWorld(store_pb2.GetWorldRequest(session_id=self._session_id))
            self._characters = character_records(self._run.world)
        return self._characters


def _story_topics(run: TurnShared) -> list[str]:
    """What a story may emit: every active plugin's event topics except those declared `advertise: false`."""
    topics: list[str] = []
    for _, package in sorted(run.packages.items()):
        hidden = {event.topic for event in package.contributes.events or [] if event.advertise is False}
        topics += [topic for topic in package.event_topics if topic not in hidden and topic not in topics]
    return topics


def _searchable_namespaces(run: TurnShared) -> list[tuple[str, str, str]]:
    """(pluginId, namespace, text field) of every contributes.data namespace that declares search.text."""
    found = []
    for plugin_id, package in sorted(run.packages.items()):
        for namespace, declaration in sorted((package.contributes.data or {}).items()):
            if declaration.search is not None and declaration.search.text:
                found.append((plugin_id, namespace, declaration.search.text))
    return found


def _add_delegate(tools: KernelTools, subagents: Subagents) -> None:
    async def delegate(args: dict[str, Any]) -> dict[str, Any]:
        result = await subagents.run(args)
        if result.get("ok"):
            return {"ok": True, "data": {"output": result["output"], "stopReason": result["stopReason"]}}
        return {"ok": False, "error": result["error"], **({"stopReason": result["stopReason"]} if result.get("stopReason") else {})}

    targets = subagents.targets()
    tools.add(DELEGATE, "Hand a task to a subagent and get its answer. Targets: " + ", ".join(targets),
              {"type": "object", "required": ["target", "brief"], "properties": {
                  "target": {"type": "object", "properties": {"contract": {"type": "string"}, "runtimeId": {"type": "string"}}},
                  "brief": {"type": "string", "minLength": 1, "maxLength": 20000},
                  "data": {"type": "object"},
                  "characterId": {"type": "string"}, "instruction": {"type": "string"},
                  "budget": {"type": "object", "properties": {
                      "maxSteps": {"type": "integer", "minimum": 1}, "timeoutMs": {"type": "integer", "minimum": 1}}}}},
              delegate, read_only=True)
