"""agent.loop as the agent loop reads it: the profile's values with the manifest's overrides.

The registry compiles the profile into each manifest; this fills the same defaults for a
manifest that lacks them (older catalogues, hand-built test manifests) and applies a
subagent's tighter budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PROFILES: dict[str, dict[str, Any]] = {
    "story": {"stream": True, "steering": True, "truncation": "accept", "fallback": "answer-without-tools"},
    "actor": {"stream": False, "steering": False, "truncation": "reject", "fallback": "answer-without-tools"},
    "system": {"stream": False, "steering": False, "truncation": "reject", "fallback": "fail"},
}
DEFAULT_CORRECTIONS = {"toolUse": 1, "review": 2, "loopPerturbation": 1, "outputRepair": 1}
# agent.loop.maxSteps when the manifest sets none.
DEFAULT_MAX_STEPS = 8
DEFAULT_LOOP_DETECTION = 3
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


def loop_settings(loop: dict[str, Any] | None, *, story: bool, subagent: bool = False,
                  budget: dict[str, Any] | None = None) -> LoopSettings:
    loop = loop or {}
    default_profile = "actor" if subagent else ("story" if story else "system")
    profile = loop.get("profile") or default_profile
    if profile not in PROFILES:
        profile = default_profile
    values = {**PROFILES[profile], **{key: loop[key] for key in PROFILES[profile] if key in loop}}
    finalizer = loop.get("finalizer")
    if finalizer is False:
        finalizer = {"maxSteps": False, "deadlineReserveMs": 0}
    finalizer = finalizer if isinstance(finalizer, dict) else {}
    timeout_ms = int(loop.get("timeoutMs") or (240_000 if story else 120_000))
    max_steps = int(loop.get("maxSteps") or DEFAULT_MAX_STEPS)
    if budget:
        # A caller's budget only tightens the provider's own limits.
        if isinstance(budget.get("maxSteps"), int) and budget["maxSteps"] > 0:
            max_steps = min(max_steps, budget["maxSteps"])
        if isinstance(budget.get("timeoutMs"), int) and budget["timeoutMs"] > 0:
            timeout_ms = min(timeout_ms, budget["timeoutMs"])
    stream = bool(values["stream"]) and story and not subagent
    return LoopSettings(
        profile=profile,
        stream=stream,
        steering=bool(values["steering"]) and story and not subagent,
        # Only text the player watched stream is kept when cut off.
        truncation="accept" if values["truncation"] == "accept" and stream else "reject",
        fallback=values["fallback"] if values["fallback"] in ("answer-without-tools", "fail") else "fail",
        finalizer_max_steps=finalizer.get("maxSteps", True) is not False,
        deadline_reserve_ms=int(finalizer.get("deadlineReserveMs") or 0),
        corrections={**DEFAULT_CORRECTIONS, **{k: int(v) for k, v in (loop.get("corrections") or {}).items() if k in DEFAULT_CORRECTIONS}},
        timeout_ms=timeout_ms,
        max_retries=int(loop.get("maxRetries", 1 if story else 3)),
        max_steps=max_steps,
        loop_detection=int(loop.get("loopDetection", DEFAULT_LOOP_DETECTION)),
        call_timeout_ms=int(loop.get("callTimeoutMs", 0) or 0),
        first_token_timeout_ms=int(loop.get("firstTokenTimeoutMs", 0) or 0),
        idle_timeout_ms=int(loop.get("idleTimeoutMs", 0) or 0),
    )
