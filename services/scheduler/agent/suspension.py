"""Suspend and resume: an agent that lists `suspend` in agent.tools.plugin may ask the player something and
wait. The suspend tool takes one interaction (a form, choice or confirm, docs/plugins.md#effects); the
loop stops with status `suspended`, and what resuming needs is saved with the turn (RuntimeResult.suspension,
kernel-internal): the conversation up to the suspend call, the loop's counters and the writes the run holds
(they commit only when the resumed run succeeds). Answering the interaction resumes the agent in a turn of
origin `resume`: the suspend call's result is the answer, no context is assembled again and PreRuntime does not
fire again; PostRuntime says `resumed: true`. A subagent or a nested run cannot suspend.
"""

from __future__ import annotations

import json
from typing import Any

from services.scheduler.agent.loop_state import ExecutionProgress
from services.scheduler.execution.kernel_tools import KernelTools
from services.scheduler.execution.player_effects import ShownInvalid, interaction
from shared.ids import new_id
from shared.plugin_sdk.tools import tool_error, tool_ok

SUSPEND = "suspend"
# The loop's counters a resumed run goes on with (spec: 恢复执行不算新的循环).
COUNTERS = ("steps_remaining", "repairs_left", "perturbations_left", "step", "tool_steps", "reviews_used", "tool_use_corrections")


def add_suspend_tool(tools: KernelTools) -> None:
    async def suspend(args: dict[str, Any]) -> dict[str, Any]:
        if tools.suspension is not None:
            return tool_error("invalid-input", "this run is suspending already: ask one thing at a time")
        asked = dict(args.get("interaction") or {}) if isinstance(args.get("interaction"), dict) else {}
        asked["id"] = str(asked.get("id") or new_id())
        try:
            interaction(asked, "interaction")
        except ShownInvalid as error:
            return tool_error("invalid-input", str(error), "call suspend again with an interaction of the documented shape")
        tools.suspension = {"interaction": asked}
        return tool_ok({"suspended": True, "interactionId": asked["id"]})

    tools.add(SUSPEND, "Ask the player something and wait for the answer before going on: interaction is a form "
                       "({kind: form, title, schema}), a choice ({kind: choice, prompt, options: [{id, label}]}) or a "
                       "confirmation ({kind: confirm, prompt}). The answer comes back as this call's result.",
              {"type": "object", "required": ["interaction"], "properties": {"interaction": {"type": "object", "required": ["kind"]}}},
              suspend, read_only=False)


def saved_state(progress: ExecutionProgress, system_prompt: str, tools: KernelTools, usage: dict[str, int]) -> dict[str, Any]:
    """What resuming needs: the conversation without the suspend call's own result (the answer takes its place)."""
    conversation = list(progress.conversation)
    call_id = ""
    for index in range(len(conversation) - 1, -1, -1):
        message = conversation[index]
        if message.get("role") == "tool" and _is_suspend_result(message):
            call_id = str(message.get("tool_call_id"))
            del conversation[index]
            break
    return {
        "systemPrompt": system_prompt, "conversation": conversation, "suspendCallId": call_id,
        "counters": {name: getattr(progress, name) for name in COUNTERS}, "usage": dict(usage),
        "toolWrites": tools.tool_writes, "foreignWrites": tools.foreign_writes, "emitted": tools.emitted,
        # The subagent budget goes on across the resume (and a later suspension): calls and characters stay used.
        **({"subagentBudget": tools.subagent_budget.saved()} if tools.subagent_budget is not None else {}),
    }


def _is_suspend_result(message: dict[str, Any]) -> bool:
    try:
        content = json.loads(str(message.get("content") or ""))
    except json.JSONDecodeError:
        return False
    return isinstance(content, dict) and isinstance(content.get("data"), dict) and content["data"].get("suspended") is True


def resumed_progress(state: dict[str, Any], answer: dict[str, Any], progress: ExecutionProgress) -> ExecutionProgress:
    """The loop's progress as it was, with the answer as the suspend call's result."""
    progress.conversation = [*state["conversation"], {"role": "tool", "tool_call_id": state["suspendCallId"],
                                                       "content": json.dumps({"ok": True, "data": {"answer": answer}}, ensure_ascii=False)}]
    for name, value in (state.get("counters") or {}).items():
        if name in COUNTERS and isinstance(value, int):
            setattr(progress, name, value)
    return progress


def restore_writes(state: dict[str, Any], tools: KernelTools) -> None:
    tools.tool_writes = list(state.get("toolWrites") or [])
    tools.foreign_writes = list(state.get("foreignWrites") or [])
    tools.emitted = list(state.get("emitted") or [])


