"""Plugin tools always answer the unified result, whatever the tool does."""

import asyncio

from services.hooks.tool_host import call_tool
from shared.plugin_sdk import PluginRegistrar, ToolContext, ToolError

PARAMS = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}


def tool(handler):
    registrar = PluginRegistrar("p")
    registrar.register_tool("t", handler, parameters=PARAMS)
    return registrar.tools[0]


def context() -> ToolContext:
    return ToolContext(session_id="s", turn_id="t", locale="en", runtime_id="p/r", logical_turn=1)


async def test_ok_and_data() -> None:
    assert await call_tool(tool(lambda ctx, a: {"double": a["n"] * 2}), context(), '{"n": 2}') == {"ok": True, "data": {"double": 4}}


async def test_invalid_arguments_name_the_field() -> None:
    result = await call_tool(tool(lambda ctx, a: 1), context(), '{"n": "two"}')
    assert result["ok"] is False and result["error"]["code"] == "invalid-input" and result["error"]["message"].startswith("n:")
    assert (await call_tool(tool(lambda ctx, a: 1), context(), "{nope"))["error"]["code"] == "invalid-input"


async def test_tool_errors_raises_non_json_and_timeouts() -> None:
    def refuses(ctx, a):
        raise ToolError("not-found", "no such thing", "try 3")

    def crashes(ctx, a):
        raise KeyError("x")

    async def hangs(ctx, a):
        await asyncio.sleep(5)

    assert await call_tool(tool(refuses), context(), '{"n": 1}') == {
        "ok": False, "error": {"code": "not-found", "message": "no such thing", "hint": "try 3"}}
    assert (await call_tool(tool(crashes), context(), '{"n": 1}'))["error"]["code"] == "internal"
    assert (await call_tool(tool(lambda ctx, a: object()), context(), '{"n": 1}'))["error"]["code"] == "internal"
    assert (await call_tool(tool(hangs), context(), '{"n": 1}', timeout_s=0.05))["error"]["code"] == "timeout"
