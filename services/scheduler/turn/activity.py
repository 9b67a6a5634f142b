"""What a turn's runtimes did through the hook bus, for turn-digest@1 (toolCallSummaries) and operations@1: each
plugin tool and service call noted against its unit (the top-level runtime), the hook bus that notes them."""

from __future__ import annotations

import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from covel.hooks.v1 import hooks_pb2
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from shared.plugin_sdk.model_view import model_facing
from shared.structs import from_struct

# operations@1: a request or result whose model view is longer than this (as JSON) is left out.
MAX_OPERATION_PART_CHARS = 4000
# turn-digest@1: one tool call's summary line.
MAX_TOOL_SUMMARY_CHARS = 200


@dataclass
class ToolCallNote:
    """One plugin tool or service call of the turn, for turn-digest@1's toolCallSummaries."""

    unit: str
    ok: bool
    summary: str


@dataclass
class OperationNote:
    """One write-service call that staged changes (operations@1), in call order."""

    unit: str
    contract: str
    summary: str
    request: Any
    result: Any
    # (type, payload) of each change it staged: it counts while they stay with its unit.
    staged: list[tuple[str, Any]] = field(default_factory=list)

    def value(self) -> dict[str, Any]:
        operation: dict[str, Any] = {"contract": self.contract, "summary": self.summary}
        truncated = False
        for name, part in (("request", self.request), ("result", self.result)):
            if part is None:
                continue
            shown = model_facing(part)
            if len(json.dumps(shown, ensure_ascii=False)) > MAX_OPERATION_PART_CHARS:
                truncated = True
            else:
                operation[name] = shown
        if truncated:
            operation["truncated"] = True
        return operation


@dataclass
class TurnActivity:
    """The tool and service calls of one turn, each noted against its unit (the top-level runtime)."""

    tool_calls: list[ToolCallNote] = field(default_factory=list)
    operations: list[OperationNote] = field(default_factory=list)


# The turn's activity and the unit (top-level runtime) an await chain runs for: calls made anywhere
# below a runtime (its tools, nested calls, subagents) are noted against it.
RUNNING_UNIT: ContextVar[tuple[TurnActivity, str] | None] = ContextVar("covel_running_unit", default=None)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(model_facing(value), ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


class RecordingHooks:
    """The hook bus, noting each plugin tool and service call of a running unit for turn-digest@1
    (toolCallSummaries) and operations@1 (write services' staged changes)."""

    def __init__(self, hooks: HookBus) -> None:
        self._bus = hooks

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bus, name)

    async def call_tool(self, scope: ExecutionScope, plugin_id: str, runtime_id: str, call: dict[str, Any],
                        writes: list[dict[str, Any]] | None = None, plugin_data: dict[str, Any] | None = None,
                        world: dict[str, Any] | None = None) -> str:
        text = await self._bus.call_tool(scope, plugin_id, runtime_id, call, writes, plugin_data=plugin_data, world=world)
        running = RUNNING_UNIT.get()
        if running is not None:
            try:
                result = json.loads(text)
                arguments = json.loads(call.get("arguments") or "{}")
            except (TypeError, ValueError):
                result, arguments = {}, call.get("arguments")
            ok = isinstance(result, dict) and result.get("ok") is True
            summary = f"{runtime_id} called {call.get('name')}({_short(arguments)})"
            if ok and result.get("data") is not None:
                summary += f" -> {_short(result['data'])}"
            running[0].tool_calls.append(ToolCallNote(running[1], ok, summary[:MAX_TOOL_SUMMARY_CHARS]))
        return text

    async def call_service(self, scope: ExecutionScope, caller_plugin_id: str, runtime_id: str, contract: str, arguments: str,
                           plugin_data: dict[str, Any] | None = None) -> hooks_pb2.CallToolResponse:
        reply = await self._bus.call_service(scope, caller_plugin_id, runtime_id, contract, arguments, plugin_data=plugin_data)
        running = RUNNING_UNIT.get()
        if running is not None:
            try:
                request = json.loads(arguments or "{}")
            except ValueError:
                request = arguments
            try:
                result = json.loads(reply.result)
            except (TypeError, ValueError):
                result = None
            data = result.get("data") if isinstance(result, dict) else None
            running[0].tool_calls.append(ToolCallNote(
                running[1], bool(reply.ok), f"{runtime_id} called the service {contract}({_short(request)})"[:MAX_TOOL_SUMMARY_CHARS]))
            if reply.ok and reply.proposals:
                given = data.get("summary") if isinstance(data, dict) else None
                summary = given if isinstance(given, str) else f"{contract} staged {', '.join(p.type for p in reply.proposals)}"
                staged = [(p.type, from_struct(p.payload)) for p in reply.proposals]
                running[0].operations.append(OperationNote(running[1], contract, summary[:MAX_TOOL_SUMMARY_CHARS], request, data, staged))
        return reply
