"""The types the turn hooks of the Python hookspecs use (spec: python-hookspecs, "Turn Hooks").

    resolve_session(message: Envelope) -> str
    load_state(message: Envelope, session_id: str) -> TurnState
    build_prompt(message: Envelope, session_id: str, state: TurnState) -> list[UserContent] | LegacyPrompt
    run_model(prompt: str | list[dict], session_id: str, state: TurnState) -> str
    run_model_stream(prompt: str | list[dict], session_id: str, state: TurnState) -> AsyncStreamEvents
    continue_prompt(prompt: str | list[dict] | None, tape: Tape, state: StreamState) -> str | None
    save_state(session_id, state, message, model_output) -> None
    render_outbound(message, session_id, state, model_output) -> list[Envelope]
    dispatch_outbound(message: Envelope) -> bool

Which of them the kernel calls today, and onto what, is docs/hookspecs.md.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

# What `state` holds in every hook: a plain dict, new for each call.
# session_id, turn_id, locale, plugin_id and runtime_id of the runtime; execution_id (which run of the
# runtime: concurrent subagents of one provider differ), subagent_call_id and parent_runtime_id ("" unless a
# subagent run); and `ctx` (the HookContext).
TurnState = dict[str, Any]

# A message as a channel carries it, inbound or outbound: a mapping with at least `content`, and the
# channel's own keys (`channel`, `chat_id`, `session_id`, `sender`, …). The kernel passes it through as is.
Envelope: TypeAlias = Any

# One part of a user message in the chat format: {"type": "text", "text": …} or {"type": "image_url", …}.
UserContent = dict[str, Any]

# The older form of a prompt: the player's message as one string.
LegacyPrompt = str


@dataclass(frozen=True)
class StreamEvent:
    """One event of run_model_stream: a piece of text (`text`), a tool call (`tool_call`), or the end
    (`final`, with the whole output in `text`)."""

    kind: Literal["text", "tool_call", "final"]
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)


AsyncStreamEvents = AsyncIterator[StreamEvent]


class Tape(Protocol):
    """A read-only view of a session's conversation log: its entries, oldest first."""

    @property
    def name(self) -> str: ...

    def entries(self) -> Sequence[dict[str, Any]]: ...


@dataclass
class StreamState:
    """What continue_prompt sees of a run that ended a step with status "continue"."""

    session_id: str
    run_id: str
    step: int
    status: Literal["continue", "done", "failed"] = "continue"
    # The step's output so far (the model's text).
    output: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
