"""The agent loop: assemble a runtime's context, then step (PreStep, PreLLMCall, the model,
PostLLMResponse, tools) until it answers, completes or fails, and shape what it produced.

AgentLoop holds what one execution is given; ExecutionProgress what changes from one model call
to the next. run() drives rounds of step methods: limits, PreStep, the model call, its corrections,
then the final answer or the tools; the completion check builds the outcome. The rules the steps
decide by are pure functions in agent/loop_rules.py; the loop's behaviour comes from its profile
(agent/loop_profile.py); the tools the kernel answers itself are in execution/kernel_tools.py; what PreStep tells of a
step that continued (tool calls, then another model call) and its nextPrompt in agent/continued_step.py;
subagents (ctx.agents.run, delegate) run through the same loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.scheduler.agent import loop_rules
from services.scheduler.agent.answers import completion_split, log_model_effects
from services.scheduler.agent.context import assemble, framework_preamble, resolve_bootstrap, runtime_prompt, static_segments
from services.scheduler.agent.context_overflow import OverflowSteps
from services.scheduler.agent.continued_step import next_prompt_message, previous_step
from services.scheduler.agent.corrections import CorrectionSteps, interjection_message
from services.scheduler.agent.loop_profile import loop_settings
from services.scheduler.agent.loop_state import ExecutionProgress, ModelReply, Next
from services.scheduler.agent.model_call import (
    STREAM_DEADLINE_SLACK_S,
    CallChoices,
    OnNarrative,
    apply_pre_llm_call,
    call_model,
    chat_message,
    count_usage,
    hook_answer,
    response_format,
    wire_choice,
)
from services.scheduler.agent.plugin_stream import read_plugin_stream
from services.scheduler.agent.prompt_templates import render
from services.scheduler.agent.suspension import SUSPEND, restore_writes, resumed_progress, saved_state
from services.scheduler.agent.tool_calls import ToolSteps
from services.scheduler.catalogue import Package, Runtime
from services.scheduler.execution.framework_trace import framework_entry
from services.scheduler.execution.kernel_tools import EMIT_EVENT, RUNTIME_DONE, KernelTools, add_emit_event, add_runtime_done
from services.scheduler.execution.outcome import OutcomeStatus, Resume, RuntimeOutcome, StopReason, SubagentCall, is_story_runtime
from services.scheduler.execution.player_effects import ShownInvalid
from services.scheduler.execution.story_output import EmptyStory, normalize_story
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.payloads import PostContextAssembly, PreLLMCall, PreStep
from services.scheduler.hooks.replies import PostContextAssemblyReply, PreLLMCallReply, PreStepReply
from services.scheduler.hooks.rules import StepPlan, apply_pre_step, stopped_by_pre_step_error
from shared.manifest import CompiledManifest
from shared.manifest.runtime import HistoryWindow


def tools_wanted(manifest: CompiledManifest) -> list[str]:
    """agent.tools.plugin: the plugin tools this runtime may call (the registry fills the inline default)."""
    return list(manifest.agent_part.tools.plugin)


async def run_agent(
    *,
    runtime: Runtime,
    scope: ExecutionScope,
    history: list[common_pb2.Message],
    player_message: str,
    gateway: gateway_pb2_grpc.LlmGatewayStub,
    hooks: HookBus,
    on_narrative: OnNarrative,
    history_max_turns: int,
    inputs: dict[str, Any] | None = None,
    self_data: list[str] | None = None,
    event_topics: list[str] | None = None,
    packages: list[Package] | None = None,
    manifest: CompiledManifest | None = None,
    kernel_tools: KernelTools | None = None,
    output_schemas: list[tuple[str, dict[str, Any]]] | None = None,
    subagent: SubagentCall | None = None,
    interjections: Callable[[], list[str]] | None = None,
    extra_segments: list[dict[str, Any]] | None = None,
    world_values: dict[str, Any] | None = None,
    resume: Resume | None = None,
    execution_story: str = "",
    activation: dict[str, Any] | None = None,
    characters: list[dict[str, Any]] | None = None,
) -> RuntimeOutcome:
    """One agent execution: context assembly, then steps until an answer, a completion or a failure.
    `resume`: a suspended run goes on from its saved conversation, the answer as its suspend call's result."""
    loop = AgentLoop(
        runtime=runtime, scope=scope, gateway=gateway, hooks=hooks, on_narrative=on_narrative,
        manifest=manifest if manifest is not None else runtime.manifest,
        kernel_tools=kernel_tools if kernel_tools is not None else KernelTools(),
        output_schemas=output_schemas or [], subagent=subagent, interjections=interjections,
    )
    loop.extra_segments = list(extra_segments or [])
    loop.world_values = world_values or {}
    loop.execution_story = execution_story
    loop.activation = dict(activation or {})
    loop.characters = characters
    if event_topics and EMIT_EVENT not in loop.kernel_tools and subagent is None:
        add_emit_event(loop.kernel_tools, event_topics)
    if resume is not None:
        return await loop.resume(resume)
    await loop.prepare(history, player_message, history_max_turns, inputs, self_data, packages or [])
    return await loop.run()


