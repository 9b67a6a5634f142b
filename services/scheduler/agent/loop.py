"""The agent loop: assemble a runtime's context, then step (PreStep, PreLLMCall, the model,
PostLLMResponse, tools) until it answers, completes or fails, and shape what it produced.

The loop's behaviour comes from its profile (agent/loop_profile.py); the tools the kernel answers
itself are in agent/tools.py; subagents (ctx.agents.run, delegate) run through the same loop.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from covel.registry.v1 import registry_pb2
from services.scheduler.agent.context import assemble, framework_preamble, resolve_bootstrap, runtime_prompt, static_segments
from services.scheduler.agent.loop_profile import MIN_ANSWER_TIME_S, loop_settings
from services.scheduler.agent.model_view import model_facing
from services.scheduler.agent.story_stream import SegmentTextStream, StreamedPiece
from services.scheduler.agent.tools import EMIT_EVENT, RUNTIME_DONE, KernelTools, add_emit_event, add_runtime_done
from services.scheduler.contracts import NARRATIVE_ENGINE, kernel_contract_schema
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.rules import (
    StepPlan,
    apply_post_tool_use,
    apply_pre_step,
    apply_pre_tool_use,
    refused_tool_result,
    stopped_by_pre_step_error,
)
from services.scheduler.turn.story_output import EmptyStory, Story, normalize_story, story_problems
from shared import json_schemas
from shared.logs import get_logger
from shared.structs import from_struct, to_struct

OnNarrative = Callable[[StreamedPiece], Awaitable[None]]
# Added to a call's gRPC deadline: a long steady stream may outlive timeoutMs (spec).
STREAM_DEADLINE_SLACK_S = 600.0
LOOP_PERTURBATION = (
    "You have made the same tool call several times in a row with the same arguments. "
    "It will not give a different result: change your approach, or answer now."
)
REPAIR_PROMPT = "Your reply was not a valid story. Answer again with the complete story as one JSON object. Problems:"
REPAIR_PROMPT_JSON = "Your answer does not fit the required output. Answer again with the complete answer as one JSON object. Problems:"
TRUNCATION_HINT = "Your last reply was cut off at the output limit. Write only what the task needs."


@dataclass
class RuntimeOutcome:
    status: str  # success | failed | skipped
    reason: str = ""
    story: Story | None = None
    output: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    trace: list[common_pb2.HookTraceEntry] = field(default_factory=list)
    run_id: str = ""
    # plugin.data writes ({namespace, key, value}) a function runtime proposes.
    writes: list[dict[str, Any]] = field(default_factory=list)
    # Events ({topic, payload}) the runtime emitted; they count only if it succeeds.
    events: list[dict[str, Any]] = field(default_factory=list)
    # Upstream runtimes whose buffered plugin data this runtime read.
    read_from: set[str] = field(default_factory=set)
    # A guard returned {skip: true, ...}: skipped, yet its output binds and its writes commit.
    guard_skipped: bool = False
    # A function's business value as returned (output is its projection).
    canonical_value: Any = None
    has_value: bool = False
    # Why an agent loop ended (completed, tool-finished, max-steps, deadline, timeout, …), and whether
    # the finaliser (tools off, one last request) gave the answer.
    stop_reason: str = ""
    finalizer: bool = False
    # Writes of other plugins' write services this runtime called ({pluginId, type, payload}).
    foreign_writes: list[dict[str, Any]] = field(default_factory=list)


def _manifest_get(manifest: dict[str, Any], *path: str, default: Any = None) -> Any:
    node: Any = manifest
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def is_story_runtime(runtime: registry_pb2.RuntimeManifest) -> bool:
    return runtime.visibility == "story"


def _response_format(manifest: dict[str, Any], story: bool, schemas: list[tuple[str, dict[str, Any]]] | None = None
                     ) -> gateway_pb2.ResponseFormat | None:
    schema_ref = _manifest_get(manifest, "io", "output", "schema")
    contract = _manifest_get(manifest, "io", "output", "contract")
    if story and (schema_ref == f"contract:{NARRATIVE_ENGINE}" or contract == NARRATIVE_ENGINE):
        return gateway_pb2.ResponseFormat(name=NARRATIVE_ENGINE, schema=to_struct(kernel_contract_schema(NARRATIVE_ENGINE)))
    if not story and schemas:
        # A system agent's private schema and published contract: the answer must fit both.
        schema = schemas[0][1] if len(schemas) == 1 else {"allOf": [schema for _, schema in schemas]}
        return gateway_pb2.ResponseFormat(name=str(contract or "output").replace("@", "-"), schema=to_struct(schema))
    return None


@dataclass
class SubagentCall:
    """A subagent run: the brief is its only user message; no history, hooks or streaming of its own."""

    brief: str
    budget: dict[str, Any] = field(default_factory=dict)
    call_id: str = ""
    parent_runtime_id: str = ""


# Fields a model may write in its final JSON that only tools can produce: stripped (spec: Agent 的输出).
EFFECT_FIELDS = ("statePatches", "pluginData", "notifications", "assetGenerations", "interactions", "ui")
log = get_logger(component="agent_runtime")


def split_effects(value: dict[str, Any], runtime_id: str) -> dict[str, Any]:
    """The business output of a model's final JSON: effect fields (and events with a topic) dropped, logged."""
    dropped = [name for name in EFFECT_FIELDS if name in value]
    kept = {key: item for key, item in value.items() if key not in EFFECT_FIELDS}
    events = kept.get("events")
    if isinstance(events, list) and any(isinstance(e, dict) and "topic" in e for e in events):
        kept["events"] = [e for e in events if not (isinstance(e, dict) and "topic" in e)]
        dropped.append("events[].topic")
    if dropped:
        log.warning("model-written effect fields ignored", runtime_id=runtime_id, fields=dropped)
    return kept


