"""How one reply's tool calls run: read-only calls pooled, every call between its PreToolUse and
PostToolUse, and the result as the model reads it (spec: hooks-reference, 工具并发)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from covel.common.v1 import common_pb2
from services.scheduler.agent import loop_rules
from services.scheduler.agent.loop_profile import LoopSettings
from services.scheduler.agent.loop_state import ExecutionProgress, Next
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.framework_trace import skipped_tool_entries
from services.scheduler.execution.kernel_tools import EMIT_EVENT, RUNTIME_DONE, KernelTools
from services.scheduler.execution.outcome import RuntimeOutcome, StopReason
from services.scheduler.execution.tool_call_hooks import ToolResult, post_tool_use, pre_tool_use
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from shared.plugin_sdk.model_view import model_view_of

IsReadOnly = Callable[[str], bool]


def cancelled_result(call: dict[str, Any]) -> dict[str, Any]:
    """The tool message of a call a terminating hook skipped."""
    return {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(
        {"ok": False, "error": {"code": "cancelled", "message": "skipped: the tool loop was terminated"}})}


def model_result_text(result_text: str) -> str:
    """A tool result as the model reads it: `data` without bookkeeping ids and timestamps."""
    try:
        result = json.loads(result_text)
    except json.JSONDecodeError:
        return result_text
    if not isinstance(result, dict) or result.get("ok") is not True or "data" not in result:
        return result_text
    return json.dumps({**result, "data": model_view_of(result["data"])}, ensure_ascii=False)


def tool_batches(calls: list[dict[str, Any]], is_read_only: IsReadOnly) -> list[list[dict[str, Any]]]:
    """Consecutive read-only calls form one concurrent pool; any other call is a barrier run alone."""
    batches: list[list[dict[str, Any]]] = []
    for call in calls:
        if is_read_only(call["name"]) and batches and len(batches[-1]) and is_read_only(batches[-1][-1]["name"]):
            batches[-1].append(call)
        else:
            batches.append([call])
    return batches


async def run_batch(batch: list[dict[str, Any]], runtime: Runtime, scope: ExecutionScope, hooks: HookBus, tool_names: list[str],
                    trace: list[common_pb2.HookTraceEntry],
                    kernel_tools: KernelTools, is_read_only: IsReadOnly) -> list[ToolResult]:
    """A pool: every member's PreToolUse first, in model order; then the tools together; then
    every PostToolUse in model order. A member a hook rewrote into a non-read-only call waits and
    runs alone after the pool, keeping the hook result it already has."""
    prepared = [await pre_tool_use(call, runtime, scope, hooks, trace) for call in batch]
    # A call a PreToolUse hook answered (replace.result) does not run: its answer is its result.
    executed = {id(p): p[2] for p in prepared if p[0] is None and p[2] is not None}
    in_pool = [p for p in prepared if p[0] is None and id(p) not in executed and (len(batch) == 1 or is_read_only(p[1]["name"]))]
    pooled = await asyncio.gather(*(execute(p[1], runtime, scope, hooks, tool_names, kernel_tools) for p in in_pool))
    executed.update({id(p): text for p, text in zip(in_pool, pooled, strict=True)})
    for p in prepared:
        if p[0] is None and id(p) not in executed:
            executed[id(p)] = await execute(p[1], runtime, scope, hooks, tool_names, kernel_tools)
    results = []
    for p in prepared:
        refused, call, _ = p
        if refused is not None:
            # Refused: the model reads why; not an executed call, so no PostToolUse.
            results.append((refused, False, False))
            continue
        results.append(await post_tool_use(call, executed[id(p)], runtime, scope, hooks, trace))
    return results


async def execute(call: dict[str, Any], runtime: Runtime, scope: ExecutionScope, hooks: HookBus, tool_names: list[str], kernel_tools: KernelTools) -> str:
    if call["name"] not in tool_names:
        return json.dumps({"ok": False, "error": {
            "code": "unauthorized", "message": f"the tool {call['name']} is not available to this runtime",
            "hint": f"use one of: {', '.join(tool_names) or 'none'}"}})
    if call["name"] in kernel_tools:
        return await kernel_tools.call(call)
    plugin_data = await kernel_tools.plugin_data(runtime.plugin_id) if kernel_tools.plugin_data is not None else None
    world = await kernel_tools.world() if kernel_tools.world is not None else None
    return await hooks.call_tool(scope, runtime.plugin_id, runtime.runtime_id, call, kernel_tools.tool_writes,
                                 plugin_data=plugin_data, world=world)


class ToolSteps:
    """AgentLoop's tools step (a mixin: the attributes and the method below are AgentLoop's)."""

    runtime: Any
    scope: ExecutionScope
    hooks: HookBus
    kernel_tools: KernelTools
    settings: LoopSettings
    completion: loop_rules.Completion
    tool_names: list[str]
    trace: list[common_pb2.HookTraceEntry]
    stop_reason: str

    def failed(self, reason: str) -> RuntimeOutcome:
        raise NotImplementedError

    async def _answer_tools(self, progress: ExecutionProgress, calls: list[dict[str, Any]]) -> Next | RuntimeOutcome:
        """The reply's tool calls run and their results join the conversation; a completion tool or a
        terminating hook ends the loop, the same calls again and again are a loop to break."""
        progress.force_required = False
        progress.conversation.append({"role": "assistant", "content": progress.content, "tool_calls": calls})
        terminated = await self._run_tools(progress, calls)
        progress.tool_steps += 1
        if self.kernel_tools.suspension is not None:
            return self._suspended(progress)
        if progress.finish_output is not None or terminated:
            # afterTools / finishWith: a listed tool succeeded (or a hook terminated): no new request.
            self.stop_reason = StopReason.TOOL_FINISHED
            return Next.FINISH
        return self._detect_loop(progress, calls)

    def _suspended(self, progress: ExecutionProgress) -> RuntimeOutcome:
        raise NotImplementedError

    def _is_read_only(self, name: str) -> bool:
        return self.kernel_tools.is_read_only(name) if name in self.kernel_tools else self.hooks.read_only(self.runtime.plugin_id, name)

    async def _run_tools(self, progress: ExecutionProgress, calls: list[dict[str, Any]]) -> bool:
        """Each batch in order (read-only calls pooled); True when a hook or runtime-done terminated the loop."""
        terminated = False
        for batch in tool_batches(calls, self._is_read_only):
            if terminated:
                # A terminating hook skips the rest of the calls: each is closed as cancelled.
                for call in batch:
                    self.trace.extend(skipped_tool_entries(call, self.runtime.runtime_id, "terminated"))
                    progress.conversation.append(cancelled_result(call))
                continue
            results = await run_batch(batch, self.runtime, self.scope, self.hooks, self.tool_names, self.trace, self.kernel_tools,
                                      self._is_read_only)
            for call, (result_text, ok, terminate) in zip(batch, results, strict=True):
                progress.conversation.append({"role": "tool", "tool_call_id": call["id"], "content": model_result_text(result_text)})
                done = self._record_success(progress, call["name"], result_text) if ok else False
                terminated = terminated or terminate or done
        return terminated

    def _record_success(self, progress: ExecutionProgress, name: str, result_text: str) -> bool:
        """A successful call: True for runtime-done; a business call counts, a completion tool's data is the output."""
        if name == RUNTIME_DONE:
            return True
        if name != EMIT_EVENT:
            progress.successful_business_call = True
            # Only a completion tool's data is the output; after any other call the model reviews the
            # result and its final answer is the output (spec: require tool-use without afterTools).
            data = json.loads(result_text).get("data") if result_text.startswith("{") else None
            if name in self.completion.after_tools:
                progress.finish_output = data if isinstance(data, dict) else {"value": data}
            elif name not in self.kernel_tools and isinstance(data, dict):
                # A plugin tool's forms and UI blocks are the run's effects (spec: Agent 的输出).
                self.kernel_tools.note_shown(data)
        return False

    def _detect_loop(self, progress: ExecutionProgress, calls: list[dict[str, Any]]) -> Next | RuntimeOutcome:
        """The same calls loopDetection times in a row: a perturbation (tell the model it is going round
        in circles), then the fallback: an answer without tools, or failure."""
        signature = loop_rules.call_signature(calls)
        progress.repeats = progress.repeats + 1 if signature == progress.last_signature else 1
        progress.last_signature = signature
        verdict = loop_rules.loop_verdict(progress.repeats, loop_detection=self.settings.loop_detection,
                                          perturbations_left=progress.perturbations_left, fallback=self.settings.fallback)
        if verdict == "perturb":
            progress.perturbations_left -= 1
            progress.repeats = 0
            progress.conversation.append({"role": "user", "content": loop_rules.LOOP_PERTURBATION})
        elif verdict == "tools-off":
            progress.tools_off = True
        elif verdict == "fail":
            self.stop_reason = StopReason.LOOP_DETECTED
            return self.failed(f"loop-detected: the same tool call was repeated {progress.repeats} times")
        return Next.ROUND