class AgentLoop(CorrectionSteps, ToolSteps, OverflowSteps):
    """One agent execution: what it is given, its context step, the driver and the steps it owns; the correction
    steps, the tools step and the context-overflow step are in agent/corrections.py, tool_calls.py, context_overflow.py."""

    def __init__(self, *, runtime: Runtime, scope: ExecutionScope, gateway: gateway_pb2_grpc.LlmGatewayStub, hooks: HookBus,
                 on_narrative: OnNarrative, manifest: CompiledManifest, kernel_tools: KernelTools,
                 output_schemas: list[tuple[str, dict[str, Any]]], subagent: SubagentCall | None,
                 interjections: Callable[[], list[str]] | None) -> None:
        self.runtime = runtime
        self.scope = scope
        self.gateway = gateway
        self.hooks = hooks
        self.on_narrative = on_narrative
        self.manifest = manifest
        self.kernel_tools = kernel_tools
        self.subagent = subagent
        self.interjections = interjections if interjections is not None else (lambda: [])
        self.story = is_story_runtime(runtime) and subagent is None
        agent = manifest.agent_part
        self.settings = loop_settings(agent.loop, story=self.story,
                                      subagent=subagent is not None, budget=subagent.budget if subagent else None)
        self.output_schemas = [] if self.story else list(output_schemas)
        self.trace: list[common_pb2.HookTraceEntry] = []
        self.usage = {"promptTokens": 0, "completionTokens": 0, "calls": 0, "contextTokens": 0, "contextWindow": 0}
        self.stop_reason = ""
        self.finalizer_used = False
        # The last step ended with status "continue" (tool calls, and the loop asks again): the next PreStep says so.
        self.continued = False
        self.unregistered_tools: list[str] = []
        # prompt.segment@1 segments computed for this execution (agent/prompt_segments.py).
        self.extra_segments: list[dict[str, Any]] = []
        # What prompt placeholders read ({{ world.dimensions.<id>.value }}; prompt_templates.py).
        self.world_values: dict[str, Any] = {}
        # The story this execution told already (a runtime after the story reads it as a message).
        self.execution_story = ""
        # What started a manual or event runtime (<runtime-activation>); the characters and inputs PostContextAssembly shows.
        self.activation: dict[str, Any] = {}
        self.characters: list[dict[str, Any]] | None = None
        self.inputs: dict[str, Any] = {}
        # What the model sees and may call: set by prepare().
        self.system_prompt = ""
        self.messages: list[dict[str, Any]] = []
        self.prompt_segments: list[dict[str, Any]] = []
        self.available: dict[str, gateway_pb2.ToolDefinition] = {}
        self.tool_names: list[str] = []
        self.slot = agent.model
        self.model = scope.session.runtime_model_overrides.get(runtime.runtime_id, "") or self.slot
        self.response_format = response_format(manifest.io.output.schema_, manifest.io.output.contract, self.story,
                                               self.output_schemas)
        self.completion = loop_rules.completion_of(agent)
        self.base_choice = loop_rules.tool_choice_of(agent)

    # -- context ------------------------------------------------------------------------------------
    async def prepare(self, history: list[common_pb2.Message], player_message: str, history_max_turns: int,
                      inputs: dict[str, Any] | None, self_data: list[str] | None, packages: list[Package]) -> None:
        """What the model sees: the system prompt and messages, then the tools it may call."""
        if self.subagent is not None:
            # Its own conversation: the provider's prompt with the framework's frame, then the brief.
            self.system_prompt, self.messages = assemble(self.runtime, self.scope.session.locale, False, [], self.subagent.brief, 0)
        else:
            await self._assemble_context(history, player_message, history_max_turns, inputs, self_data, packages)
            await self._post_context_assembly()
        await self._resolve_tools()

    async def _assemble_context(self, history: list[common_pb2.Message], player_message: str, history_max_turns: int,
                                inputs: dict[str, Any] | None, self_data: list[str] | None, packages: list[Package]) -> None:
        runtime, session = self.runtime, self.scope.session
        self.inputs = dict(inputs or {})
        window = self.manifest.agent_part.history or HistoryWindow()
        max_turns = window.max_turns if window.max_turns is not None else history_max_turns
        segments = [{**segment, "content": render(segment["content"], self.world_values)}
                    for segment in static_segments(runtime, self.story, packages, session.locale) + list(self.extra_segments)]
        self.prompt_segments = [{"pluginId": seg["pluginId"], "id": seg.get("id", "")} for seg in segments]
        bootstrap = await resolve_bootstrap(self.hooks, self.scope, runtime, packages)  # agent:bootstrap
        # A limited window (agent.history.maxTurns) reads the summary only when it asks (includeSummaries: true);
        # without a window the prompt reads the shared history, summary included (spec: 历史窗口里的摘要).
        windowed = window.max_turns is not None
        include_summaries = window.include_summaries if window.include_summaries is not None else not windowed
        self.system_prompt, self.messages = assemble(
            runtime, session.locale, self.story, history, player_message, max_turns, inputs, self_data, segments, bootstrap,
            include_summaries, self.world_values, self.execution_story, self.activation)

    async def _post_context_assembly(self) -> None:
        # The character the main seat plays now (a session may have several player characters).
        main = next((seat for seat in self.scope.session.seats if seat.id == "main"), None)
        assembled = await self.hooks.dispatch(
            PostContextAssembly(self.system_prompt, self.messages, self.story, runtime_prompt(self.runtime, self.scope.session.locale),
                                self.prompt_segments, main.character_id if main is not None else "", self.inputs, self.characters),
            self.scope, plugin_id=self.runtime.plugin_id, runtime_id=self.runtime.runtime_id,
        )
        self.trace.extend(assembled.trace)
        reply = PostContextAssemblyReply.of(assembled)
        if reply.system_prompt != self.system_prompt:
            # The framework's own preamble always comes first, whatever a hook wrote.
            preamble = framework_preamble(self.runtime, self.scope.session.locale, self.story)
            replaced = str(reply.system_prompt or "")
            self.system_prompt = replaced if replaced.startswith(preamble) else f"{preamble}\n\n{replaced}"
        if reply.messages is not None:
            self.messages = reply.messages

    async def _resolve_tools(self) -> None:
        runtime = self.runtime
        self.available = {}
        wanted = tools_wanted(self.manifest)
        if wanted:
            self.available.update(await self.hooks.tools(runtime.plugin_id))
        # A declared plugin tool the entry module never registered fails the run (spec: Agent 能用哪些工具).
        # suspend is the kernel's; a nested run or subagent does not get it (it cannot suspend).
        self.unregistered_tools = [name for name in wanted
                                   if name not in self.available and name not in self.kernel_tools and name not in (RUNTIME_DONE, SUSPEND)]
        self.tool_names = [name for name in wanted if name in self.available]
        if self.subagent is not None:
            # A subagent only gets read-only tools.
            self.tool_names = [name for name in self.tool_names if self.hooks.read_only(runtime.plugin_id, name)]
            self.kernel_tools.restrict_to_read_only()
        for name, definition in self.kernel_tools.definitions().items():
            if name not in self.available:
                self.available[name] = definition
                self.tool_names.append(name)

    def _offer_runtime_done(self) -> None:
        """completion {require: explicit}: runtime-done is one of the tools (a subagent's caller decides instead)."""
        if self.completion.require == "explicit" and RUNTIME_DONE not in self.available and self.subagent is None:
            add_runtime_done(self.kernel_tools)
            self.available[RUNTIME_DONE] = self.kernel_tools.definitions()[RUNTIME_DONE]
            self.tool_names.append(RUNTIME_DONE)

    def failed(self, reason: str) -> RuntimeOutcome:
        return RuntimeOutcome(OutcomeStatus.FAILED, reason, usage=self.usage, trace=self.trace, stop_reason=self.stop_reason or StopReason.ERROR)

    def _merge_interjections(self, conversation: list[dict[str, Any]]) -> None:
        if self.settings.steering:
            conversation.extend(interjection_message(text) for text in self.interjections())

    def _hook_interjections(self, progress: ExecutionProgress, texts: Any) -> list[str]:
        """PreStep's replace.interjections, merged as Interject's messages are; what could not be, as `ignored` notes."""
        if texts is None:
            return []
        if not self.settings.steering:
            return ["interjections: this run takes no interjections (agent.loop.steering)"]
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            return ["interjections: not a list of texts"]
        progress.conversation.extend(interjection_message(text) for text in texts if text.strip())
        return []

    def _completion_unmet(self, progress: ExecutionProgress) -> str:
        return self.completion.unmet(done_called=self.kernel_tools.done_called, finished_by_tool=progress.finish_output is not None,
                                     business_call=progress.successful_business_call)

    # -- the loop -----------------------------------------------------------------------------------
    async def run(self, progress: ExecutionProgress | None = None) -> RuntimeOutcome:
        """Rounds until one finishes the loop or fails it; a finished loop gets the completion check."""
        if self.unregistered_tools:
            return self.failed(
                f"tool-not-registered: agent.tools.plugin lists {', '.join(self.unregistered_tools)}, but the entry module of "
                f"{self.runtime.plugin_id} registered no such tool (covel.register_tool)")
        self._offer_runtime_done()
        progress = progress or ExecutionProgress.begin(self.messages, self.settings, time.monotonic())
        while True:
            ended = await self._round(progress)
            if isinstance(ended, RuntimeOutcome):
                return ended
            if ended is Next.FINISH:
                return self._finish(progress)

    async def _round(self, progress: ExecutionProgress) -> Next | RuntimeOutcome:
        """One model call and what follows from it: limits, PreStep, the call, its corrections, then the
        final answer or the tools."""
        limited = self._limits(progress)
        if limited is not None:
            return limited
        self._merge_interjections(progress.conversation)
        plan = await self._plan_step(progress)
        if not isinstance(plan, StepPlan):
            return plan
        reply = await self._call(progress, plan)
        if not isinstance(reply, ModelReply):
            return reply
        corrected = self._truncation(progress, reply)
        if corrected is None:
            corrected = await self._review(progress, reply)
        if corrected is not None:
            return corrected
        progress.steps_remaining -= 1
        if not progress.tools_offered or not reply.calls:
            return await self._final_answer(progress, reply)
        ended = await self._answer_tools(progress, reply.calls)
        self.continued = ended is Next.ROUND
        return ended

    # -- limits and PreStep -------------------------------------------------------------------------
    def _limits(self, progress: ExecutionProgress) -> RuntimeOutcome | None:
        """Out of steps: the finaliser or max-steps; close to the time limit: the finaliser."""
        settings = self.settings
        budget = loop_rules.step_budget(progress.steps_remaining, finalizing=progress.finalizing,
                                        finalizer_allowed=settings.finalizer_max_steps, tool_steps=progress.tool_steps,
                                        completion_met=not self._completion_unmet(progress))
        if budget == "fail":
            self.stop_reason = StopReason.MAX_STEPS
            return self.failed(f"max-steps: the agent used its {settings.max_steps} steps without finishing")
        if budget == "finalize":
            # The finalizer: tools off, one more request for the final answer (no PreStep for it).
            self._start_finalizer(progress, StopReason.MAX_STEPS)
        elif loop_rules.deadline_reserve_reached(progress.deadline - time.monotonic(), settings.deadline_reserve_s,
                                                 step=progress.step, finalizing=progress.finalizing,
                                                 completion_met=not self._completion_unmet(progress)):
            self._start_finalizer(progress, StopReason.DEADLINE)
        return None

    def _start_finalizer(self, progress: ExecutionProgress, stop_reason: StopReason) -> None:
        progress.finalizing = True
        self.finalizer_used = True
        self.stop_reason = stop_reason

    async def _plan_step(self, progress: ExecutionProgress) -> StepPlan | Next | RuntimeOutcome:
        """PreStep: this step's tools, tool choice, steps left and next prompt, or a stop. The finaliser and a
        tools-off answer have no PreStep. After a step that continued, the payload tells of it (`previous`)."""
        continued, self.continued = self.continued, False
        if not progress.tools_offered:
            return StepPlan([], "auto", max(progress.steps_remaining, 1))
        runtime = self.runtime
        progress.step += 1
        step_choice = loop_rules.correction_choice(self.base_choice) if progress.force_required else self.base_choice
        record = PreStep(progress.step, progress.steps_remaining, self.settings.max_steps, list(self.tool_names), step_choice,
                         self.settings.steering, previous_step(progress.conversation) if continued else None)
        pre_step = await self.hooks.dispatch(record, self.scope, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id)
        self.trace.extend(pre_step.trace)
        replaced = PreStepReply.of(pre_step)
        plan = apply_pre_step(self.tool_names, step_choice, progress.steps_remaining, replaced.replace, correcting=progress.force_required)
        if plan.next_prompt is not None:
            progress.conversation.append(next_prompt_message(plan.next_prompt))
        plan.ignored += self._hook_interjections(progress, replaced.interjections)
        if plan.ignored:
            # What the hook asked for that this step could not honour (spec: PreStep, step.completed).
            self.trace.append(framework_entry("step.completed", "ok", runtime.runtime_id, {"step": progress.step, "ignored": plan.ignored}))
        progress.steps_remaining = plan.steps_remaining
        if plan.stop is None:
            return plan
        if plan.stop["reason"] == "cancelled":
            self.stop_reason = StopReason.CANCELLED
            return self.failed(stopped_by_pre_step_error(runtime.runtime_id, plan.stop))
        self.stop_reason = StopReason.TOOL_FINISHED
        return Next.FINISH

    # -- the model call -----------------------------------------------------------------------------
    async def _call(self, progress: ExecutionProgress, plan: StepPlan) -> ModelReply | Next | RuntimeOutcome:
        """PreLLMCall, then one model call through the gateway; its usage counted, its streaming time credited."""
        remaining_s = progress.deadline - time.monotonic()
        if remaining_s <= 0:
            self.stop_reason = StopReason.TIMEOUT
            return self.failed(f"timeout: the runtime used its agent.loop.timeoutMs ({self.settings.timeout_ms} ms)")
        runtime = self.runtime
        call_messages = [{"role": "system", "content": self.system_prompt}, *progress.conversation]
        pre = await self.hooks.dispatch(
            PreLLMCall(call_messages, self.model, list(plan.tools), self.settings.stream, self.prompt_segments),
            self.scope, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
        )
        self.trace.extend(pre.trace)
        choices = apply_pre_llm_call(PreLLMCallReply.of(pre).payload, call_messages, self.model, plan.tools, available=self.available,
                                     tools_offered=progress.tools_offered, stream=self.settings.stream)
        final: gateway_pb2.GenerateResponse | None
        answered = await self._hook_answer(choices, remaining_s)
        if answered is not None:
            # A hook answered the call (replace.response, or a plugin's stream): the model is not asked.
            final, progress.content = answered
        else:
            request = self._request(choices, plan.tool_choice, remaining_s)
            # The gateway enforces the runtime's time; the gRPC deadline only guards against a lost peer.
            final, progress.content = await call_model(self.gateway, request, choices.stream, self.on_narrative,
                                                       remaining_s + STREAM_DEADLINE_SLACK_S)
        if final is None:
            return self.failed("the model stream ended without a final message")
        progress.deadline += final.streamed_ms / 1000
        if final.finish_reason == gateway_pb2.FINISH_REASON_CONTEXT_OVERFLOW:
            return self._context_overflow(progress, final)  # no model read it: nothing to count
        count_usage(self.usage, final)
        if final.finish_reason in (gateway_pb2.FINISH_REASON_ERROR, gateway_pb2.FINISH_REASON_INTERRUPTED):
            return self.failed(f"model call failed: {final.error_message or 'no reason given'}")
        return ModelReply(
            final, finish=gateway_pb2.FinishReason.Name(final.finish_reason).removeprefix("FINISH_REASON_").lower(),
            calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in final.message.tool_calls],
            sent_messages=choices.messages, streamed=choices.stream)

    async def _hook_answer(self, choices: CallChoices, remaining_s: float) -> tuple[gateway_pb2.GenerateResponse, str] | None:
        """PreLLMCall's replace.response, or a plugin's stream read to its end (replace.responseStream, agent/plugin_stream.py);
        None: the model answers (a plugin stream that failed: withdrawn from the player, noted on the trace)."""
        if choices.answer is not None:
            return hook_answer(choices.answer), choices.answer
        if choices.plugin_stream is None:
            return None
        runtime = self.runtime
        read = await read_plugin_stream(self.hooks, self.scope, runtime.plugin_id, runtime.runtime_id, choices.plugin_stream,
                                        stream_story=choices.stream, on_narrative=self.on_narrative,
                                        timeout_s=remaining_s + STREAM_DEADLINE_SLACK_S, idle_s=self.settings.idle_timeout_ms / 1000)
        if read.text is not None:
            return hook_answer(read.text, read.streamed_ms), read.text
        self.trace.append(framework_entry("model.plugin_stream_failed", "error", runtime.runtime_id, {
            "pluginId": choices.plugin_stream.plugin_id, "error": read.error, "then": "the model answers the call"}))
        return None

    def _request(self, choices: CallChoices, tool_choice: Any, remaining_s: float) -> gateway_pb2.GenerateRequest:
        settings, runtime, session = self.settings, self.runtime, self.scope.session
        request = gateway_pb2.GenerateRequest(
            slot=self.slot,
            model_override="" if choices.model == self.slot else choices.model,
            messages=[chat_message(m) for m in choices.messages],
            tools=[self.available[name] for name in choices.tools],
            tool_choice=wire_choice(tool_choice) if choices.tools else "",
            call_timeout_ms=settings.call_timeout_ms,
            first_token_timeout_ms=settings.first_token_timeout_ms,
            idle_timeout_ms=settings.idle_timeout_ms,
            timeout_ms=int(remaining_s * 1000),
            max_retries=settings.max_retries, reasoning=self.manifest.agent_part.reasoning,
            origin=gateway_pb2.CallOrigin(session_id=session.id, turn_id=self.scope.turn_id, runtime_id=runtime.runtime_id),
        )
        if self.response_format is not None:
            request.response_format.CopyFrom(self.response_format)
        return request

    # -- suspend and resume (agent/suspension.py) ------------------------------------------------------
    def _suspended(self, progress: ExecutionProgress) -> RuntimeOutcome:
        """The suspend tool was called: the run stops, its interaction shown, its state saved with the turn."""
        suspension = self.kernel_tools.suspension or {}
        self.stop_reason = StopReason.SUSPENDED
        return RuntimeOutcome(OutcomeStatus.SUSPENDED, "waiting for the player's answer", usage=self.usage, trace=self.trace, stop_reason=StopReason.SUSPENDED,
                              shown={"interactions": [suspension["interaction"]]},
                              suspension=saved_state(progress, self.system_prompt, self.kernel_tools, self.usage))

    async def resume(self, resume: Resume) -> RuntimeOutcome:
        """The saved run goes on: its prompt and conversation as they were, the answer as the suspend call's result."""
        self.system_prompt = str(resume.state.get("systemPrompt") or "")
        await self._resolve_tools()
        restore_writes(resume.state, self.kernel_tools)
        for name, value in (resume.state.get("usage") or {}).items():
            if name in self.usage and isinstance(value, int):
                self.usage[name] = value
        begun = ExecutionProgress.begin([], self.settings, time.monotonic())
        # The suspended step called tools (suspend) and the run goes on: it continued.
        self.continued = True
        return await self.run(resumed_progress(resume.state, resume.answer, begun))

    # -- completion ---------------------------------------------------------------------------------
    def _split(self, succeeded: RuntimeOutcome, output: dict[str, Any], *, from_tool: bool) -> RuntimeOutcome:
        try:
            business, shown, completion = completion_split(output, from_tool=from_tool)
        except ShownInvalid as error:
            return self.failed(f"output-schema-invalid: {error}")
        merged = {name: [*succeeded.shown.get(name, []), *shown.get(name, [])] for name in {*succeeded.shown, *shown}}
        return replace(succeeded, output=business, shown=merged, completion=completion)

    def _finish(self, progress: ExecutionProgress) -> RuntimeOutcome:
        """The one completion check at the loop's return, whichever way it ended (spec: 完成条件)."""
        unmet = self._completion_unmet(progress)
        self.usage["durationMs"] = int((time.monotonic() - progress.started) * 1000)
        self.stop_reason = self.stop_reason or StopReason.COMPLETED
        succeeded = RuntimeOutcome(OutcomeStatus.SUCCESS, usage=self.usage, trace=self.trace, events=self.kernel_tools.emitted,
                                   stop_reason=self.stop_reason, finalizer=self.finalizer_used, shown=dict(self.kernel_tools.shown))
        if unmet:
            return self.failed(unmet)
        if self.kernel_tools.shown_problem:
            return self.failed(f"output-schema-invalid: a tool's {self.kernel_tools.shown_problem}")
        if progress.finish_output is not None:
            return self._split(succeeded, progress.finish_output, from_tool=True)
        content, answer = progress.content, progress.answer
        if answer is None:
            # Effect fields in a story's or a schema-less agent's JSON do nothing either: logged the same way.
            log_model_effects(content, self.runtime.runtime_id)
        if not self.story:
            return self._split(succeeded, answer, from_tool=False) if answer is not None else replace(succeeded, output={"content": content})
        try:
            shaped = normalize_story(content)
        except EmptyStory:
            return self.failed("the story has no text")
        return replace(succeeded, reason=progress.notice, story=shaped, output=shaped.to_output())