def log_model_effects(content: str, runtime_id: str) -> None:
    """A final answer that is JSON: any effect field in it is dropped with the usual warning."""
    value, _ = parse_json_answer(content) if content.lstrip().startswith(("{", "`")) else (None, "")
    if value is not None:
        split_effects(value, runtime_id)


def _interjection_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": f"(The player interjects) {text}"}


def _framework_entry(event: str, status: str, runtime_id: str, detail: dict[str, Any]) -> common_pb2.HookTraceEntry:
    """A trace record of the loop itself (not of a hook handler); its details as JSON in `message`."""
    return common_pb2.HookTraceEntry(event=event, handler_plugin_id="framework", status=status, runtime_id=runtime_id,
                                     message=json.dumps(detail, ensure_ascii=False))


def skipped_tool_entries(call: dict[str, Any], runtime_id: str, skip_reason: str) -> list[common_pb2.HookTraceEntry]:
    """tool.calling / tool.failed of a call that never ran: a PreToolUse abort ("hook-aborted") or a
    terminated loop ("terminated"). Not an executed call, not a failure (spec: hooks-reference)."""
    detail = {"toolCallId": call.get("id", ""), "name": call.get("name", ""), "skipped": True, "skipReason": skip_reason}
    return [_framework_entry(event, "skipped", runtime_id, detail) for event in ("tool.calling", "tool.failed")]


