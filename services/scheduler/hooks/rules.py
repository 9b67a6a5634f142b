"""What each hook's `replace` may change at its site, as pure functions the turn and the agent
loop apply (spec: hooks-reference, per event). Invalid parts are dropped, never fatal."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

STOP_REASONS = ("tool-finished", "cancelled")
# PreStep's replace.nextPrompt: a user message that stays in the run's conversation, so bounded.
MAX_NEXT_PROMPT_CHARS = 20_000


def replaced_payload(verdict: dict[str, Any]) -> dict | None:
    """PreStateCommit: the proposal payload a hook replaced, if any: type, source and id stay the kernel's."""
    replaced = verdict.get("proposal", {})
    if isinstance(replaced, dict) and isinstance(replaced.get("payload"), dict):
        return replaced["payload"]
    return None


def filter_schedule(selected_names: list[str], triggered: Any) -> list[str]:
    """PreSchedule: drop or reorder the selected runtimes by `name`; never add one."""
    if not isinstance(triggered, list):
        return selected_names
    allowed = set(selected_names)
    kept: list[str] = []
    for entry in triggered:
        name = entry.get("name") if isinstance(entry, dict) else entry
        if name in allowed and name not in kept:
            kept.append(name)
    return kept


@dataclass
class StepPlan:
    """One agent step after PreStep: the tools offered, the tool choice, the steps left, or a stop."""

    tools: list[str]
    tool_choice: Any
    steps_remaining: int
    stop: dict[str, str] | None = None
    # What the hook asked for that this step cannot honour, for step.completed.
    ignored: list[str] = field(default_factory=list)
    # A user message joining the conversation before this step's model call (replace.nextPrompt).
    next_prompt: str | None = None


def apply_pre_step(
    tool_names: list[str], tool_choice: Any, steps_remaining: int, replace: dict[str, Any], *, correcting: bool = False
) -> StepPlan:
    """PreStep's fields with their limits (interjections are the loop's: they depend on the run).

    tools: a subset of this step's tools (others ignored and listed); toolChoice: "auto",
    "required" or {name} of an offered tool ("auto" does not lift a correction's required call);
    stepsRemaining: only lower, at least 1; stop: {reason: tool-finished | cancelled, message?};
    nextPrompt: a non-empty text of at most MAX_NEXT_PROMPT_CHARS (not sent when the step stops).
    """
    plan = StepPlan(list(tool_names), tool_choice, steps_remaining)
    if "tools" in replace:
        wanted = replace["tools"]
        if isinstance(wanted, list):
            plan.tools = [name for name in tool_names if name in wanted]
            plan.ignored += [f"tools: {name}" for name in wanted if name not in tool_names]
        else:
            plan.ignored.append("tools: not a list")
    if "toolChoice" in replace:
        choice = replace["toolChoice"]
        if choice in ("auto", "required"):
            if not (choice == "auto" and correcting):
                plan.tool_choice = choice
            else:
                plan.ignored.append("toolChoice: auto cannot lift a correction's required tool call")
        elif isinstance(choice, dict) and choice.get("name") in plan.tools:
            plan.tool_choice = {"name": choice["name"]}
        else:
            plan.ignored.append(f"toolChoice: {json.dumps(choice)} is not auto, required or an offered tool")
    if "stepsRemaining" in replace:
        steps = replace["stepsRemaining"]
        if isinstance(steps, int) and not isinstance(steps, bool) and 1 <= steps <= steps_remaining:
            plan.steps_remaining = steps
        else:
            plan.ignored.append(f"stepsRemaining: {steps!r} (only an integer from 1 to {steps_remaining})")
    if "stop" in replace:
        stop = replace["stop"]
        if isinstance(stop, dict) and stop.get("reason") in STOP_REASONS:
            plan.stop = {"reason": stop["reason"], **({"message": str(stop["message"])} if stop.get("message") else {})}
        else:
            plan.ignored.append("stop: reason must be tool-finished or cancelled")
    if "nextPrompt" in replace:
        plan.next_prompt, problem = _next_prompt(replace["nextPrompt"], stopped=plan.stop is not None)
        plan.ignored += [f"nextPrompt: {problem}"] if problem else []
    return plan


def _next_prompt(text: Any, *, stopped: bool) -> tuple[str | None, str]:
    """(the text, "") when PreStep's nextPrompt is one to send, else (None, why not)."""
    if not isinstance(text, str):
        return None, f"not a text ({type(text).__name__})"
    if not text.strip():
        return None, "empty"
    if len(text) > MAX_NEXT_PROMPT_CHARS:
        return None, f"{len(text)} characters (at most {MAX_NEXT_PROMPT_CHARS})"
    if stopped:
        return None, "not sent: the step was stopped"
    return text, ""


def stopped_by_pre_step_error(runtime_id: str, stop: dict[str, str]) -> str:
    """The failure a PreStep `stop: {reason: cancelled}` gives the runtime."""
    message = stop.get("message")
    return f'Runtime "{runtime_id}" was stopped by a PreStep hook' + (f": {message}" if message else "")


def refused_tool_result(reason: str) -> dict[str, Any]:
    """PreToolUse abort: the model reads a `refused` tool error with the hook's reason."""
    return {"ok": False, "error": {"code": "refused", "message": reason}}


def apply_pre_tool_use(tool_call: dict[str, Any], replace: dict[str, Any]) -> dict[str, Any]:
    """PreToolUse replace.toolCall may change name and arguments (a JSON string); the id stays."""
    replaced = replace.get("toolCall")
    if not isinstance(replaced, dict):
        return tool_call
    call = dict(tool_call)
    if isinstance(replaced.get("name"), str) and replaced["name"]:
        call["name"] = replaced["name"]
    arguments = replaced.get("arguments")
    if isinstance(arguments, (dict, list)):
        arguments = json.dumps(arguments, ensure_ascii=False)
    if isinstance(arguments, str):
        call["arguments"] = arguments
    call["id"] = tool_call["id"]
    return call


def answered_result(payload: dict[str, Any]) -> str | None:
    """PreToolUse replace.result answers the call: `{"ok": true, "data": result}`, a successful call (None: not answered)."""
    if "result" not in payload:
        return None
    return json.dumps({"ok": True, "data": payload["result"]}, ensure_ascii=False)


@dataclass
class ToolOutcome:
    """What the model reads of a tool call, and what stays the tool's own."""

    result: dict[str, Any]
    terminate: bool = False


# Fields of a tool result a PostToolUse hook cannot change.
PROTECTED_RESULT_FIELDS = ("error", "success", "refused", "approval", "effects", "proposals")


def apply_post_tool_use(result: dict[str, Any], replace: dict[str, Any]) -> ToolOutcome:
    """PostToolUse: replace.result rewrites the model text / parsedResult only; terminate ends the loop."""
    outcome = ToolOutcome(result=result, terminate=replace.get("terminate") is True)
    replaced = replace.get("result")
    if isinstance(replaced, dict):
        merged = {**result, **{key: value for key, value in replaced.items() if key not in PROTECTED_RESULT_FIELDS}}
        outcome.result = merged
    return outcome
