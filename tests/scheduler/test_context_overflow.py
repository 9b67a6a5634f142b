"""The context-overflow finalizer's trimming (agent/context_overflow.py): whole tool steps, oldest first, as far as
the window needs; all of them when the window is unknown; none fitting is None."""

from __future__ import annotations

import json

from services.scheduler.agent.context_overflow import OVERFLOW_NOTICE, tool_steps, trim


def step(call_id: str, name: str, size: int) -> list[dict]:
    return [
        {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "name": name, "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps({"ok": True, "data": "x" * size})},
    ]


CONVERSATION = [{"role": "user", "content": "Go."}, *step("a", "dig", 4000), *step("b", "look", 400), *step("c", "read", 400)]


def test_complete_tool_steps_are_found_and_an_unanswered_call_is_not_one() -> None:
    assert tool_steps(CONVERSATION) == [(1, 3), (3, 5), (5, 7)]
    unanswered = [
        *CONVERSATION,
        {"role": "assistant", "content": "", "tool_calls": [{"id": "d", "name": "dig", "arguments": "{}"}]},
    ]
    assert tool_steps(unanswered) == [(1, 3), (3, 5), (5, 7)]


def test_the_oldest_steps_go_first_and_only_as_many_as_the_window_needs() -> None:
    trimmed = trim("System.", CONVERSATION, 800)
    assert trimmed is not None and (trimmed.dropped_steps, trimmed.dropped_tools) == (1, ["dig"])
    assert [m.get("tool_call_id") for m in trimmed.conversation if m["role"] == "tool"] == ["b", "c"]
    assert trimmed.conversation[-1] == {"role": "user", "content": OVERFLOW_NOTICE.format(count=1, tools="dig")}
    assert trimmed.estimate <= 800 - 100
    smaller = trim("System.", CONVERSATION, 200)
    assert smaller is not None and smaller.dropped_steps == 3 and smaller.dropped_tools == ["dig", "look", "read"]


def test_an_unknown_window_drops_every_step_and_a_window_too_small_for_anything_is_none() -> None:
    unknown = trim("System.", CONVERSATION, 0)
    assert unknown is not None and unknown.dropped_steps == 3 and [m["role"] for m in unknown.conversation] == ["user", "user"]
    assert trim("System. " * 400, CONVERSATION, 300) is None
