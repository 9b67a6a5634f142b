"""Python hookspecs onto the contract's events (spec: python-hookspecs, "App Hooks 与 Agent 事件").

A plugin registers objects with `@hookimpl` methods (`covel.register_hookimpls(obj)`); this
module turns them into ordinary `covel.on(...)` registrations of the plugin, so the
dispatcher, declarations (contributes.hooks) and traces treat them like any handler:

| hookspec                          | events                          |
|-----------------------------------|---------------------------------|
| before_llm_call, after_llm_call   | PreLLMCall + PostLLMResponse    |
| before_tool_call, after_tool_call | PreToolUse + PostToolUse        |
| system_prompt                     | PostContextAssembly             |
| on_error                          | PostRuntime (failed runtimes)   |
| provide_tools                     | covel.register_tool, at load    |

The difference from `covel.on` handlers: an impl that raises or returns the wrong type is
logged and skipped (and reported to on_error); it never blocks. Impls run in pluggy's order
(LIFO registration, tryfirst/trylast).

What the kernel's results cannot say, and how it is met:
- LLMCallDecision.finish(text): PreLLMCall cannot skip the model call. The call is sent
  without tools and without streaming, and PostLLMResponse replaces its answer with `text`.
- ToolCallDecision.replace(result): PreToolUse cannot answer for a tool. The call is renamed
  to `covel:replaced:<tool>` (a name no runtime may call, so nothing runs), and PostToolUse
  gives the model `{"ok": true, "data": result}`. The kernel still counts the call as failed
  (no completion by a finishWith/afterTools tool).
- after_tool_call sees calls refused by this plugin's own deny, not those another plugin refused.
- LLMCallRequest.max_tokens and LLMCallResult.usage are unknown to hooks: None; a changed
  max_tokens is ignored (logged).
"""

from __future__ import annotations

import inspect
import json
import time
from collections import OrderedDict
from dataclasses import replace as dataclass_replace
from typing import Any

import pluggy

from shared.logs import get_logger
from shared.plugin_sdk.hookspecs import (
    HOOK_NAMES,
    PROJECT,
    CovelHookSpecs,
    LLMCallDecision,
    LLMCallRequest,
    LLMCallResult,
    RuntimeFailed,
    Tool,
    ToolCall,
    ToolCallDecision,
    ToolCallFailed,
    ToolCallResult,
)
from shared.plugin_sdk.registrar import PluginRegistrar, RegistrationError

log = get_logger(component="hookspecs")
REPLACED_PREFIX = "covel:replaced:"
# Calls seen by a Pre* hook and not yet by its Post* (a failed model call never reaches PostLLMResponse).
_PENDING_LIMIT = 4096

EVENTS_OF_HOOK: dict[str, tuple[str, ...]] = {
    "before_llm_call": ("PreLLMCall", "PostLLMResponse"),
    "after_llm_call": ("PreLLMCall", "PostLLMResponse"),
    "before_tool_call": ("PreToolUse", "PostToolUse"),
    "after_tool_call": ("PreToolUse", "PostToolUse"),
    "system_prompt": ("PostContextAssembly",),
    "on_error": ("PostRuntime",),
    "provide_tools": (),
}

_MISSING = object()


def events_for(hook_names: set[str]) -> list[str]:
    """The contract events a set of implemented hooks registers (what contributes.hooks must declare)."""
    return list(dict.fromkeys(event for name in HOOK_NAMES if name in hook_names for event in EVENTS_OF_HOOK[name]))


class _Pending(OrderedDict):
    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        while len(self) > _PENDING_LIMIT:
            self.popitem(last=False)


def _run_key(ctx) -> str:
    return f"{ctx.turn_id}:{ctx.runtime_id}"


def _state(ctx) -> dict[str, Any]:
    return {
        "session_id": ctx.session_id, "turn_id": ctx.turn_id, "locale": ctx.locale,
        "plugin_id": ctx.plugin_id, "runtime_id": ctx.runtime_id, "ctx": ctx,
    }