def parse_json_answer(content: str) -> tuple[dict[str, Any] | None, str]:
    """A system agent's final answer as a JSON object (a ```json fence is allowed); or the problem."""
    text = content.strip()
    fenced = re.match(r"^```(?:json)?\s*(.*?)\s*```$", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    if not text:
        return None, "the answer is empty"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        return None, f"the answer is not JSON: {error.msg} at line {error.lineno} column {error.colno}"
    if not isinstance(value, dict):
        return None, "the answer must be one JSON object"
    return value, ""


def schema_problems(value: Any, schemas: list[tuple[str, dict[str, Any]]]) -> list[str]:
    problems: list[str] = []
    for label, schema in schemas:
        for error in sorted(json_schemas.validator(schema, draft_from_schema=False).iter_errors(value), key=lambda e: list(e.absolute_path)):
            where = "/" + "/".join(str(p) for p in error.absolute_path) if error.absolute_path else "(root)"
            problems.append(f"{where}: {error.message} ({label})")
    return problems


async def run_agent(
    *,
    runtime: registry_pb2.RuntimeManifest,
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
    packages: list | None = None,
    manifest: dict[str, Any] | None = None,
    kernel_tools: KernelTools | None = None,
    output_schemas: list[tuple[str, dict[str, Any]]] | None = None,
    subagent: SubagentCall | None = None,
    interjections: Callable[[], list[str]] | None = None,
    extra_segments: list[dict[str, Any]] | None = None,
) -> RuntimeOutcome:
    """One agent execution: context assembly, then steps until an answer, a completion or a failure."""
    loop = AgentLoop(
        runtime=runtime, scope=scope, gateway=gateway, hooks=hooks, on_narrative=on_narrative,
        manifest=manifest if manifest is not None else from_struct(runtime.manifest),
        kernel_tools=kernel_tools if kernel_tools is not None else KernelTools(),
        output_schemas=output_schemas or [], subagent=subagent, interjections=interjections,
    )
    loop.extra_segments = list(extra_segments or [])
    if event_topics and EMIT_EVENT not in loop.kernel_tools and subagent is None:
        add_emit_event(loop.kernel_tools, event_topics)
    await loop.prepare(history, player_message, history_max_turns, inputs, self_data, packages or [])
    return await loop.run()


class AgentLoop:
    def __init__(self, *, runtime, scope: ExecutionScope, gateway, hooks: HookBus, on_narrative: OnNarrative,
                 manifest: dict[str, Any], kernel_tools: KernelTools, output_schemas, subagent: SubagentCall | None,
                 interjections) -> None:
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
        self.settings = loop_settings(_manifest_get(manifest, "agent", "loop", default={}) or {}, story=self.story,
                                      subagent=subagent is not None, budget=subagent.budget if subagent else None)
        self.output_schemas = [] if self.story else list(output_schemas)
        self.trace: list[common_pb2.HookTraceEntry] = []
        self.usage = {"promptTokens": 0, "completionTokens": 0}
        self.stop_reason = ""
        self.finalizer_used = False
        self.unregistered_tools: list[str] = []
        # prompt.segment@1 segments computed for this execution (agent/prompt_segments.py).
        self.extra_segments: list[dict[str, Any]] = []

    # -- context ------------------------------------------------------------------------------------
    async def prepare(self, history, player_message: str, history_max_turns: int, inputs, self_data, packages) -> None:
        runtime, session = self.runtime, self.scope.session
        if self.subagent is not None:
            # Its own conversation: the provider's prompt with the framework's frame, then the brief.
            self.system_prompt, self.messages = assemble(runtime, session.locale, False, [], self.subagent.brief, 0)
            self.prompt_segments = []
        else:
            max_turns = _manifest_get(self.manifest, "agent", "history", "maxTurns", default=history_max_turns)
            segments = static_segments(runtime, self.story, packages, session.locale) + list(self.extra_segments)
            self.prompt_segments = [{"pluginId": seg["pluginId"], "id": seg.get("id", "")} for seg in segments]
            bootstrap = await resolve_bootstrap(self.hooks, self.scope, runtime, packages)  # agent:bootstrap
            # A limited window (agent.history.maxTurns) reads the summary only when it asks (includeSummaries: true);
            # without a window the prompt reads the shared history, summary included (spec: 历史窗口里的摘要).
            windowed = _manifest_get(self.manifest, "agent", "history", "maxTurns") is not None
            include_summaries = _manifest_get(self.manifest, "agent", "history", "includeSummaries", default=not windowed) is True
            self.system_prompt, self.messages = assemble(
                runtime, session.locale, self.story, history, player_message, max_turns, inputs, self_data, segments, bootstrap,
                include_summaries)
            await self._post_context_assembly()
        self.available: dict[str, gateway_pb2.ToolDefinition] = {}
        wanted = tools_wanted(self.manifest)
        if wanted:
            self.available.update(await self.hooks.tools(runtime.plugin_id))
        # A declared plugin tool the entry module never registered fails the run (spec: Agent 能用哪些工具).
        self.unregistered_tools = [name for name in wanted
                                   if name not in self.available and name not in self.kernel_tools and name != RUNTIME_DONE]
        self.tool_names = [name for name in wanted if name in self.available]
        if self.subagent is not None:
            # A subagent only gets read-only tools.
            self.tool_names = [name for name in self.tool_names if self.hooks.read_only(runtime.plugin_id, name)]
            self.kernel_tools.restrict_to_read_only()
        for name, definition in self.kernel_tools.definitions().items():
            if name not in self.available:
                self.available[name] = definition
                self.tool_names.append(name)

    async def _post_context_assembly(self) -> None:
        assembled = await self.hooks.dispatch(
            "PostContextAssembly", self.scope,
            {"systemPrompt": self.system_prompt, "messages": self.messages, "outputKind": "story" if self.story else "system",
             "promptTemplate": runtime_prompt(self.runtime, self.scope.session.locale), "promptSegments": self.prompt_segments},
            plugin_id=self.runtime.plugin_id, runtime_id=self.runtime.runtime_id,
        )
        self.trace.extend(assembled.trace)
        if assembled.payload.get("systemPrompt") != self.system_prompt:
            # The framework's own preamble always comes first, whatever a hook wrote.
            preamble = framework_preamble(self.runtime, self.scope.session.locale, self.story)
            replaced = str(assembled.payload.get("systemPrompt") or "")
            self.system_prompt = replaced if replaced.startswith(preamble) else f"{preamble}\n\n{replaced}"
        if isinstance(assembled.payload.get("messages"), list):
            self.messages = assembled.payload["messages"]

    def failed(self, reason: str) -> RuntimeOutcome:
        return RuntimeOutcome("failed", reason, usage=self.usage, trace=self.trace, stop_reason=self.stop_reason or "error")

    def _merge_interjections(self, conversation: list[dict[str, Any]]) -> None:
        if self.settings.steering:
            conversation.extend(_interjection_message(text) for text in self.interjections())

    # -- the loop -----------------------------------------------------------------------------------
    async def run(self) -> RuntimeOutcome:  # noqa: C901 - the spec's loop reads best as one sequence of rules
        runtime, scope, settings, hooks = self.runtime, self.scope, self.settings, self.hooks
        manifest = self.manifest
        story = self.story
        slot = _manifest_get(manifest, "agent", "model", default="story" if is_story_runtime(runtime) else "plugin")
        corrections = settings.corrections
        timeout_s = settings.timeout_ms / 1000
        # Time spent streaming output does not count against timeoutMs: each call's streamed_ms moves the deadline.
        deadline = time.monotonic() + timeout_s
        max_steps = settings.max_steps
        response_format = _response_format(manifest, story, self.output_schemas)
        model = scope.session.runtime_model_overrides.get(runtime.runtime_id, "") or slot
        if self.unregistered_tools:
            return self.failed(
                f"tool-not-registered: agent.tools.plugin lists {', '.join(self.unregistered_tools)}, but the entry module of "
                f"{runtime.plugin_id} registered no such tool (covel.register_tool)")
        finish_with = _manifest_get(manifest, "agent", "finishWith")
        completion = _manifest_get(manifest, "agent", "completion", default={}) or {}
        finish_tools = set(completion.get("afterTools") or ([finish_with] if finish_with else []))
        # finishWith is completion {require: tool-use, afterTools: [it]} (spec: 完成条件).
        require = completion.get("require") or ("tool-use" if finish_with else "")
        base_choice = _manifest_get(manifest, "agent", "toolChoice", default="required" if finish_with else "auto")
        if require == "explicit" and RUNTIME_DONE not in self.available and self.subagent is None:
            add_runtime_done(self.kernel_tools)
            self.available[RUNTIME_DONE] = self.kernel_tools.definitions()[RUNTIME_DONE]
            self.tool_names.append(RUNTIME_DONE)
        tool_names = self.tool_names
        available = self.available

        conversation = list(self.messages)
        reviews_used = tool_use_corrections = 0
        repairs_left = corrections["outputRepair"]
        perturbations_left = corrections["loopPerturbation"]
        finalizing = tools_off = False
        tool_steps = repeats = 0
        last_signature = ""
        successful_business_call = False
        steps_remaining = max_steps
        step = 0
        started = time.monotonic()
        content = ""
        finish_output: dict[str, Any] | None = None
        force_required = False
        truncation_retried = False
        notice = ""
        answer: dict[str, Any] | None = None
        # Story drafts answered before a late interjection: an output repair leaves them out.
        drafts: list[dict[str, Any]] = []

        def completion_problem() -> str:
            """Why the completion condition is not met yet ("" when it is, or when there is none)."""
            if require == "explicit" and not (self.kernel_tools.done_called or finish_output is not None):
                return "completion: the agent finished without runtime-done or a completion tool"
            if require == "tool-use" and finish_tools and finish_output is None:
                return f"completion: the agent finished without a successful call of {', '.join(sorted(finish_tools))}"
            if require == "tool-use" and not finish_tools and not successful_business_call:
                return "completion: the agent finished without a successful call of one of its tools"
            return ""

        while True:
            if steps_remaining <= 0 and not finalizing:
                if settings.finalizer_max_steps and tool_steps and not completion_problem():
                    # The finalizer: tools off, one more request for the final answer (no PreStep for it).
                    finalizing = True
                    self.finalizer_used = True
                    self.stop_reason = "max-steps"
                else:
                    self.stop_reason = "max-steps"
                    return self.failed(f"max-steps: the agent used its {max_steps} steps without finishing")
            remaining_s = deadline - time.monotonic()
            if (not finalizing and step and settings.deadline_reserve_s and remaining_s < settings.deadline_reserve_s
                    and remaining_s >= MIN_ANSWER_TIME_S and not completion_problem() and finish_output is None):
                # Close to the time limit, text alone can finish this runtime: tools off, ask for the answer.
                finalizing = True
                self.finalizer_used = True
                self.stop_reason = "deadline"
            self._merge_interjections(conversation)
            if finalizing or tools_off:
                plan = StepPlan([], "auto", max(steps_remaining, 1))
            else:
                step += 1
                step_choice = "required" if force_required else base_choice
                step_payload = {"step": step, "stepsRemaining": steps_remaining, "maxSteps": max_steps,
                                "toolNames": list(tool_names), "toolChoice": step_choice}
                pre_step = await hooks.dispatch("PreStep", scope, step_payload, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id)
                self.trace.extend(pre_step.trace)
                plan = apply_pre_step(tool_names, step_choice, steps_remaining, _replaced(step_payload, pre_step.payload),
                                      correcting=force_required)
                if plan.ignored:
                    # What the hook asked for that this step could not honour (spec: PreStep, step.completed).
                    self.trace.append(_framework_entry("step.completed", "ok", runtime.runtime_id,
                                                       {"step": step, "ignored": plan.ignored}))
                steps_remaining = plan.steps_remaining
                if plan.stop is not None:
                    if plan.stop["reason"] == "cancelled":
                        self.stop_reason = "cancelled"
                        return self.failed(stopped_by_pre_step_error(runtime.runtime_id, plan.stop))
                    self.stop_reason = "tool-finished"
                    break
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                self.stop_reason = "timeout"
                return self.failed(f"timeout: the runtime used its agent.loop.timeoutMs ({timeout_s * 1000:.0f} ms)")
            call_messages = [{"role": "system", "content": self.system_prompt}, *conversation]
            pre = await hooks.dispatch(
                "PreLLMCall", scope,
                {"messages": call_messages, "model": model, "tools": list(plan.tools), "stream": settings.stream,
                 "promptSegments": self.prompt_segments},
                plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
            )
            self.trace.extend(pre.trace)
            # A PreLLMCall replace changes this one call; the runtime's own conversation stays as it is.
            replaced_messages, replaced_model = pre.payload.get("messages"), pre.payload.get("model")
            sent_messages = replaced_messages if isinstance(replaced_messages, list) else call_messages
            call_model = replaced_model if isinstance(replaced_model, str) and replaced_model else model
            call_tools = ([name for name in pre.payload.get("tools", plan.tools) if name in available]
                          if isinstance(pre.payload.get("tools"), list) else plan.tools)
            if finalizing or tools_off:
                call_tools = []
            stream = settings.stream and pre.payload.get("stream") is not False
            request = gateway_pb2.GenerateRequest(
                slot=slot,
                model_override="" if call_model == slot else call_model,
                messages=[_chat_message(m) for m in sent_messages],
                tools=[available[name] for name in call_tools],
                tool_choice=_wire_choice(plan.tool_choice) if call_tools else "",
                call_timeout_ms=settings.call_timeout_ms,
                first_token_timeout_ms=settings.first_token_timeout_ms,
                idle_timeout_ms=settings.idle_timeout_ms,
                timeout_ms=int(remaining_s * 1000),
                max_retries=settings.max_retries,
                origin=gateway_pb2.CallOrigin(session_id=scope.session.id, turn_id=scope.turn_id, runtime_id=runtime.runtime_id),
            )
            if response_format is not None:
                request.response_format.CopyFrom(response_format)
            # The gateway enforces the runtime's time; the gRPC deadline only guards against a lost peer.
            final, content = await _call_model(self.gateway, request, stream, self.on_narrative, remaining_s + STREAM_DEADLINE_SLACK_S)
            if final is None:
                return self.failed("the model stream ended without a final message")
            deadline += final.streamed_ms / 1000
            self.usage["promptTokens"] += final.usage.prompt_tokens
            self.usage["completionTokens"] += final.usage.completion_tokens
            if final.finish_reason in (gateway_pb2.FINISH_REASON_ERROR, gateway_pb2.FINISH_REASON_INTERRUPTED):
                return self.failed(f"model call failed: {final.error_message or 'no reason given'}")
            finish = gateway_pb2.FinishReason.Name(final.finish_reason).removeprefix("FINISH_REASON_").lower()
            calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in final.message.tool_calls]
            if finish in ("length", "other"):
                if settings.truncation == "accept" and not calls and content.strip():
                    # The story profile accepts a cut-off story: the player keeps it, with a notice.
                    notice = ("the story may stop mid-sentence (the model hit its output limit)" if finish == "length"
                              else "the provider stopped without saying why; this part may be unfinished: retry the turn")
                elif finish == "length" and not truncation_retried:
                    # Truncated tool calls and JSON are unusable: one new attempt, asking for less.
                    truncation_retried = True
                    conversation.append({"role": "user", "content": TRUNCATION_HINT})
                    continue
                elif finish == "length":
                    return self.failed("truncated: the reply hit the model's output limit twice; raise the output limit of this slot")
                else:
                    return self.failed("finish-other: the provider stopped the reply without saying why")
            reviewed = await hooks.dispatch(
                "PostLLMResponse", scope,
                {"response": {"content": content, "finishReason": finish, "toolCalls": calls, "usage": {
                    "promptTokens": final.usage.prompt_tokens, "completionTokens": final.usage.completion_tokens,
                    "totalTokens": final.usage.prompt_tokens + final.usage.completion_tokens}}, "messages": sent_messages},
                plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
            )
            self.trace.extend(reviewed.trace)
            correction = reviewed.payload.get("correction")
            if isinstance(correction, str) and correction.strip():
                if reviews_used >= corrections["review"]:
                    return self.failed(
                        f"invalid-output: a PostLLMResponse hook asked for another correction after the review budget "
                        f"({corrections['review']}) was used"
                    )
                reviews_used += 1
                if stream:
                    # What was streamed of the rejected draft is withdrawn before the new answer streams.
                    await self.on_narrative(StreamedPiece("", reset=True))
                conversation += [{"role": "assistant", "content": content}, {"role": "user", "content": correction}]
                continue
            response = reviewed.payload.get("response")
            if isinstance(response, dict) and isinstance(response.get("content"), str) and response["content"] != content:
                content = response["content"]
            steps_remaining -= 1
            if finalizing or tools_off:
                calls = []
            if not calls:
                unmet = completion_problem()
                if unmet and not finalizing:
                    # A plain-text answer before the completion condition holds: one correction, then failure.
                    if tool_use_corrections >= corrections["toolUse"]:
                        return self.failed(unmet)
                    # The corrected request must call a tool.
                    tool_use_corrections += 1
                    force_required = True
                    if stream:
                        # The streamed prose is not the answer: withdrawn before the corrected reply streams.
                        await self.on_narrative(StreamedPiece("", reset=True))
                    choices = sorted(finish_tools | ({RUNTIME_DONE} if require == "explicit" else set()))
                    wanted = " or ".join(choices) or "one of your tools"
                    conversation += [{"role": "assistant", "content": content},
                                     {"role": "user", "content": f"You must finish by calling {wanted}."}]
                    continue
                if (settings.steering and not finalizing and steps_remaining > 0
                        and deadline - time.monotonic() >= MIN_ANSWER_TIME_S):
                    # Steering after the text is written: what the player said meanwhile is merged and the
                    # model answers again with it in view (spec: agent.loop.steering).
                    late = self.interjections()
                    if late:
                        draft = {"role": "assistant", "content": content}
                        drafts.append(draft)
                        conversation += [draft, *(_interjection_message(text) for text in late)]
                        notice = ""
                        if stream:
                            await self.on_narrative(StreamedPiece("", reset=True))
                        continue
                problems, answer = self._answer_problems(content, response_format, finish_output)
                # Only an answer that ended normally is repaired (an accepted cut-off story is kept as it is).
                if problems and not notice and repairs_left > 0 and deadline - time.monotonic() >= MIN_ANSWER_TIME_S:
                    # Output repair: one tool-less request listing what was wrong (at most 5 problems). It does
                    # not re-send the old draft, nor drafts written before an interjection (spec: 输出修复).
                    repairs_left -= 1
                    tools_off = True
                    if stream:
                        await self.on_narrative(StreamedPiece("", reset=True))
                    listed = "\n".join(f"- {problem}" for problem in problems[:5])
                    conversation = [m for m in conversation if not any(m is d for d in drafts)]
                    conversation.append({"role": "user", "content": f"{REPAIR_PROMPT if story else REPAIR_PROMPT_JSON}\n{listed}"})
                    continue
                if problems and not story and self.output_schemas and finish_output is None:
                    return self.failed(f"invalid-output: {problems[0]}")
                break
            force_required = False
            conversation.append({"role": "assistant", "content": content, "tool_calls": calls})
            terminated = False
            is_read_only = (lambda name: self.kernel_tools.is_read_only(name) if name in self.kernel_tools
                            else hooks.read_only(runtime.plugin_id, name))
            for batch in tool_batches(calls, is_read_only):
                if terminated:
                    # A terminating hook skips the rest of the calls: each is closed as cancelled.
                    for call in batch:
                        self.trace.extend(skipped_tool_entries(call, runtime.runtime_id, "terminated"))
                        conversation.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(
                            {"ok": False, "error": {"code": "cancelled", "message": "skipped: the tool loop was terminated"}})})
                    continue
                for call, (result_text, ok, terminate) in zip(batch, await _run_batch(
                        batch, runtime, scope, hooks, tool_names, self.trace, self.kernel_tools, is_read_only), strict=True):
                    conversation.append({"role": "tool", "tool_call_id": call["id"], "content": model_result_text(result_text)})
                    if ok and call["name"] == RUNTIME_DONE:
                        terminate = True
                    elif ok and call["name"] != EMIT_EVENT:
                        successful_business_call = True
                        # Only a completion tool's data is the output; after any other call the model reviews
                        # the result and its final answer is the output (spec: require tool-use without afterTools).
                        if call["name"] in finish_tools:
                            data = json.loads(result_text).get("data") if result_text.startswith("{") else None
                            finish_output = data if isinstance(data, dict) else {"value": data}
                    terminated = terminated or terminate
            tool_steps += 1
            if finish_output is not None:
                # afterTools / finishWith: a listed tool succeeded, so the runtime ends without asking again.
                self.stop_reason = "tool-finished"
                break
            if terminated:
                self.stop_reason = "tool-finished"
                break
            signature = json.dumps([[c["name"], c["arguments"]] for c in calls], sort_keys=True)
            repeats = repeats + 1 if signature == last_signature else 1
            last_signature = signature
            if settings.loop_detection and repeats >= settings.loop_detection:
                if perturbations_left > 0:
                    # Perturbation: tell the model it is going round in circles, then let it try again.
                    perturbations_left -= 1
                    repeats = 0
                    conversation.append({"role": "user", "content": LOOP_PERTURBATION})
                elif settings.fallback == "answer-without-tools":
                    tools_off = True
                else:
                    self.stop_reason = "loop-detected"
                    return self.failed(f"loop-detected: the same tool call was repeated {repeats} times")
        return self._finish(content, notice, answer, finish_output, completion_problem(), started)

    def _answer_problems(self, content: str, response_format, finish_output) -> tuple[list[str], dict[str, Any] | None]:
        """What is wrong with a final answer (story shape, or a system agent's JSON against its schemas)."""
        if self.story:
            if response_format is not None:
                return story_problems(content), None
            # A plain-text story is repaired only when it is empty (spec: 故事正文为空).
            return ([] if content.strip() else ["the story is empty"]), None
        if not self.output_schemas or finish_output is not None:
            return [], None
        value, problem = parse_json_answer(content)
        if value is None:
            return [problem], None
        value = split_effects(value, self.runtime.runtime_id)
        return schema_problems(value, self.output_schemas), value

    def _finish(self, content, notice, answer, finish_output, completion_unmet: str, started) -> RuntimeOutcome:
        """The one completion check at the loop's return, whichever way it ended (spec: 完成条件)."""
        self.usage["durationMs"] = int((time.monotonic() - started) * 1000)
        self.stop_reason = self.stop_reason or "completed"
        succeeded = RuntimeOutcome("success", usage=self.usage, trace=self.trace, events=self.kernel_tools.emitted,
                                   stop_reason=self.stop_reason, finalizer=self.finalizer_used)
        if completion_unmet:
            return self.failed(completion_unmet)
        if finish_output is not None:
            return replace(succeeded, output=finish_output)
        if answer is None:
            # Effect fields in a story's or a schema-less agent's JSON do nothing either: logged the same way.
            log_model_effects(content, self.runtime.runtime_id)
        if not self.story:
            output = answer if answer is not None else {"content": content}
            return replace(succeeded, output=output)
        try:
            shaped = normalize_story(content)
        except EmptyStory:
            return self.failed("the story has no text")
        return replace(succeeded, reason=notice, story=shaped, output=shaped.to_output())


