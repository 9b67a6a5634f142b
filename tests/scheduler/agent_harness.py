"""In-process fakes for driving the agent loop in unit tests: a gateway that answers from a list
of replies and records each request, and a hook bus whose handlers are plain functions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from covel.gateway.v1 import gateway_pb2
from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Runtime
from services.scheduler.hooks.bus import ExecutionScope, HookOutcome
from shared.structs import to_struct
from tests.scheduler.compiled import compiled_runtime


def reply(content: str = "", *tool_calls: tuple[str, dict], finish: str = "stop") -> gateway_pb2.GenerateResponse:
    return gateway_pb2.GenerateResponse(
        message=gateway_pb2.ChatMessage(role="assistant", content=content, tool_calls=[
            gateway_pb2.ToolCall(id=f"call-{index}", name=name, arguments=json.dumps(args))
            for index, (name, args) in enumerate(tool_calls)]),
        finish_reason=getattr(gateway_pb2, f"FINISH_REASON_{finish.upper()}"),
    )


@dataclass
class FakeGateway:
    replies: list[gateway_pb2.GenerateResponse]
    requests: list[gateway_pb2.GenerateRequest] = field(default_factory=list)
    # Called before each answer (e.g. to move a fake clock).
    before_answer: Any = None

    def _next(self, request) -> gateway_pb2.GenerateResponse:
        self.requests.append(request)
        if self.before_answer:
            self.before_answer(request)
        if not self.replies:
            raise AssertionError(f"the model was called more often than scripted ({len(self.requests)} calls)")
        return self.replies.pop(0)

    async def GenerateOnce(self, request, timeout=None, wait_for_ready=None):
        return self._next(request)

    async def Generate(self, request, timeout=None, wait_for_ready=None):
        final = self._next(request)
        if final.message.content:
            yield gateway_pb2.GenerateEvent(content_delta=final.message.content)
        yield gateway_pb2.GenerateEvent(final=final)


@dataclass
class FakeHooks:
    """handlers: event -> fn(payload) returning a replace dict (or None)."""

    handlers: dict[str, Any] = field(default_factory=dict)
    plugin_tools: dict[str, tuple[dict, bool]] = field(default_factory=dict)
    tool_results: dict[str, Any] = field(default_factory=dict)
    dispatched: list[tuple[str, str]] = field(default_factory=list)
    tool_calls: list[dict] = field(default_factory=list)

    async def dispatch(self, record, scope, *, plugin_id="", runtime_id="", timeout_s=60.0) -> HookOutcome:
        event, payload = record.event, record.wire()
        self.dispatched.append((event, runtime_id))
        handler = self.handlers.get(event)
        replace = handler(payload) if handler else None
        return HookOutcome(False, "", {**payload, **(replace or {})}, sent=payload)

    async def tools(self, plugin_id):
        return {name: gateway_pb2.ToolDefinition(name=name, parameters=to_struct(schema))
                for name, (schema, _) in self.plugin_tools.items()}

    def read_only(self, plugin_id, name):
        return name in self.plugin_tools and self.plugin_tools[name][1]

    async def call_tool(self, scope, plugin_id, runtime_id, call, writes=None, plugin_data=None, world=None):
        self.tool_calls.append(call)
        result = self.tool_results.get(call["name"], {"ok": True, "data": {"done": call["name"]}})
        return json.dumps(result)


def runtime(runtime_id="probe/agent", visibility="system", manifest: dict | None = None, prompt="Do the task.") -> Runtime:
    """An agent runtime compiled by the registry from `manifest` (its fields as an author writes them)."""
    return compiled_runtime(manifest, runtime_id=runtime_id, visibility=visibility, prompt=prompt)


def scope(active=("probe",)) -> ExecutionScope:
    return ExecutionScope(store_pb2.Session(id="s-1", locale="en", active_plugins=list(active)), "t-1", 1)


async def no_stream(piece) -> None:
    return None
