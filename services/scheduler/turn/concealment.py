"""io.concealed runtimes: what clients see of them (spec: 隐藏内容的 runtime).

The turn is stored in full (for retries); everything a client receives (the turn stream,
GetTurn, ListTurns) keeps only the runtime's name, tool names, status, timing and usage: no output,
no prompt, tool arguments or results, no hook text, and a fixed text instead of its real failure reason.
A trace entry of a hook handler keeps its event, status, time and tool name (`tool_name`) and loses its
message; a kernel entry (its details as a JSON object) keeps the fields in KEPT_DETAILS.
"""

from __future__ import annotations

import json
from collections.abc import Set as AbstractSet

from covel.common.v1 import common_pb2
from covel.scheduler.internal.v1 import turn_events_pb2
from covel.store.v1 import store_pb2
from services.scheduler.execution.outcome import OutcomeStatus

# What a kernel trace entry of a concealed runtime keeps of its JSON details (spec: name, tools, status, time, usage).
KEPT_DETAILS = frozenset({"name", "tools", "toolCallId", "status", "durationMs", "usage", "step", "skipped", "skipReason", "code",
                          "runtimeId", "stopReason"})
HIDDEN_FAILURE = "this part of the story could not be prepared; the details are hidden"


def concealed_subagent_calls(turn: store_pb2.Turn) -> set[str]:
    """Subagent calls of a concealed provider: its subagent.started entry says so (agent/execution.py)."""
    calls = set()
    for entry in turn.hook_trace:
        if entry.event == "subagent.started" and entry.message:
            try:
                marked = json.loads(entry.message)
            except json.JSONDecodeError:
                continue
            if isinstance(marked, dict) and marked.get("concealed") is True:
                calls.add(entry.subagent_call_id)
    return calls


def is_hidden_entry(entry: common_pb2.HookTraceEntry, concealed_runtimes: AbstractSet[str],
                    concealed_calls: AbstractSet[str] = frozenset()) -> bool:
    """A trace entry of a concealed runtime, of a subagent it delegated to, or of a concealed subagent provider."""
    return bool(entry.runtime_id in concealed_runtimes or (entry.parent_runtime_id and entry.parent_runtime_id in concealed_runtimes)
            or (entry.subagent_call_id and entry.subagent_call_id in concealed_calls))


def conceal_turn(turn: store_pb2.Turn) -> store_pb2.Turn:
    concealed = {result.runtime_id for result in turn.runtime_results if result.concealed}
    concealed_calls = concealed_subagent_calls(turn)
    suspended = any(result.HasField("suspension") for result in turn.runtime_results)
    if not concealed and not concealed_calls and not suspended:
        return turn
    shown = store_pb2.Turn()
    shown.CopyFrom(turn)
    for result in shown.runtime_results:
        # A suspended agent's saved conversation is the kernel's, to resume it.
        result.ClearField("suspension")
        if result.concealed:
            result.ClearField("output")
            result.ClearField("output_json")
            if result.status == OutcomeStatus.FAILED:
                result.reason = HIDDEN_FAILURE
            elif result.reason:
                result.reason = ""
    for entry in shown.hook_trace:
        if is_hidden_entry(entry, concealed, concealed_calls):
            entry.message = kept_message(entry)
    return shown


def kept_message(entry: common_pb2.HookTraceEntry) -> str:
    """What a concealed runtime's trace entry keeps of its message: a kernel entry's safe details, else nothing."""
    if entry.handler_plugin_id != "framework" or not entry.message:
        return ""
    try:
        detail = json.loads(entry.message)
    except json.JSONDecodeError:
        return ""
    if not isinstance(detail, dict):
        return ""
    kept = {key: value for key, value in detail.items() if key in KEPT_DETAILS}
    return json.dumps(kept, ensure_ascii=False) if kept else ""


def conceal_event(event: turn_events_pb2.TurnEvent, concealed: set[str]) -> turn_events_pb2.TurnEvent | None:
    """The stream's view of an event; None when it must not reach the client at all."""
    kind = event.WhichOneof("event")
    if kind == "turn_completed":
        return turn_events_pb2.TurnEvent(turn_completed=conceal_turn(event.turn_completed))
    if kind == "narrative_delta" and event.narrative_delta.runtime_id in concealed:
        return None
    if kind == "runtime_finished" and event.runtime_finished.runtime_id in concealed and event.runtime_finished.reason:
        finished = turn_events_pb2.RuntimeFinished()
        finished.CopyFrom(event.runtime_finished)
        finished.reason = HIDDEN_FAILURE if finished.status == OutcomeStatus.FAILED else ""
        return turn_events_pb2.TurnEvent(runtime_finished=finished)
    if kind == "progress" and event.progress.runtime_id in concealed and event.progress.label:
        progress = turn_events_pb2.RuntimeProgress()
        progress.CopyFrom(event.progress)
        progress.label = ""
        return turn_events_pb2.TurnEvent(progress=progress)
    if kind == "hook" and event.hook.message and is_hidden_entry(event.hook, concealed):
        hook = type(event.hook)()
        hook.CopyFrom(event.hook)
        hook.message = kept_message(event.hook)
        return turn_events_pb2.TurnEvent(hook=hook)
    return event
