"""Example plugin: Python hookspecs (docs/event-hooks.md).

Two objects with `@hookimpl` methods, registered with `covel.register_hookimpls(obj)`. The
hooks service maps them onto the contract's events, which PLUGIN.md declares:
before_llm_call/after_llm_call -> PreLLMCall + PostLLMResponse, before_tool_call/after_tool_call
-> PreToolUse + PostToolUse, system_prompt -> PostContextAssembly, on_error -> PostRuntime.

A hookimpl that raises is logged and skipped, so the policy refuses with
`ToolCallDecision.deny(...)`, never by raising. Order is pluggy's: the last registered object
runs first, so the policy (registered last) sees every tool call before anything else here.
"""

import json

from shared.logs import get_logger
from shared.plugin_sdk.hookspecs import LLMCallDecision, ToolCallDecision, hookimpl

log = get_logger(component="example-hookspecs")
PAUSE = "(pause)"
PAUSED_STORY = json.dumps({"segments": [{"kind": "narration", "text": "The story holds its breath and waits for you."}],
                           "yield": "user"})


class HouseRules:
    @hookimpl
    def system_prompt(self, prompt, state):
        return "House rules: keep each reply under 150 words, and never decide what the player's character feels."

    @hookimpl
    def before_llm_call(self, request, state):
        last = next((m for m in reversed(request.messages) if m.get("role") == "user"), None)
        if last is not None and last.get("content", "").strip() == PAUSE:
            # Answer this call ourselves: the story the player reads is PAUSED_STORY.
            return LLMCallDecision.finish(PAUSED_STORY)
        return None

    @hookimpl
    def after_llm_call(self, request, result, state):
        log.info("example.model_answered", run_id=result.run_id, tool_calls=len(result.tool_calls), ms=result.duration_ms)

    @hookimpl
    def on_error(self, stage, error, message):
        log.warning("example.failure", stage=stage, error=str(error))


class ToolPolicy:
    @hookimpl(tryfirst=True)
    def before_tool_call(self, call, state):
        denied = {name.strip() for name in str(state["ctx"].get_own_settings().get("deniedTools", "")).split(",") if name.strip()}
        if call.tool in denied:
            return ToolCallDecision.deny(f"{call.tool} is not allowed at this table")
        return None

    @hookimpl
    def after_tool_call(self, call, result, state):
        log.info("example.tool_called", tool=call.tool, ok=result.error is None, ms=result.duration_ms)


def register(covel):
    covel.register_hookimpls(HouseRules())
    covel.register_hookimpls(ToolPolicy())
