"""Run an agent runtime: assemble its context, call the gateway, stream and shape its story.

This first version runs story agents without tools (one model call); the full agent loop
(steps, tools, completion, corrections) builds on it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from covel.registry.v1 import registry_pb2
from services.scheduler.context_assembly import assemble, framework_preamble, static_segments
from services.scheduler.hook_bus import ExecutionScope, HookBus
from services.scheduler.hook_rules import (
    StepPlan,
    apply_post_tool_use,
    apply_pre_step,
    apply_pre_tool_use,
    refused_tool_result,
    stopped_by_pre_step_error,
)
from services.scheduler.story_output import EmptyStory, Story, normalize_story, story_problems
from services.scheduler.story_stream import SegmentTextStream, StreamedPiece
from shared.contracts import NARRATIVE_ENGINE, kernel_contract_schema
from shared.structs import from_struct, to_struct

OnNarrative = Callable[[StreamedPiece], Awaitable[None]]
# agent.loop.corrections.review: how often PostLLMResponse may send a draft back (spec default).
DEFAULT_REVIEW_CORRECTIONS = 2
# agent.loop.maxSteps when the manifest sets none.
DEFAULT_MAX_STEPS = 8
# Added to a call's gRPC deadline: a long steady stream may outlive timeoutMs (spec).
STREAM_DEADLINE_SLACK_S = 600.0
LOOP_PERTURBATION = (
    "You have made the same tool call several times in a row with the same arguments. "
    "It will not give a different result: change your approach, or answer now."
)
REPAIR_PROMPT = "Your reply was not a valid story. Answer again with the complete story as one JSON object. Problems:"
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


def _manifest_get(manifest: dict[str, Any], *path: str, default: Any = None) -> Any:
    node: Any = manifest
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def is_story_runtime(runtime: registry_pb2.RuntimeManifest) -> bool:
    return runtime.visibility == "story"


def _response_format(manifest: dict[str, Any], story: bool) -> gateway_pb2.ResponseFormat | None:
    schema_ref = _manifest_get(manifest, "io", "output", "schema")
    contract = _manifest_get(manifest, "io", "output", "contract")
    if story and (schema_ref == f"contract:{NARRATIVE_ENGINE}" or contract == NARRATIVE_ENGINE):
        return gateway_pb2.ResponseFormat(name=NARRATIVE_ENGINE, schema=to_struct(kernel_contract_schema(NARRATIVE_ENGINE)))
    return None


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
) -> RuntimeOutcome:
    manifest = manifest if manifest is not None else from_struct(runtime.manifest)
    story = is_story_runtime(runtime)
    session = scope.session
    max_turns = _manifest_get(manifest, "agent", "history", "maxTurns", default=history_max_turns)
    segments = static_segments(runtime, story, packages or [])
    prompt_segments = [{"pluginId": seg["pluginId"], "id": seg.get("id", "")} for seg in segments]
    system_prompt, messages = assemble(runtime, session.locale, story, history, player_message, max_turns, inputs, self_data, segments)
    trace: list[common_pb2.HookTraceEntry] = []

    assembled = await hooks.dispatch(
        "PostContextAssembly",
        scope,
        {"systemPrompt": system_prompt, "messages": messages, "outputKind": "story" if story else "system",
         "promptTemplate": runtime.prompt, "promptSegments": prompt_segments},
        plugin_id=runtime.plugin_id,
        runtime_id=runtime.runtime_id,
    )
    trace.extend(assembled.trace)
    if assembled.payload.get("systemPrompt") != system_prompt:
        # The framework's own preamble always comes first, whatever a hook wrote.
        preamble = framework_preamble(runtime, session.locale, story)
        replaced = str(assembled.payload.get("systemPrompt") or "")
        system_prompt = replaced if replaced.startswith(preamble) else f"{preamble}\n\n{replaced}"
    if isinstance(assembled.payload.get("messages"), list):
        messages = assembled.payload["messages"]

    slot = _manifest_get(manifest, "agent", "model", default="story" if story else "plugin")
    loop = _manifest_get(manifest, "agent", "loop", default={}) or {}
    review_budget = int(_manifest_get(loop, "corrections", "review", default=DEFAULT_REVIEW_CORRECTIONS))
    timeout_s = int(loop.get("timeoutMs", 240_000 if story else 120_000)) / 1000
    max_retries = int(loop.get("maxRetries", 1 if story else 3))
    # Time spent streaming output does not count against timeoutMs: each call's streamed_ms moves the deadline.
    deadline = time.monotonic() + timeout_s
    max_steps = int(loop.get("maxSteps") or DEFAULT_MAX_STEPS)
    response_format = _response_format(manifest, story)
    model = session.runtime_model_overrides.get(runtime.runtime_id, "") or slot
    finish_with = _manifest_get(manifest, "agent", "finishWith")
    completion = _manifest_get(manifest, "agent", "completion", default={}) or {}
    finish_tools = set(completion.get("afterTools") or ([finish_with] if finish_with else []))
    needs_tool_use = completion.get("require") in ("tool-use", "explicit") or bool(finish_with)
    base_choice = _manifest_get(manifest, "agent", "toolChoice", default="required" if finish_with else "auto")
    available = dict(await hooks.tools(runtime.plugin_id)) if tools_wanted(manifest) else {}
    tool_names = [name for name in tools_wanted(manifest) if name in available]
    # Builtin tools the kernel answers itself: runtime-done where explicit completion is asked for,
    # emit-event where the package declares event topics.
    if completion.get("require") == "explicit":
        available[RUNTIME_DONE] = builtin_tool(RUNTIME_DONE)
        tool_names.append(RUNTIME_DONE)
    if event_topics:
        available[EMIT_EVENT] = builtin_tool(EMIT_EVENT, event_topics)
        tool_names.append(EMIT_EVENT)
    emitted: list[dict[str, Any]] = []
    done_called = False

    conversation = list(messages)
    corrections_used = 0
    tool_use_corrections = 0
    corrections = loop.get("corrections") or {}
    tool_use_budget = int(corrections.get("toolUse", 1))
    repairs_left = int(corrections.get("outputRepair", 1))
    perturbations_left = int(corrections.get("loopPerturbation", 1))
    loop_detection = int(loop.get("loopDetection", 3))
    loop_fallback = loop.get("fallback") or ("answer-without-tools" if story else "fail")
    finalizer_max_steps = (loop.get("finalizer") or {}).get("maxSteps", True) is not False
    finalizing = False
    tools_off = False
    tool_steps = 0
    repeats = 0
    last_signature = ""
    successful_business_call = False
    steps_remaining = max_steps
    step = 0
    started = time.monotonic()
    usage = {"promptTokens": 0, "completionTokens": 0}
    content = ""
    finish_output: dict[str, Any] | None = None
    force_required = False
    truncation_retried = False
    notice = ""

    def failed(reason: str) -> RuntimeOutcome:
        return RuntimeOutcome("failed", reason, usage=usage, trace=trace)

    while True:
        if steps_remaining <= 0 and not finalizing:
            completion_pending = needs_tool_use and finish_output is None and bool(finish_tools)
            if finalizer_max_steps and tool_steps and not completion_pending:
                # The finalizer: tools off, one more request for the final answer (no PreStep for it).
                finalizing = True
            else:
                return failed(f"max-steps: the agent used its {max_steps} steps without finishing")
        if finalizing or tools_off:
            plan = StepPlan([], "auto", max(steps_remaining, 1))
        else:
            step += 1
            step_choice = "required" if force_required else base_choice
            step_payload = {"step": step, "stepsRemaining": steps_remaining, "maxSteps": max_steps,
                            "toolNames": list(tool_names), "toolChoice": step_choice}
            pre_step = await hooks.dispatch("PreStep", scope, step_payload, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id)
            trace.extend(pre_step.trace)
            plan = apply_pre_step(tool_names, step_choice, steps_remaining, _replaced(step_payload, pre_step.payload), correcting=force_required)
            steps_remaining = plan.steps_remaining
            if plan.stop is not None:
                if plan.stop["reason"] == "cancelled":
                    return failed(stopped_by_pre_step_error(runtime.runtime_id, plan.stop))
                break
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            return failed(f"timeout: the runtime used its agent.loop.timeoutMs ({timeout_s * 1000:.0f} ms)")
        call_messages = [{"role": "system", "content": system_prompt}, *conversation]
        pre = await hooks.dispatch(
            "PreLLMCall", scope,
            {"messages": call_messages, "model": model, "tools": list(plan.tools), "stream": True, "promptSegments": prompt_segments},
            plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
        )
        trace.extend(pre.trace)
        # A PreLLMCall replace changes this one call; the runtime's own conversation stays as it is.
        sent_messages = pre.payload.get("messages") if isinstance(pre.payload.get("messages"), list) else call_messages
        call_model = pre.payload.get("model") if isinstance(pre.payload.get("model"), str) and pre.payload.get("model") else model
        call_tools = [name for name in pre.payload.get("tools", plan.tools) if name in available] if isinstance(pre.payload.get("tools"), list) else plan.tools
        if finalizing or tools_off:
            call_tools = []
        stream = pre.payload.get("stream") is not False
        request = gateway_pb2.GenerateRequest(
            slot=slot,
            model_override="" if call_model == slot else call_model,
            messages=[_chat_message(m) for m in sent_messages],
            tools=[available[name] for name in call_tools],
            tool_choice=_wire_choice(plan.tool_choice) if call_tools else "",
            call_timeout_ms=int(loop.get("callTimeoutMs", 0) or 0),
            first_token_timeout_ms=int(loop.get("firstTokenTimeoutMs", 0) or 0),
            idle_timeout_ms=int(loop.get("idleTimeoutMs", 0) or 0),
            timeout_ms=int(remaining_s * 1000),
            max_retries=max_retries,
            origin=gateway_pb2.CallOrigin(session_id=session.id, turn_id=scope.turn_id, runtime_id=runtime.runtime_id),
        )
        if response_format is not None:
            request.response_format.CopyFrom(response_format)
        # The gateway enforces the runtime's time; the gRPC deadline only guards against a lost peer.
        final, content = await _call_model(gateway, request, stream and story, on_narrative, remaining_s + STREAM_DEADLINE_SLACK_S)
        if final is not None:
            deadline += final.streamed_ms / 1000
        if final is not None:
            usage["promptTokens"] += final.usage.prompt_tokens
            usage["completionTokens"] += final.usage.completion_tokens
        if final is None:
            return failed("the model stream ended without a final message")
        if final.finish_reason in (gateway_pb2.FINISH_REASON_ERROR, gateway_pb2.FINISH_REASON_INTERRUPTED):
            return failed(f"model call failed: {final.error_message or 'no reason given'}")
        finish = gateway_pb2.FinishReason.Name(final.finish_reason).removeprefix("FINISH_REASON_").lower()
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in final.message.tool_calls]
        if finish in ("length", "other"):
            if story and not calls and content.strip():
                # The story profile accepts a cut-off story: the player keeps it, with a notice.
                notice = ("the story may stop mid-sentence (the model hit its output limit)" if finish == "length"
                          else "the provider stopped without saying why; this part may be unfinished: retry the turn")
            elif finish == "length" and not truncation_retried:
                # Truncated tool calls and JSON are unusable: one new attempt, asking for less.
                truncation_retried = True
                conversation.append({"role": "user", "content": TRUNCATION_HINT})
                continue
            elif finish == "length":
                return failed("truncated: the reply hit the model's output limit twice; raise the output limit of this slot")
            else:
                return failed("finish-other: the provider stopped the reply without saying why")
        reviewed = await hooks.dispatch(
            "PostLLMResponse", scope,
            {"response": {"content": content, "finishReason": finish, "toolCalls": calls}, "messages": sent_messages},
            plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
        )
        trace.extend(reviewed.trace)
        correction = reviewed.payload.get("correction")
        if isinstance(correction, str) and correction.strip():
            if corrections_used >= review_budget:
                return failed(
                    f"invalid-output: a PostLLMResponse hook asked for another correction after the review budget ({review_budget}) was used"
                )
            corrections_used += 1
            if story:
                # What was streamed of the rejected draft is withdrawn before the new answer streams.
                await on_narrative(StreamedPiece("", reset=True))
            conversation += [{"role": "assistant", "content": content}, {"role": "user", "content": correction}]
            continue
        response = reviewed.payload.get("response")
        if isinstance(response, dict) and isinstance(response.get("content"), str) and response["content"] != content:
            content = response["content"]
        steps_remaining -= 1
        if finalizing or tools_off:
            calls = []
        if not calls:
            if needs_tool_use and not (successful_business_call and not finish_tools) and not finalizing:
                if tool_use_corrections >= tool_use_budget:
                    wanted = ", ".join(sorted(finish_tools)) or "a tool"
                    return failed(f"completion: the agent finished without a successful call of {wanted}")
                # A correction, and the corrected request must call a tool.
                tool_use_corrections += 1
                force_required = True
                wanted = " or ".join(sorted(finish_tools)) or "one of your tools"
                conversation += [{"role": "assistant", "content": content},
                                 {"role": "user", "content": f"You must finish by calling {wanted}."}]
                continue
            problems = story_problems(content) if story and response_format is not None else []
            # Only an answer that ended normally is repaired (an accepted cut-off story is kept as it is).
            if problems and not notice and repairs_left > 0 and deadline - time.monotonic() >= 3:
                # Output repair: one tool-less request listing what was wrong (at most 5 problems).
                repairs_left -= 1
                tools_off = True
                await on_narrative(StreamedPiece("", reset=True))
                listed = "\n".join(f"- {problem}" for problem in problems[:5])
                conversation += [{"role": "assistant", "content": content},
                                 {"role": "user", "content": f"{REPAIR_PROMPT}\n{listed}"}]
                continue
            break
        force_required = False
        conversation.append({"role": "assistant", "content": content, "tool_calls": calls})
        terminated = False
        for batch in tool_batches(calls, lambda name: hooks.read_only(runtime.plugin_id, name)):
            if terminated:
                # A terminating hook skips the rest of the calls: each is closed as cancelled.
                for call in batch:
                    conversation.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(
                        {"ok": False, "error": {"code": "cancelled", "message": "skipped: the tool loop was terminated"}})})
                continue
            for call, (result_text, ok, terminate) in zip(batch, await _run_batch(
                    batch, runtime, scope, hooks, tool_names, trace, builtins={RUNTIME_DONE: None, EMIT_EVENT: emitted})):
                conversation.append({"role": "tool", "tool_call_id": call["id"], "content": result_text})
                if ok and call["name"] == RUNTIME_DONE:
                    done_called = True
                    terminate = True
                elif ok and call["name"] == EMIT_EVENT:
                    pass
                elif ok:
                    successful_business_call = True
                    if call["name"] in finish_tools or (not finish_tools and completion.get("require") == "tool-use"):
                        data = json.loads(result_text).get("data") if result_text.startswith("{") else None
                        finish_output = data if isinstance(data, dict) else {"value": data}
                terminated = terminated or terminate
        tool_steps += 1
        if finish_output is not None and (finish_with or completion.get("afterTools")):
            break
        if terminated:
            break
        signature = json.dumps([[c["name"], c["arguments"]] for c in calls], sort_keys=True)
        repeats = repeats + 1 if signature == last_signature else 1
        last_signature = signature
        if loop_detection and repeats >= loop_detection:
            if perturbations_left > 0:
                # Perturbation: tell the model it is going round in circles, then let it try again.
                perturbations_left -= 1
                repeats = 0
                conversation.append({"role": "user", "content": LOOP_PERTURBATION})
            elif loop_fallback == "answer-without-tools":
                tools_off = True
            else:
                return failed(f"loop-detected: the same tool call was repeated {repeats} times")
    usage["durationMs"] = int((time.monotonic() - started) * 1000)
    if completion.get("require") == "explicit" and not done_called and finish_output is None:
        return failed("completion: the agent finished without runtime-done or a completion tool")
    if finish_output is not None:
        return RuntimeOutcome("success", output=finish_output, usage=usage, trace=trace, events=emitted)
    if done_called and not story:
        return RuntimeOutcome("success", output={"content": content}, usage=usage, trace=trace, events=emitted)
    if needs_tool_use and finish_tools:
        return failed(f"completion: the agent finished without a successful call of {', '.join(sorted(finish_tools))}")
    if not story:
        return RuntimeOutcome("success", output={"content": content}, usage=usage, trace=trace, events=emitted)
    try:
        shaped = normalize_story(content)
    except EmptyStory:
        return RuntimeOutcome("failed", "the story has no text", usage=usage, trace=trace)
    return RuntimeOutcome("success", notice, story=shaped, output=shaped.to_output(), usage=usage, trace=trace, events=emitted)


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


async def _run_batch(batch, runtime, scope, hooks: HookBus, tool_names: list[str], trace, builtins=None) -> list[tuple[str, bool, bool]]:
    """A pool: every member's PreToolUse first, in model order; then the tools together; then
    every PostToolUse in model order. A member a hook rewrote into a non-read-only call waits and
    runs alone after the pool, keeping the hook result it already has."""
    prepared = [await _pre_tool(call, runtime, scope, hooks, trace) for call in batch]
    in_pool = [p for p in prepared if p[0] is None and (len(batch) == 1 or hooks.read_only(runtime.plugin_id, p[1]["name"]))]
    pooled = await asyncio.gather(*(_execute(p[1], runtime, scope, hooks, tool_names, builtins) for p in in_pool))
    executed = {id(p): text for p, text in zip(in_pool, pooled)}
    for p in prepared:
        if p[0] is None and id(p) not in executed:
            executed[id(p)] = await _execute(p[1], runtime, scope, hooks, tool_names, builtins)
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
        return json.dumps(refused_tool_result(pre.reason), ensure_ascii=False), call
    return None, apply_pre_tool_use(call, _replaced({"toolCall": call}, pre.payload))


async def _execute(call, runtime, scope, hooks: HookBus, tool_names: list[str], builtins=None) -> str:
    if call["name"] not in tool_names:
        return json.dumps({"ok": False, "error": {
            "code": "unauthorized", "message": f"the tool {call['name']} is not available to this runtime",
            "hint": f"use one of: {', '.join(tool_names) or 'none'}"}})
    if builtins is not None and call["name"] in builtins:
        return json.dumps(builtin_result(call, builtins), ensure_ascii=False)
    return await hooks.call_tool(scope, runtime.plugin_id, runtime.runtime_id, call)


RUNTIME_DONE = "runtime-done"
EMIT_EVENT = "emit-event"


def builtin_tool(name: str, topics: list[str] | None = None) -> gateway_pb2.ToolDefinition:
    if name == RUNTIME_DONE:
        return gateway_pb2.ToolDefinition(
            name=name, description="Finish this runtime: the work is done (or there was nothing to do).",
            parameters=to_struct({"type": "object", "properties": {"summary": {"type": "string"}}}),
        )
    return gateway_pb2.ToolDefinition(
        name=name, description="Emit a plugin event; runtimes that follow its topic run after this turn's stages.",
        parameters=to_struct({"type": "object", "required": ["topic"], "properties": {
            "topic": {"type": "string", "enum": list(topics or [])}, "payload": {"type": "object"}}}),
    )


def builtin_result(call: dict[str, Any], builtins: dict[str, Any]) -> dict[str, Any]:
    """The kernel's answer to a builtin tool call, in the unified result shape."""
    try:
        args = json.loads(call.get("arguments") or "{}")
    except json.JSONDecodeError as error:
        return {"ok": False, "error": {"code": "invalid-input", "message": f"arguments are not JSON: {error}"}}
    if call["name"] == RUNTIME_DONE:
        return {"ok": True, "data": {"done": True}}
    topic = args.get("topic") if isinstance(args, dict) else None
    if not isinstance(topic, str) or not topic:
        return {"ok": False, "error": {"code": "invalid-input", "message": "topic is required", "hint": "use a declared topic"}}
    builtins[EMIT_EVENT].append({"topic": topic, "payload": args.get("payload")})
    return {"ok": True, "data": {"emitted": topic}}


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