def model_result_text(result_text: str) -> str:
    """A tool result as the model reads it: `data` without bookkeeping ids and timestamps."""
    try:
        result = json.loads(result_text)
    except json.JSONDecodeError:
        return result_text
    if not isinstance(result, dict) or result.get("ok") is not True or "data" not in result:
        return result_text
    return json.dumps({**result, "data": model_facing(result["data"])}, ensure_ascii=False)


def tools_wanted(manifest: dict[str, Any]) -> list[str]:
    """agent.tools.plugin: the plugin tools this runtime may call (the registry fills the inline default)."""
    wanted = _manifest_get(manifest, "agent", "tools", "plugin", default=[]) or []
    return [name for name in wanted if isinstance(name, str)]


def _replaced(original: dict[str, Any], merged: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in merged.items() if key not in original or original[key] != value}


def _wire_choice(choice: Any) -> str:
    if isinstance(choice, dict):
        return str(choice.get("name", "auto"))
    return str(choice)


def tool_batches(calls: list[dict[str, Any]], is_read_only) -> list[list[dict[str, Any]]]:
    """Consecutive read-only calls form one concurrent pool; any other call is a barrier run alone."""
    batches: list[list[dict[str, Any]]] = []
    for call in calls:
        if is_read_only(call["name"]) and batches and len(batches[-1]) and is_read_only(batches[-1][-1]["name"]):
            batches[-1].append(call)
        else:
            batches.append([call])
    return batches


