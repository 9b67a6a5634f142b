"""The agent and function blocks of a compiled runtime: model slot, tool choice and completion, tools, the loop
with its profile's defaults and cross-field rules, and a function's handler."""

from __future__ import annotations

from typing import Any

from services.registry.compile_scope import CompileScope
from services.registry.runtime_defaults import (
    DEFAULT_CORRECTIONS,
    DEFAULT_FUNCTION_TIMEOUT_MS,
    DEFAULT_HANDLER,
    DEFAULT_IDLE_TIMEOUT_MS,
    DEFAULT_LOOP_DETECTION,
    DEFAULT_MAX_RECURSION_DEPTH,
    DEFAULT_MAX_STEPS,
    LOOP_LIMITS,
    LOOP_PROFILES,
)
from services.registry.runtime_models import DatasetImport, Finalizer, NamedToolChoice, ServiceImport


def compile_agent(scope: CompileScope, visibility: str, *, subagent_only: bool) -> dict[str, Any]:
    agent = scope.decl.agent
    written = agent.model_dump(by_alias=True, exclude_none=True) if agent else {}
    compiled: dict[str, Any] = {
        "model": written.get("model") or ("story" if visibility == "story" else "plugin"),
        "reasoning": written.get("reasoning", True),
    }
    finish_with = agent.finishWith if agent else None
    if agent and agent.toolChoice is not None:
        choice = agent.toolChoice
        compiled["toolChoice"] = choice.model_dump() if isinstance(choice, NamedToolChoice) else choice
    elif finish_with:
        compiled["toolChoice"] = "required"
    if finish_with and agent and agent.completion is not None:
        scope.error("finish-with-and-completion", "write finishWith or completion, not both", "agent.completion")
    if finish_with:
        compiled["finishWith"] = finish_with
        compiled["completion"] = {"require": "tool-use", "afterTools": [finish_with]}
    elif "completion" in written:
        compiled["completion"] = written["completion"]
        if written["completion"].get("require") == "explicit" and visibility == "story":
            scope.error("story-explicit-completion", "a story runtime cannot use completion.require: explicit", "agent.completion.require")
    if "history" in written:
        compiled["history"] = written["history"]
    compiled["tools"] = agent_tools(scope)
    compiled["loop"] = compile_loop(scope, visibility, subagent_only=subagent_only)
    return compiled

def agent_tools(scope: CompileScope) -> dict[str, Any]:
    tools = scope.decl.agent.tools if scope.decl.agent else None
    plugin = tools.plugin if tools and tools.plugin is not None else None
    if plugin is None:
        # Only the inline runtime of a one-runtime package gets contributes.tools by default.
        plugin = list(scope.source.contributed_tools) if scope.source.inline else []
    services = [
        item.model_dump(by_alias=True, exclude_none=True) if isinstance(item, ServiceImport) else {"contract": item}
        for item in (tools.services if tools else None) or []
    ]
    datasets = [
        item.model_dump(exclude_none=True) if isinstance(item, DatasetImport) else {"dataset": item}
        for item in (tools.datasets if tools else None) or []
    ]
    return {"plugin": list(plugin), "services": services, "datasets": datasets}

def compile_loop(scope: CompileScope, visibility: str, *, subagent_only: bool) -> dict[str, Any]:
    loop = scope.decl.agent.loop if scope.decl.agent else None
    written = loop.model_dump(by_alias=True, exclude_none=True) if loop else {}
    default_profile = "actor" if subagent_only else ("story" if visibility == "story" else "system")
    profile = written.get("profile") or default_profile
    if profile == "story" and visibility != "story":
        scope.error("story-profile", "agent.loop.profile: story needs io.visibility: story", "agent.loop.profile")
    timeout, call_timeout, retries = LOOP_LIMITS["story" if visibility == "story" else "system"]
    compiled: dict[str, Any] = {
        "profile": profile,
        "timeoutMs": written.get("timeoutMs", timeout),
        "callTimeoutMs": written.get("callTimeoutMs", call_timeout),
        "maxRetries": written.get("maxRetries", retries),
        "idleTimeoutMs": written.get("idleTimeoutMs", DEFAULT_IDLE_TIMEOUT_MS),
        "loopDetection": written.get("loopDetection", DEFAULT_LOOP_DETECTION),
        "maxRecursionDepth": written.get("maxRecursionDepth", DEFAULT_MAX_RECURSION_DEPTH),
        "maxSteps": written.get("maxSteps", DEFAULT_MAX_STEPS),
    }
    if "firstTokenTimeoutMs" in written:
        compiled["firstTokenTimeoutMs"] = written["firstTokenTimeoutMs"]
    for key, value in LOOP_PROFILES[profile].items():
        compiled[key] = written.get(key, value)
    finalizer: dict[str, Any] = {"maxSteps": True, "deadlineReserveMs": 0}
    written_finalizer = loop.finalizer if loop else None
    if written_finalizer is False:
        finalizer = {"maxSteps": False, "deadlineReserveMs": 0}
    elif isinstance(written_finalizer, Finalizer):
        finalizer.update(written_finalizer.model_dump(exclude_none=True))
    compiled["finalizer"] = finalizer
    compiled["corrections"] = {**DEFAULT_CORRECTIONS, **written.get("corrections", {})}
    if compiled["stream"] and visibility != "story":
        scope.error("stream-not-story", "stream: true needs io.visibility: story", "agent.loop.stream")
    if compiled["steering"] and visibility != "story":
        scope.error("steering-not-story", "steering: true needs io.visibility: story", "agent.loop.steering")
    if compiled["truncation"] == "accept" and not compiled["stream"]:
        scope.error(
            "truncation-without-stream",
            "truncation: accept needs stream: true; write truncation: reject",
            "agent.loop.truncation",
        )
    if finalizer["deadlineReserveMs"] >= compiled["timeoutMs"]:
        scope.error(
            "deadline-reserve",
            "finalizer.deadlineReserveMs must be less than timeoutMs",
            "agent.loop.finalizer.deadlineReserveMs",
        )
    return compiled

def compile_function(scope: CompileScope) -> dict[str, Any]:
    function = scope.decl.function
    assert function is not None
    written_handler = function.handler or DEFAULT_HANDLER
    handler = scope.code_file(written_handler, "function.handler")
    shown = handler or scope.package_file(written_handler)[1]
    compiled: dict[str, Any] = {"tools": list(function.tools or [])}
    if handler is None:
        scope.error("handler-outside-package", f"the handler `{written_handler}` is outside the package", "function.handler")
    elif not scope.existing_file(handler):
        what = (
            f"the function handler `{written_handler}` does not exist (looked for {shown})"
            if function.handler
            else f"function.handler is not written and the default {shown} does not exist"
        )
        scope.drop(
            "handler-missing",
            what,
            "function.handler" if function.handler else "function",
            hint="add handler.py with `async def handler(ctx)`, or point function.handler at the module",
        )
    compiled["handler"] = shown
    if function.model is not None:
        compiled["model"] = function.model
    compiled["timeoutMs"] = function.timeoutMs or DEFAULT_FUNCTION_TIMEOUT_MS
    return compiled
