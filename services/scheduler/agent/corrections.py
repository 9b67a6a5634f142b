"""The correction rounds of the agent loop: a cut-off reply, a PostLLMResponse review, a text answer
before the completion condition holds, what the player said while the story was written, and an
output repair (spec: Agent 循环, 输出修复). Each either asks the model again or ends the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2
from services.scheduler.agent import loop_rules
from services.scheduler.agent.answers import answer_problems
from services.scheduler.agent.loop_profile import MIN_ANSWER_TIME_S, LoopSettings
from services.scheduler.agent.loop_state import ExecutionProgress, ModelReply, Next
from services.scheduler.agent.model_call import OnNarrative
from services.scheduler.agent.story_stream import StreamedPiece
from services.scheduler.execution.outcome import RuntimeOutcome
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.payloads import PostLLMResponse
from services.scheduler.hooks.replies import PostLLMResponseReply


def interjection_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": f"(The player interjects) {text}"}


class CorrectionSteps:
    """AgentLoop's correction steps (a mixin: the attributes and the two methods below are AgentLoop's)."""

    runtime: Any
    scope: ExecutionScope
    hooks: HookBus
    on_narrative: OnNarrative
    interjections: Callable[[], list[str]]
    settings: LoopSettings
    story: bool
    output_schemas: list[tuple[str, dict[str, Any]]]
    response_format: gateway_pb2.ResponseFormat | None
    completion: loop_rules.Completion
    trace: list[common_pb2.HookTraceEntry]

    def failed(self, reason: str) -> RuntimeOutcome:
        raise NotImplementedError

    def _completion_unmet(self, progress: ExecutionProgress) -> str:
        raise NotImplementedError

    async def _withdraw_streamed(self, reply: ModelReply) -> None:
        """What streamed of a reply that is not the answer is withdrawn before the next one streams."""
        if reply.streamed:
            await self.on_narrative(StreamedPiece("", reset=True))

    def _truncation(self, progress: ExecutionProgress, reply: ModelReply) -> Next | RuntimeOutcome | None:
        """A cut-off reply: a story keeps it with a notice; otherwise one new attempt asking for less, then failure."""
        verdict, text = loop_rules.truncation(reply.finish, accept=self.settings.truncation == "accept", has_calls=bool(reply.calls),
                                              has_text=bool(progress.content.strip()), retried=progress.truncation_retried)
        if verdict == "accept":
            progress.notice = text
        elif verdict == "retry":
            progress.truncation_retried = True
            progress.conversation.append({"role": "user", "content": text})
            return Next.ROUND
        elif verdict == "fail":
            return self.failed(text)
        return None

    async def _review(self, progress: ExecutionProgress, reply: ModelReply) -> Next | RuntimeOutcome | None:
        """PostLLMResponse: a hook's correction (within the review budget) asks again; its replaced content is the reply."""
        usage, runtime = reply.final.usage, self.runtime
        reviewed = await self.hooks.dispatch(
            PostLLMResponse(progress.content, reply.finish, reply.calls, usage.prompt_tokens, usage.completion_tokens, reply.sent_messages),
            self.scope, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
        )
        self.trace.extend(reviewed.trace)
        review = PostLLMResponseReply.of(reviewed)
        correction = review.correction
        if correction is not None:
            budget = self.settings.corrections["review"]
            if progress.reviews_used >= budget:
                return self.failed(
                    f"invalid-output: a PostLLMResponse hook asked for another correction after the review budget ({budget}) was used")
            progress.reviews_used += 1
            await self._withdraw_streamed(reply)
            progress.conversation += [{"role": "assistant", "content": progress.content}, {"role": "user", "content": correction}]
            return Next.ROUND
        if review.content is not None:
            progress.content = review.content
        return None

    async def _final_answer(self, progress: ExecutionProgress, reply: ModelReply) -> Next | RuntimeOutcome:
        """A reply without tool calls (or with tools off): corrected while the completion condition does
        not hold, answered again with what the player said meanwhile, repaired when malformed; else the end."""
        unmet = self._completion_unmet(progress)
        if unmet and not progress.finalizing:
            return await self._correct_tool_use(progress, reply, unmet)
        if await self._steer_late(progress, reply):
            return Next.ROUND
        problems, progress.answer = answer_problems(
            progress.content, story=self.story, structured_story=self.response_format is not None,
            output_schemas=self.output_schemas, finished_by_tool=progress.finish_output is not None, runtime_id=self.runtime.runtime_id)
        if loop_rules.repair_wanted(problems, notice=progress.notice, repairs_left=progress.repairs_left,
                                    remaining_s=progress.deadline - time.monotonic()):
            await self._repair(progress, reply, problems)
            return Next.ROUND
        if problems and not self.story and self.output_schemas and progress.finish_output is None:
            return self.failed(f"invalid-output: {problems[0]}")
        return Next.FINISH

    async def _correct_tool_use(self, progress: ExecutionProgress, reply: ModelReply, unmet: str) -> Next | RuntimeOutcome:
        """A plain-text answer before the completion condition holds: one correction (the next request must
        call a tool), then failure."""
        if progress.tool_use_corrections >= self.settings.corrections["toolUse"]:
            return self.failed(unmet)
        progress.tool_use_corrections += 1
        progress.force_required = True
        # The streamed prose is not the answer.
        await self._withdraw_streamed(reply)
        progress.conversation += [{"role": "assistant", "content": progress.content},
                                  {"role": "user", "content": self.completion.correction()}]
        return Next.ROUND

    async def _steer_late(self, progress: ExecutionProgress, reply: ModelReply) -> bool:
        """Steering after the text is written: what the player said meanwhile is merged and the model
        answers again with it in view (spec: agent.loop.steering). True when it did."""
        if not (self.settings.steering and not progress.finalizing and progress.steps_remaining > 0
                and progress.deadline - time.monotonic() >= MIN_ANSWER_TIME_S):
            return False
        late = self.interjections()
        if not late:
            return False
        draft = {"role": "assistant", "content": progress.content}
        progress.drafts.append(draft)
        progress.conversation += [draft, *(interjection_message(text) for text in late)]
        progress.notice = ""
        await self._withdraw_streamed(reply)
        return True

    async def _repair(self, progress: ExecutionProgress, reply: ModelReply, problems: list[str]) -> None:
        """Output repair: one tool-less request listing what was wrong. It does not re-send the old draft,
        nor drafts written before an interjection (spec: 输出修复)."""
        progress.repairs_left -= 1
        progress.tools_off = True
        await self._withdraw_streamed(reply)
        progress.conversation = [m for m in progress.conversation if not any(m is d for d in progress.drafts)]
        progress.conversation.append({"role": "user", "content": loop_rules.repair_prompt(problems, self.story)})