async def _run_batch(batch, runtime, scope, hooks: HookBus, tool_names: list[str], trace, kernel_tools: KernelTools,
                     is_read_only) -> list[tuple[str, bool, bool]]:
    """A pool: every member's PreToolUse first, in model order; then the tools together; then
    every PostToolUse in model order. A member a hook rewrote into a non-read-only call waits and
    runs alone after the pool, keeping the hook result it already has."""
    prepared = [await _pre_tool(call, runtime, scope, hooks, trace) for call in batch]
    in_pool = [p for p in prepared if p[0] is None and (len(batch) == 1 or is_read_only(p[1]["name"]))]
    pooled = await asyncio.gather(*(_execute(p[1], runtime, scope, hooks, tool_names, kernel_tools) for p in in_pool))
    executed = {id(p): text for p, text in zip(in_pool, pooled, strict=True)}
    for p in prepared:
        if p[0] is None and id(p) not in executed:
            executed[id(p)] = await _execute(p[1], runtime, scope, hooks, tool_names, kernel_tools)
    results = []
    for p in prepared:
        refused, call = p
        if refused is not None:
            # Refused: the model reads why; not an executed call, so no PostToolUse.
            results.append((refused, False, False))
            continue
        results.append(await _post_tool(call, executed[id(p)], runtime, scope, hooks, trace))
    return results


