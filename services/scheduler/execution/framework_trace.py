"""Trace records of the kernel itself (not of a hook handler): skipped tool calls, a nested run's
dropped suspension."""

from __future__ import annotations

import json
from typing import Any

from covel.common.v1 import common_pb2


def framework_entry(event: str, status: str, runtime_id: str, detail: dict[str, Any]) -> common_pb2.HookTraceEntry:
    """A trace record of the loop itself (not of a hook handler); its details as JSON in `message`."""
    return common_pb2.HookTraceEntry(event=event, handler_plugin_id="framework", status=status, runtime_id=runtime_id,
                                     message=json.dumps(detail, ensure_ascii=False))


def skipped_tool_entries(call: dict[str, Any], runtime_id: str, skip_reason: str) -> list[common_pb2.HookTraceEntry]:
    """tool.calling / tool.failed of a call that never ran: a PreToolUse abort ("hook-aborted") or a
    terminated loop ("terminated"). Not an executed call, not a failure (spec: hooks-reference)."""
    detail = {"toolCallId": call.get("id", ""), "name": call.get("name", ""), "skipped": True, "skipReason": skip_reason}
    return [framework_entry(event, "skipped", runtime_id, detail) for event in ("tool.calling", "tool.failed")]


NESTED_SUSPENSION_REASON = "nested-suspension-dropped: a nested run cannot wait for the player"


def nested_suspension_dropped(runtime_id: str) -> common_pb2.HookTraceEntry:
    """The trace entry of a nested run (ctx.recursive_call) whose suspension was dropped."""
    return framework_entry("recursive.failed", "error", runtime_id, {"code": "nested-suspension-dropped",
                                                                    "message": "a nested run cannot wait for the player"})


LOREBOOK_ACTIVATED = "lorebook.activated"


def lorebook_used(trace: list[common_pb2.HookTraceEntry]) -> list[dict[str, Any]]:
    """The lorebook entries a story's prompt had ({owner, id, why}), from its `lorebook.activated` trace entry."""
    used: list[dict[str, Any]] = []
    for entry in trace:
        if entry.event == LOREBOOK_ACTIVATED and entry.handler_plugin_id == "framework":
            used.extend({"owner": item["owner"], "id": item["id"], "why": item["why"]} for item in json.loads(entry.message)["entries"])
    return used
