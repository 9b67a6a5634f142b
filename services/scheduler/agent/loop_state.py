"""Where one agent execution stands: the loop's progress from one model call to the next, the reply
of one call, and where a step sends the loop (agent/loop.py drives them)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from covel.gateway.v1 import gateway_pb2
from services.scheduler.agent.loop_profile import LoopSettings


@dataclass
class ExecutionProgress:
    """Where one agent execution stands between two model calls: what the loop carries from round to round."""

    conversation: list[dict[str, Any]]
    # Time spent streaming output does not count against timeoutMs: each call's streamed_ms moves it.
    deadline: float
    started: float
    steps_remaining: int
    repairs_left: int
    perturbations_left: int
    # PreStep-counted steps, and rounds whose tool calls ran.
    step: int = 0
    tool_steps: int = 0
    # The last reply's text (as PostLLMResponse left it), and the player's notice of an accepted cut-off story.
    content: str = ""
    notice: str = ""
    # A system agent's checked JSON answer; a completion tool's data (the output when set).
    answer: dict[str, Any] | None = None
    finish_output: dict[str, Any] | None = None
    successful_business_call: bool = False
    # The finaliser (out of steps or time) and a tools-off answer (a repair, the loop fallback): no tools, no PreStep.
    finalizing: bool = False
    tools_off: bool = False
    # The context-overflow finalizer trimmed the conversation (it runs once: agent/context_overflow.py).
    overflow_trimmed: bool = False
    # The next step must call a tool (a tool-use correction).
    force_required: bool = False
    truncation_retried: bool = False
    reviews_used: int = 0
    tool_use_corrections: int = 0
    # Loop detection: how often the same calls came in a row.
    repeats: int = 0
    last_signature: str = ""
    # Story drafts answered before a late interjection: an output repair leaves them out.
    drafts: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def begin(cls, messages: list[dict[str, Any]], settings: LoopSettings, now: float) -> ExecutionProgress:
        return cls(conversation=list(messages), deadline=now + settings.timeout_ms / 1000, started=now,
                   steps_remaining=settings.max_steps, repairs_left=settings.corrections["outputRepair"],
                   perturbations_left=settings.corrections["loopPerturbation"])

    @property
    def tools_offered(self) -> bool:
        return not (self.finalizing or self.tools_off)


@dataclass(frozen=True)
class ModelReply:
    """One model call's reply (its text is the progress's content)."""

    final: gateway_pb2.GenerateResponse
    finish: str  # stop | tool_calls | length | other | …
    calls: list[dict[str, Any]]
    # The messages sent (as PreLLMCall left them), for PostLLMResponse; whether the text streamed.
    sent_messages: list[Any]
    streamed: bool


class Next(enum.Enum):
    """Where a step sends the loop (a failure is returned as its RuntimeOutcome instead)."""

    ROUND = "round"  # ask the model again
    FINISH = "finish"  # the loop is over: the completion check builds the outcome
