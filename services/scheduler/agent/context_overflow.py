"""The context-overflow finalizer (spec: 循环 profile, finalizer.maxSteps): when a request no longer fits the
model's context window, the loop trims its oldest tool steps as far as the window needs and asks once more, tools
off, for the final answer.

The gateway says a request does not fit (finish reason context_overflow, with the window and its estimate of the
request: services/gateway/context_window.py). Then, as for the step limit, the finalizer needs
`agent.loop.finalizer.maxSteps` (on by default; `finalizer: false` turns both off), at least one complete tool step
(an assistant message with tool calls and all their results) and the completion condition met; and it runs once.
It drops whole tool steps, oldest first, until the conversation with the finalizer's notice fits the window less an
eighth kept for the answer (all of them when the provider refused without saying its window), keeps the last
step's results when it can, and tells the model what was left out. The run's stop reason is `context-overflow`,
its outcome marked finalizer; the trace has an `agent.context_overflow` entry of plugin `framework` with the window,
the estimate, the steps dropped and the tools they called. Otherwise the run fails, reason `context-overflow: ...`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2
from services.scheduler.agent.loop_profile import LoopSettings
from services.scheduler.agent.loop_state import ExecutionProgress, Next
from services.scheduler.execution.framework_trace import framework_entry
from services.scheduler.execution.outcome import RuntimeOutcome, StopReason
from shared.model_context import request_tokens

OVERFLOW_NOTICE = (
    "The conversation no longer fits the model's context: {count} earlier tool step(s) ({tools}) were left out. "
    "Do not call tools. Answer now, with your final answer, from what you have."
)
# The part of the window kept free for the answer.
ANSWER_SHARE = 8


@dataclass(frozen=True)
class Trimmed:
    conversation: list[dict[str, Any]]
    dropped_steps: int
    dropped_tools: list[str]
    estimate: int


def tool_steps(conversation: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Each complete tool step as (start, end): an assistant message with tool calls, then a result of each call."""
    steps = []
    for start, message in enumerate(conversation):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            continue
        end = start + 1
        while end < len(conversation) and conversation[end].get("role") == "tool":
            end += 1
        answered = {str(m.get("tool_call_id")) for m in conversation[start + 1 : end]}
        if {str(call.get("id")) for call in calls} <= answered:
            steps.append((start, end))
    return steps


def _size(system_prompt: str, conversation: list[dict[str, Any]]) -> int:
    messages = [[system_prompt]] + [
        [str(m.get("content") or ""), *(f"{c.get('name', '')} {c.get('arguments', '')}" for c in m.get("tool_calls") or [])]
        for m in conversation
    ]
    return request_tokens(messages)


def _notice(dropped: list[tuple[int, int]], conversation: list[dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    tools = [str(call.get("name", "")) for start, _ in dropped for call in conversation[start].get("tool_calls") or []]
    text = OVERFLOW_NOTICE.format(count=len(dropped), tools=", ".join(dict.fromkeys(tools)) or "none")
    return {"role": "user", "content": text}, tools


def trim(system_prompt: str, conversation: list[dict[str, Any]], window: int) -> Trimmed | None:
    """The conversation with the oldest tool steps dropped until it fits `window` (0: unknown, drop them all) with
    room for the answer, and the notice last; None when even dropping every tool step does not make it fit."""
    steps = tool_steps(conversation)
    budget = window - window // ANSWER_SHARE if window else 0
    for count in range(1, len(steps) + 1) if window else [len(steps)]:
        dropped = steps[:count]
        gone = {index for start, end in dropped for index in range(start, end)}
        notice, tools = _notice(dropped, conversation)
        kept = [message for index, message in enumerate(conversation) if index not in gone] + [notice]
        estimate = _size(system_prompt, kept)
        if not window or estimate <= budget:
            return Trimmed(kept, count, tools, estimate)
    return None


class OverflowSteps:
    """AgentLoop's context-overflow step (a mixin: the attributes and methods below are AgentLoop's)."""

    runtime: Any
    settings: LoopSettings
    system_prompt: str
    trace: list[common_pb2.HookTraceEntry]
    stop_reason: str

    def failed(self, reason: str) -> RuntimeOutcome:
        raise NotImplementedError

    def _completion_unmet(self, progress: ExecutionProgress) -> str:
        raise NotImplementedError

    def _start_finalizer(self, progress: ExecutionProgress, stop_reason: StopReason) -> None:
        raise NotImplementedError

    def _context_overflow(self, progress: ExecutionProgress, final: gateway_pb2.GenerateResponse) -> Next | RuntimeOutcome:
        """The request did not fit: the finalizer on a trimmed conversation, or the run fails."""
        window, estimate = int(final.context_window), int(final.prompt_tokens_estimate)
        detail: dict[str, Any] = {"contextWindow": window, "promptTokens": estimate, "model": final.model}
        why = self._why_not(progress)
        trimmed = None if why else trim(self.system_prompt, progress.conversation, window)
        if trimmed is None:
            why = why or "it does not fit even without its tool results"
            self.stop_reason = StopReason.CONTEXT_OVERFLOW
            self.trace.append(
                framework_entry(
                    "agent.context_overflow", "error", self.runtime.runtime_id, {**detail, "finalizer": False, "why": why}
                )
            )
            return self.failed(f"context-overflow: {final.error_message}; no finalizer: {why}")
        progress.conversation = trimmed.conversation
        progress.overflow_trimmed = True
        self._start_finalizer(progress, StopReason.CONTEXT_OVERFLOW)
        self.trace.append(
            framework_entry(
                "agent.context_overflow",
                "ok",
                self.runtime.runtime_id,
                {
                    **detail,
                    "finalizer": True,
                    "droppedToolSteps": trimmed.dropped_steps,
                    "droppedTools": trimmed.dropped_tools,
                    "trimmedTokens": trimmed.estimate,
                },
            )
        )
        return Next.ROUND

    def _why_not(self, progress: ExecutionProgress) -> str:
        if not self.settings.finalizer_max_steps:
            return "agent.loop.finalizer is off"
        if progress.overflow_trimmed:
            return "the finalizer's trimmed request did not fit either"
        if not progress.tool_steps:
            return "the run has no complete tool step to leave out"
        unmet = self._completion_unmet(progress)
        return f"the completion condition is not met ({unmet})" if unmet else ""