def _arguments(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


class HookspecAdapter:
    """One plugin's hookimpl objects in one pluggy manager, exposed as contract handlers."""

    def __init__(self, plugin_id: str, objects: list[Any]) -> None:
        self.plugin_id = plugin_id
        self._manager = pluggy.PluginManager(PROJECT)
        self._manager.add_hookspecs(CovelHookSpecs)
        try:
            for index, obj in enumerate(objects):
                self._manager.register(obj, name=f"{plugin_id}#{index}:{type(obj).__name__}")
            self._manager.check_pending()
        except pluggy.PluginValidationError as error:
            raise RegistrationError(
                f"covel.register_hookimpls: {error}; the hooks are {', '.join(HOOK_NAMES)}"
            ) from error
        self._llm_calls = _Pending()
        self._finishes = _Pending()
        self._tool_calls = _Pending()
        self._replacements = _Pending()

    def implemented(self) -> set[str]:
        return {name for name in HOOK_NAMES if self._impls(name)}

    def _impls(self, name: str) -> list:
        # pluggy calls the last of get_hookimpls() first.
        return list(reversed(getattr(self._manager.hook, name).get_hookimpls()))

    async def _call(self, name: str, impl, **arguments: Any) -> Any:
        """One impl; what it raised is logged, reported to on_error and turned into _MISSING."""
        try:
            outcome = impl.function(**{arg: arguments[arg] for arg in impl.argnames})
            if inspect.isawaitable(outcome):
                outcome = await outcome
            return outcome
        except Exception as error:  # plugin code: logged and skipped (spec)
            log.warning("hookimpl.raised", plugin_id=self.plugin_id, hook=name, impl=impl.plugin_name,
                        error=f"{type(error).__name__}: {error}")
            if name != "on_error":
                await self._notify_error(name, error)
            return _MISSING

    def _wrong_type(self, name: str, impl, outcome: Any, expected: str) -> None:
        log.warning("hookimpl.wrong_return_type", plugin_id=self.plugin_id, hook=name, impl=impl.plugin_name,
                    returned=type(outcome).__name__, expected=expected)

    async def _notify_error(self, stage: str, error: Exception) -> None:
        for impl in self._impls("on_error"):
            outcome = await self._call("on_error", impl, stage=stage, error=error, message=None)
            if outcome is not None and outcome is not _MISSING:
                self._wrong_type("on_error", impl, outcome, "None")

    async def _notify_all(self, name: str, **arguments: Any) -> None:
        for impl in self._impls(name):
            outcome = await self._call(name, impl, **arguments)
            if outcome is not None and outcome is not _MISSING:
                self._wrong_type(name, impl, outcome, "None")

    # PreLLMCall / PostLLMResponse

    async def pre_llm_call(self, ctx, payload) -> dict[str, Any] | None:
        run_key = _run_key(ctx)
        original = LLMCallRequest(
            run_id=run_key, model=str(payload.get("model") or ""), messages=list(payload.get("messages") or []),
            tool_names=tuple(payload.get("tools") or ()),
        )
        request, decision = original, None
        state = _state(ctx)
        for impl in self._impls("before_llm_call"):
            outcome = await self._call("before_llm_call", impl, request=request, state=state)
            if outcome is None or outcome is _MISSING:
                continue
            if isinstance(outcome, LLMCallDecision):
                if outcome.action != "finish" or not isinstance(outcome.text, str):
                    self._wrong_type("before_llm_call", impl, outcome, "LLMCallDecision.finish(text)")
                    continue
                decision = outcome
                break
            if isinstance(outcome, LLMCallRequest):
                request = outcome
                continue
            self._wrong_type("before_llm_call", impl, outcome, "LLMCallRequest, LLMCallDecision or None")
        if request.max_tokens != original.max_tokens:
            log.warning("hookimpl.ignored", plugin_id=self.plugin_id, hook="before_llm_call",
                        field="max_tokens", why="PreLLMCall cannot change the output limit")
        replace: dict[str, Any] = {}
        if request.messages != original.messages:
            replace["messages"] = request.messages
        if request.model != original.model:
            replace["model"] = request.model
        if request.tool_names != original.tool_names:
            replace["tools"] = list(request.tool_names)
        if decision is not None:
            # The model is still asked (PreLLMCall cannot skip it), with no tools and no stream; its answer is replaced.
            replace.update(tools=[], stream=False)
            self._finishes.put(run_key, decision.text)
        else:
            self._finishes.pop(run_key, None)
        self._llm_calls.put(run_key, (request, time.perf_counter_ns()))
        return {"action": "continue", "replace": replace} if replace else None

    async def post_llm_response(self, ctx, payload) -> dict[str, Any] | None:
        run_key = _run_key(ctx)
        request, started = self._llm_calls.pop(run_key, (None, None))
        if request is None:
            request = LLMCallRequest(run_id=run_key, model="", messages=list(payload.get("messages") or []))
        finish = self._finishes.pop(run_key, None)
        response = payload.get("response") or {}
        replace = None
        if finish is not None:
            response = {**response, "content": finish, "toolCalls": []}
            replace = {"action": "continue", "replace": {"response": response}}
        result = LLMCallResult(
            run_id=run_key, text=response.get("content"), tool_calls=list(response.get("toolCalls") or []),
            duration_ms=(time.perf_counter_ns() - started) // 1_000_000 if started else 0,
        )
        await self._notify_all("after_llm_call", request=request, result=result, state=_state(ctx))
        return replace

    # PreToolUse / PostToolUse

    async def pre_tool_use(self, ctx, payload) -> dict[str, Any] | None:
        raw = payload.get("toolCall") or {}
        run_key = _run_key(ctx)
        original = ToolCall(run_id=run_key, tool=str(raw.get("name") or ""), arguments=_arguments(raw.get("arguments")),
                            call_id=str(raw.get("id") or ""), context=ctx)
        call, decision = original, None
        state = _state(ctx)
        for impl in self._impls("before_tool_call"):
            outcome = await self._call("before_tool_call", impl, call=call, state=state)
            if outcome is None or outcome is _MISSING:
                continue
            if not isinstance(outcome, ToolCallDecision) or outcome.action not in ("proceed", "replace", "deny"):
                self._wrong_type("before_tool_call", impl, outcome, "ToolCallDecision or None")
                continue
            if outcome.action == "proceed":
                if outcome.arguments is not None:
                    if not isinstance(outcome.arguments, dict):
                        self._wrong_type("before_tool_call", impl, outcome.arguments, "proceed(arguments: dict)")
                        continue
                    call = dataclass_replace(call, arguments=outcome.arguments)
                continue
            decision = outcome
            break
        key = (run_key, original.call_id)
        if decision is not None and decision.action == "deny":
            message = decision.message or f"denied by a before_tool_call hook of plugin {self.plugin_id}"
            await self._notify_all("after_tool_call", call=call, state=state, result=ToolCallResult(
                run_id=run_key, tool=call.tool, arguments=call.arguments, error=ToolCallFailed("refused", message)))
            return {"action": "abort", "reason": message}
        self._tool_calls.put(key, (call, time.perf_counter_ns()))
        if decision is not None:
            self._replacements.put(key, decision.result)
            return {"action": "continue", "replace": {"toolCall": {"name": REPLACED_PREFIX + call.tool, "arguments": call.arguments}}}
        if call.arguments != original.arguments:
            return {"action": "continue", "replace": {"toolCall": {"arguments": call.arguments}}}
        return None

    async def post_tool_use(self, ctx, payload) -> dict[str, Any] | None:
        raw = payload.get("toolCall") or {}
        run_key = _run_key(ctx)
        key = (run_key, str(raw.get("id") or ""))
        name = str(raw.get("name") or "").removeprefix(REPLACED_PREFIX)
        call, started = self._tool_calls.pop(key, (None, None))
        if call is None:
            call = ToolCall(run_id=run_key, tool=name, arguments=_arguments(raw.get("arguments")), call_id=key[1], context=ctx)
        duration_ms = (time.perf_counter_ns() - started) // 1_000_000 if started else 0
        replaced = self._replacements.pop(key, _MISSING)
        if replaced is not _MISSING:
            result = ToolCallResult(run_id=run_key, tool=call.tool, arguments=call.arguments, result=replaced, duration_ms=duration_ms)
            await self._notify_all("after_tool_call", call=call, result=result, state=_state(ctx))
            text = json.dumps({"ok": True, "data": replaced}, ensure_ascii=False, default=str)
            return {"action": "continue", "replace": {"result": {"result": text}}}
        outcome = payload.get("result") or {}
        try:
            unified = json.loads(outcome.get("result") or "{}")
        except (TypeError, json.JSONDecodeError):
            unified = {"ok": False, "error": {"code": "invalid-result", "message": "the tool result is not JSON"}}
        if isinstance(unified, dict) and unified.get("ok") is True:
            result = ToolCallResult(run_id=run_key, tool=call.tool, arguments=call.arguments, result=unified.get("data"),
                                    duration_ms=duration_ms)
        else:
            error = (unified.get("error") if isinstance(unified, dict) else None) or {}
            result = ToolCallResult(run_id=run_key, tool=call.tool, arguments=call.arguments, duration_ms=duration_ms,
                                    error=ToolCallFailed(str(error.get("code") or "error"), str(error.get("message") or ""),
                                                         str(error.get("hint") or "")))
        await self._notify_all("after_tool_call", call=call, result=result, state=_state(ctx))
        return None

    # PostContextAssembly / PostRuntime

    async def post_context_assembly(self, ctx, payload) -> dict[str, Any] | None:
        messages = payload.get("messages") or []
        prompt = next((m.get("content") for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), "")
        state = _state(ctx)
        parts = []
        for impl in self._impls("system_prompt"):
            outcome = await self._call("system_prompt", impl, prompt=prompt or "", state=state)
            if outcome is None or outcome is _MISSING:
                continue
            if not isinstance(outcome, str):
                self._wrong_type("system_prompt", impl, outcome, "str")
                continue
            if outcome.strip():
                parts.append(outcome.strip())
        if not parts:
            return None
        system_prompt = "\n\n".join([str(payload.get("systemPrompt") or ""), *parts]).strip()
        return {"action": "continue", "replace": {"systemPrompt": system_prompt}}

    async def post_runtime(self, ctx, payload) -> None:
        result = payload.get("result") or {}
        if result.get("status") == "failed":
            await self._notify_error("runtime", RuntimeFailed(str(result.get("reason") or "the runtime failed")))

    def tools(self) -> list[Tool]:
        """provide_tools, called once at load; a raising or wrong-typed impl is logged and skipped."""
        tools: list[Tool] = []
        for impl in self._impls("provide_tools"):
            try:
                outcome = impl.function()
            except Exception as error:  # plugin code
                log.warning("hookimpl.raised", plugin_id=self.plugin_id, hook="provide_tools", impl=impl.plugin_name,
                            error=f"{type(error).__name__}: {error}")
                continue
            if not isinstance(outcome, (list, tuple)) or not all(isinstance(tool, Tool) for tool in outcome):
                self._wrong_type("provide_tools", impl, outcome, "list[Tool]")
                continue
            tools.extend(outcome)
        return tools


def register_hookimpls(registrar: PluginRegistrar) -> HookspecAdapter | None:
    """Turn the registrar's hookimpl objects into its hook and tool registrations."""
    if not registrar.hookimpl_objects:
        return None
    adapter = HookspecAdapter(registrar.plugin_id, registrar.hookimpl_objects)
    handlers = {
        "PreLLMCall": adapter.pre_llm_call,
        "PostLLMResponse": adapter.post_llm_response,
        "PreToolUse": adapter.pre_tool_use,
        "PostToolUse": adapter.post_tool_use,
        "PostContextAssembly": adapter.post_context_assembly,
        "PostRuntime": adapter.post_runtime,
    }
    for event in events_for(adapter.implemented()):
        registrar.on(event, handlers[event])
    for tool in adapter.tools():
        registrar.register_tool(tool.name, tool.handler, description=tool.description, parameters=tool.parameters,
                                read_only=tool.read_only)
    return adapter