async def _pre_tool(call, runtime, scope, hooks: HookBus, trace) -> tuple[str | None, dict[str, Any]]:
    pre = await hooks.dispatch("PreToolUse", scope, {"toolCall": call}, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id)
    trace.extend(pre.trace)
    if pre.aborted:
        trace.extend(skipped_tool_entries(call, runtime.runtime_id, "hook-aborted"))
        return json.dumps(refused_tool_result(pre.reason), ensure_ascii=False), call
    return None, apply_pre_tool_use(call, _replaced({"toolCall": call}, pre.payload))


async def _execute(call, runtime, scope, hooks: HookBus, tool_names: list[str], kernel_tools: KernelTools) -> str:
    if call["name"] not in tool_names:
        return json.dumps({"ok": False, "error": {
            "code": "unauthorized", "message": f"the tool {call['name']} is not available to this runtime",
            "hint": f"use one of: {', '.join(tool_names) or 'none'}"}})
    if call["name"] in kernel_tools:
        return await kernel_tools.call(call)
    return await hooks.call_tool(scope, runtime.plugin_id, runtime.runtime_id, call, kernel_tools.tool_writes)


async def _post_tool(call, result_text: str, runtime, scope, hooks: HookBus, trace) -> tuple[str, bool, bool]:
    ok = json.loads(result_text).get("ok") is True
    original = {"result": result_text, "success": ok}
    post = await hooks.dispatch(
        "PostToolUse", scope, {"toolCall": call, "result": original}, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
    )
    trace.extend(post.trace)
    outcome = apply_post_tool_use(original, _replaced({"toolCall": call, "result": original}, post.payload))
    text = outcome.result.get("result")
    return (text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)), ok, outcome.terminate


