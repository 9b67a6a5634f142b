"""The agent loop's decisions as pure functions: out of steps, close to the time limit, a cut-off reply,
a repair, a tool call going round in circles, and the completion condition (spec: Agent 循环, 完成条件).

The loop (agent/loop.py) acts on what these decide; they read plain values only, so each rule is
tested without a model, hooks or services.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from services.scheduler.agent.loop_profile import MIN_ANSWER_TIME_S
from services.scheduler.execution.kernel_tools import RUNTIME_DONE
from shared.manifest.runtime import Agent, NamedToolChoice

LOOP_PERTURBATION = (
    "You have made the same tool call several times in a row with the same arguments. "
    "It will not give a different result: change your approach, or answer now."
)
REPAIR_PROMPT = "Your reply was not a valid story. Answer again with the complete story as one JSON object. Problems:"
REPAIR_PROMPT_JSON = "Your answer does not fit the required output. Answer again with the complete answer as one JSON object. Problems:"
TRUNCATION_HINT = "Your last reply was cut off at the output limit. Write only what the task needs."
# An output repair lists at most this many problems.
REPAIR_PROBLEMS_LISTED = 5

StepBudget = Literal["go", "finalize", "fail"]
Truncation = Literal["none", "accept", "retry", "fail"]
LoopVerdict = Literal["none", "perturb", "tools-off", "fail"]


@dataclass(frozen=True)
class Completion:
    """agent.completion: what must have happened before the loop may end (spec: 完成条件).

    require: "" (nothing), "explicit" (runtime-done or a completion tool) or "tool-use";
    after_tools: the completion tools (afterTools, or finishWith's one tool) whose data is the output.
    """

    require: str
    after_tools: frozenset[str]

    def unmet(self, *, done_called: bool, finished_by_tool: bool, business_call: bool) -> str:
        """Why the completion condition is not met yet ("" when it is, or when there is none)."""
        if self.require == "explicit" and not (done_called or finished_by_tool):
            return "completion: the agent finished without runtime-done or a completion tool"
        if self.require == "tool-use" and self.after_tools and not finished_by_tool:
            return f"completion: the agent finished without a successful call of {', '.join(sorted(self.after_tools))}"
        if self.require == "tool-use" and not self.after_tools and not business_call:
            return "completion: the agent finished without a successful call of one of its tools"
        return ""

    def correction(self) -> str:
        """The user message of a tool-use correction: the tools that would complete the run."""
        choices = sorted(self.after_tools | ({RUNTIME_DONE} if self.require == "explicit" else set()))
        return f"You must finish by calling {' or '.join(choices) or 'one of your tools'}."


def completion_of(agent: Agent) -> Completion:
    """agent.completion: the registry compiles finishWith into {require: tool-use, afterTools: [it]}; none
    written, the loop ends with an answer (spec: 完成条件)."""
    if agent.completion is None:
        return Completion("", frozenset())
    return Completion(agent.completion.require or "", frozenset(agent.completion.after_tools or []))


def tool_choice_of(agent: Agent) -> str | dict[str, Any]:
    """agent.toolChoice as the step plan and hooks read it (a mode or {name}); not written: auto (the
    registry writes `required` for finishWith)."""
    choice = agent.tool_choice
    if isinstance(choice, NamedToolChoice):
        return choice.to_json()
    return choice or "auto"


def correction_choice(base: str | dict[str, Any]) -> str | dict[str, Any]:
    """The tool choice of the request after a correction: a tool call is required, and a tool the manifest names
    (`toolChoice: {name}`) stays named (spec: 完成条件)."""
    return base if isinstance(base, dict) else "required"


def step_budget(steps_remaining: int, *, finalizing: bool, finalizer_allowed: bool, tool_steps: int,
                completion_met: bool) -> StepBudget:
    """Before a step: "go"; out of steps after tool work with the completion met, "finalize" (tools off,
    one more request for the answer); otherwise out of steps is "fail" (max-steps)."""
    if steps_remaining > 0 or finalizing:
        return "go"
    if finalizer_allowed and tool_steps and completion_met:
        return "finalize"
    return "fail"


def deadline_reserve_reached(remaining_s: float, reserve_s: float, *, step: int, finalizing: bool, completion_met: bool) -> bool:
    """Close to the time limit after a first step, with time left to write it: text alone can finish
    this runtime, so tools go off and the loop asks for the answer (agent.loop.finalizer.deadlineReserveMs)."""
    return (not finalizing and step > 0 and reserve_s > 0 and MIN_ANSWER_TIME_S <= remaining_s < reserve_s
            and completion_met)


def truncation(finish: str, *, accept: bool, has_calls: bool, has_text: bool, retried: bool) -> tuple[Truncation, str]:
    """A reply cut off ("length") or stopped unexplained ("other"): kept with the player's notice (the
    story profile), asked once more for less (the hint), or the failure's reason."""
    if finish not in ("length", "other"):
        return "none", ""
    if accept and not has_calls and has_text:
        if finish == "length":
            return "accept", "the story may stop mid-sentence (the model hit its output limit)"
        return "accept", "the provider stopped without saying why; this part may be unfinished: retry the turn"
    if finish == "length" and not retried:
        # Truncated tool calls and JSON are unusable.
        return "retry", TRUNCATION_HINT
    if finish == "length":
        return "fail", "truncated: the reply hit the model's output limit twice; raise the output limit of this slot"
    return "fail", "finish-other: the provider stopped the reply without saying why"


def repair_wanted(problems: list[str], *, notice: str, repairs_left: int, remaining_s: float) -> bool:
    """An output repair: only for an answer that ended normally (an accepted cut-off story is kept as
    it is), with repairs left and time to write the answer again."""
    return bool(problems) and not notice and repairs_left > 0 and remaining_s >= MIN_ANSWER_TIME_S


def repair_prompt(problems: list[str], story: bool) -> str:
    listed = "\n".join(f"- {problem}" for problem in problems[:REPAIR_PROBLEMS_LISTED])
    return f"{REPAIR_PROMPT if story else REPAIR_PROMPT_JSON}\n{listed}"


def call_signature(calls: list[dict[str, Any]]) -> str:
    """A reply's tool calls as one comparable string: names and arguments, in order."""
    return json.dumps([[call["name"], call["arguments"]] for call in calls], sort_keys=True)


def loop_verdict(repeats: int, *, loop_detection: int, perturbations_left: int, fallback: str) -> LoopVerdict:
    """The same tool calls `repeats` times in a row: at agent.loop.loopDetection, first a perturbation
    (tell the model), then the fallback: an answer without tools, or failure."""
    if not loop_detection or repeats < loop_detection:
        return "none"
    if perturbations_left > 0:
        return "perturb"
    return "tools-off" if fallback == "answer-without-tools" else "fail"
