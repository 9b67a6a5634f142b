"""The step before this one, when it ended with status "continue" (the model answered with tool calls and the
loop asks it again): what PreStep's payload tells hooks of it (`previous`), and how PreStep's
replace.nextPrompt joins the conversation (spec: python-hookspecs, continue_prompt on StepFinished;
docs/hooks.md#prestep). agent/loop.py decides when a step continued; services/scheduler/hooks/rules.py checks
nextPrompt.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def previous_step(conversation: list[dict[str, Any]]) -> dict[str, Any]:
    """PreStep's `previous`: {status: continue, prompt, output, messages}. `output` is the text of the last
    assistant message with tool calls ("" when it had only calls), `prompt` the content of the last user message
    before it (None when there is none), `messages` the run's conversation as it stands (no system prompt).

    `messages` is the conversation itself, not a copy: building the payload costs two scans, and the
    conversation is serialised only when the bus sends PreStep to a listener (it sends nothing when none listens)."""
    called = _last_index(conversation, len(conversation), lambda m: m.get("role") == "assistant" and bool(m.get("tool_calls")))
    asked = _last_index(conversation, called if called is not None else len(conversation), lambda m: m.get("role") == "user")
    return {
        "status": "continue",
        "prompt": conversation[asked].get("content") if asked is not None else None,
        "output": str(conversation[called].get("content") or "") if called is not None else "",
        "messages": conversation,
    }


def _last_index(conversation: list[dict[str, Any]], before: int, wanted: Callable[[dict[str, Any]], bool]) -> int | None:
    return next((index for index in range(before - 1, -1, -1) if wanted(conversation[index])), None)


def next_prompt_message(text: str) -> dict[str, Any]:
    """PreStep's replace.nextPrompt as the run's conversation takes it: a plain user message (an interjection
    is marked as the player's; this is the run's own next prompt)."""
    return {"role": "user", "content": text}