def _chat_message(message: Any) -> gateway_pb2.ChatMessage:
    if not isinstance(message, dict):
        return gateway_pb2.ChatMessage(role="user", content=str(message))
    return gateway_pb2.ChatMessage(
        role=str(message.get("role", "user")),
        content=str(message.get("content") or ""),
        tool_calls=[
            gateway_pb2.ToolCall(id=str(c.get("id", "")), name=str(c.get("name", "")), arguments=str(c.get("arguments", "")))
            for c in message.get("tool_calls") or [] if isinstance(c, dict)
        ],
        tool_call_id=str(message.get("tool_call_id") or ""),
    )


async def _call_model(
    gateway: gateway_pb2_grpc.LlmGatewayStub,
    request: gateway_pb2.GenerateRequest,
    stream_story: bool,
    on_narrative: OnNarrative,
    timeout_s: float,
) -> tuple[gateway_pb2.GenerateResponse | None, str]:
    """One model call; a story's text streams to the player as it arrives."""
    if not stream_story:
        reply = await gateway.GenerateOnce(request, timeout=timeout_s)
        return reply, reply.message.content
    text_stream = SegmentTextStream()
    final: gateway_pb2.GenerateResponse | None = None
    parts: list[str] = []
    async for event in gateway.Generate(request, timeout=timeout_s):
        kind = event.WhichOneof("event")
        if kind == "content_delta":
            parts.append(event.content_delta)
            for piece in text_stream.feed(event.content_delta):
                await on_narrative(piece)
        elif kind == "final":
            final = event.final
    content = (final.message.content if final is not None else "") or "".join(parts)
    return final, content
