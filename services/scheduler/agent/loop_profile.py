"""agent.loop as the agent loop reads it: the compiled loop (the registry fills its profile's
values and every default, runtime_compiler.py), what only holds for the player's story, and a
subagent's tighter budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.manifest.runtime import Loop

# A finaliser or repair only starts when at least this much time is left to write the answer.
MIN_ANSWER_TIME_S = 3.0


@dataclass(frozen=True)
class LoopSettings:
    profile: str
    stream: bool
    steering: bool
    truncation: str  # accept | reject
    fallback: str  # answer-without-tools | fail
    finalizer_max_steps: bool
    deadline_reserve_ms: int
    # toolUse, review, loopPerturbation, outputRepair: the budgets of corrective re-prompts.
    corrections: dict[str, int]
    timeout_ms: int
    max_retries: int
    max_steps: int
    loop_detection: int
    call_timeout_ms: int
    first_token_timeout_ms: int
    idle_timeout_ms: int

    @property
    def deadline_reserve_s(self) -> float:
        # The reserve used is at most half of timeoutMs (spec).
        return min(self.deadline_reserve_ms, self.timeout_ms // 2) / 1000


def loop_settings(loop: Loop, *, story: bool, subagent: bool = False, budget: dict[str, Any] | None = None) -> LoopSettings:
    """`story`: the run writes the player's story (a story runtime, not run as a subagent)."""
    timeout_ms, max_steps = loop.timeout_ms, loop.max_steps
    if budget:
        # A caller's budget only tightens the provider's own limits.
        if isinstance(budget.get("maxSteps"), int) and budget["maxSteps"] > 0:
            max_steps = min(max_steps, budget["maxSteps"])
        if isinstance(budget.get("timeoutMs"), int) and budget["timeoutMs"] > 0:
            timeout_ms = min(timeout_ms, budget["timeoutMs"])
    stream = loop.stream and story and not subagent
    return LoopSettings(
        profile=loop.profile,
        stream=stream,
        steering=loop.steering and story and not subagent,
        # Only text the player watched stream is kept when cut off.
        truncation="accept" if loop.truncation == "accept" and stream else "reject",
        fallback=loop.fallback,
        finalizer_max_steps=loop.finalizer.max_steps,
        deadline_reserve_ms=loop.finalizer.deadline_reserve_ms,
        corrections=loop.corrections.to_json(),
        timeout_ms=timeout_ms,
        max_retries=loop.max_retries,
        max_steps=max_steps,
        loop_detection=loop.loop_detection,
        call_timeout_ms=loop.call_timeout_ms,
        first_token_timeout_ms=loop.first_token_timeout_ms or 0,
        idle_timeout_ms=loop.idle_timeout_ms,
    )
