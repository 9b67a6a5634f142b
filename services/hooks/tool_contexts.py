"""The context a plugin's tool, service, action, form validator or extension provider is called with (ToolContext),
and what its call answers. A tool or an action gets the calling execution's world view and session view as the
scheduler sent them (CallToolRequest / CallActionRequest `world`, `session_view`) and a random source of its own,
seeded by COVEL_RANDOM_SEED: the n-th number a tool call (by its call id) or an action draws repeats run after run."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import struct_pb2

from covel.hooks.v1 import hooks_pb2
from shared.plugin_sdk.seeded_random import seeded_random
from shared.plugin_sdk.tools import ToolContext
from shared.structs import from_struct, to_struct


def tool_response(result: dict, context: ToolContext) -> hooks_pb2.CallToolResponse:
    """The unified result; the proposals only of a call that succeeded."""
    ok = bool(result.get("ok"))
    proposals = [hooks_pb2.ToolProposal(type=p["type"], payload=to_struct(p["payload"])) for p in context.proposals] if ok else []
    return hooks_pb2.CallToolResponse(result=json.dumps(result, ensure_ascii=False), ok=ok, proposals=proposals)


def _given(struct: struct_pb2.Struct | None, present: bool) -> dict[str, Any] | None:
    return from_struct(struct) if struct is not None and present else None


def plugin_context(ctx: hooks_pb2.HookContext, plugin_id: str, plugin_data: Any = None, *,
                   request: hooks_pb2.CallToolRequest | hooks_pb2.CallActionRequest | None = None, random_key: str = "") -> ToolContext:
    """What a plugin's tool, service or extension provider sees of the execution, with its own settings
    (and, for a tool or service an agent calls, its own data: CallToolRequest.plugin_data). A tool's or an
    action's `request` brings its world and session views; `random_key` names what its random source is for."""
    world = _given(request.world, request.HasField("world")) if request is not None else None
    session_view = _given(request.session_view, request.HasField("session_view")) if request is not None else None
    return ToolContext(
        session_id=ctx.session_id, turn_id=ctx.turn_id, locale=ctx.locale or "en", runtime_id=ctx.runtime_id,
        logical_turn=ctx.logical_turn, turn_number=ctx.turn_number,
        _own_settings=from_struct(ctx.plugin_settings[plugin_id]) if plugin_id in ctx.plugin_settings else {},
        _plugin_data=from_struct(plugin_data) if plugin_data is not None else {},
        random=seeded_random(ctx.logical_turn, random_key or f"{ctx.runtime_id}:{plugin_id}", ctx.session_id),
        _world_data=world, _session_view=session_view,
    )
