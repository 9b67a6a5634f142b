"""PreToolUse and PostToolUse around one tool call, for an agent's tools and a handler's ctx.tools alike."""

from __future__ import annotations

import json
from typing import Any

from covel.common.v1 import common_pb2
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.framework_trace import skipped_tool_entries
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.payloads import PostToolUse, PreToolUse
from services.scheduler.hooks.replies import PostToolUseReply, PreToolUseReply
from services.scheduler.hooks.rules import apply_post_tool_use, apply_pre_tool_use, refused_tool_result

# A call's result: the text the model reads, whether it succeeded, whether a PostToolUse hook ended the loop.
ToolResult = tuple[str, bool, bool]


async def pre_tool_use(call: dict[str, Any], runtime: Runtime, scope: ExecutionScope, hooks: HookBus,
                       trace: list[common_pb2.HookTraceEntry]) -> tuple[str | None, dict[str, Any], str | None]:
    """PreToolUse: (the refusal text when a hook aborted the call, the call as the hooks left it, the result
    text when a hook answered it with replace.result: the tool then does not run)."""
    pre = await hooks.dispatch(PreToolUse(call), scope, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id)
    trace.extend(_named(pre.trace, call))
    if pre.aborted:
        trace.extend(skipped_tool_entries(call, runtime.runtime_id, "hook-aborted"))
        return json.dumps(refused_tool_result(pre.reason), ensure_ascii=False), call, None
    reply = PreToolUseReply.of(pre)
    return None, apply_pre_tool_use(call, reply.replace), reply.answer


async def post_tool_use(call: dict[str, Any], result_text: str, runtime: Runtime, scope: ExecutionScope, hooks: HookBus,
                        trace: list[common_pb2.HookTraceEntry]) -> ToolResult:
    """PostToolUse: the result as the hooks left it, whether the call succeeded, whether a hook terminated the loop."""
    ok = json.loads(result_text).get("ok") is True
    record = PostToolUse(call, result_text, ok)
    post = await hooks.dispatch(record, scope, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id)
    trace.extend(_named(post.trace, call))
    outcome = apply_post_tool_use(record.tool_result(), PostToolUseReply.of(post).replace)
    text = outcome.result.get("result")
    return (text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)), ok, outcome.terminate


def _named(entries: list[common_pb2.HookTraceEntry], call: dict[str, Any]) -> list[common_pb2.HookTraceEntry]:
    """The entries of a call's hooks, each naming its tool (what concealment keeps of them)."""
    for entry in entries:
        entry.tool_name = str(call.get("name") or "")
    return entries
