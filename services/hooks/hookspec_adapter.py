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
- LLMCallDecision.finish(text): PreLLMCall's result can only rewrite messages, model, tools
  and stream (its abort changes nothing), so it cannot answer for the model. The call is sent
  without tools and without streaming, and PostLLMResponse replaces its answer with `text`.
- ToolCallDecision.replace(result): PreToolUse can only refuse a call or rewrite its name and
  arguments. For a tool registered by a plugin's entry module (it runs here, through
  CallTool), the call goes on unchanged and CallTool answers `{"ok": true, "data": result}`
  without running the tool (`take_replacement`): a successful call. Any other tool (the
  kernel's own, run by the scheduler) is renamed `covel:replaced:<tool>` so nothing runs, and
  PostToolUse gives the model the result; the kernel counts that call as failed.
- after_tool_call also hears of calls another plugin's PreToolUse refused: the hooks service
  tells every hookspec plugin of the session once a PreToolUse dispatch ends in abort
  (`tool_refused`).
- after_llm_call hears of a call that never reached PostLLMResponse (the model call failed,
  or a cut-off answer was asked again) at the runtime's PostRuntime, with `error` set; so
  implementing it also registers PostRuntime. Subagent and nested runs have no PostRuntime of
  their own: their unanswered calls are reported at the PostRuntime of the run they belong to
  (the context's root_execution_id), with an error naming the subagent call.
- Several executions of one runtime can run at once (subagents of one provider in a read-only
  pool, nested runs): pending calls are kept per execution (the context's execution_id, set by
  the scheduler on every runtime-scoped event), so a Post… event finds its own call even when
  another plugin rewrote the messages or arguments. Within one execution model calls follow one
  another: PostLLMResponse answers the newest pending call. Tool calls are keyed by call id, then
  matched by what the Post… event carries (name and arguments), else the oldest. A context with no
  execution_id (an older scheduler) falls back to `turn:runtime` and that matching (for model
  calls, the messages sent).
- LLMCallRequest.max_tokens is unknown to hooks (None); a changed max_tokens is ignored
  (logged). LLMCallResult.usage is the response's usage.
- pluggy wrappers (`hookimpl(wrapper=True)`, `hookimpl(hookwrapper=True)`) are refused at load:
  every hook here is called impl by impl, with the contract's rules between them, so there is
  no call for a wrapper to wrap.
"""

from __future__ import annotations

import inspect
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import replace as dataclass_replace
from typing import Any

import pluggy

from shared.hook_events import EVENTS_BY_NAME
from shared.logs import get_logger
from shared.plugin_sdk import HookContext
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
from shared.plugin_threads import call_plugin_code

log = get_logger(component="hookspecs")
REPLACED_PREFIX = "covel:replaced:"
# Calls seen by a Pre* hook and not yet by its Post* (a failed model call never reaches PostLLMResponse).
_PENDING_LIMIT = 4096

EVENTS_OF_HOOK: dict[str, tuple[str, ...]] = {
    "before_llm_call": ("PreLLMCall", "PostLLMResponse"),
    # PostRuntime: a call that never reached PostLLMResponse (failed) is reported when its runtime ends.
    "after_llm_call": ("PreLLMCall", "PostLLMResponse", "PostRuntime"),
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


class LLMCallFailed(Exception):
    """after_llm_call's error for a call that got no answer to PostLLMResponse."""


@dataclass
class _LLMCall:
    request: LLMCallRequest
    started_ns: int
    # What this plugin left the messages as: PostLLMResponse carries the messages sent.
    sent: str
    finish: str | None = None


@dataclass
class _ToolCall:
    call: ToolCall
    started_ns: int
    replacement: Any = _MISSING
    # CallTool answered with the replacement (the call then counts as a successful one).
    answered: bool = False


class _Pending:
    """Calls a Pre* event saw and its Post* has not: a list per key (several executions of one
    runtime may be in flight at once), oldest keys dropped past _PENDING_LIMIT entries."""

    def __init__(self) -> None:
        self._by_key: OrderedDict[Any, list[Any]] = OrderedDict()
        self._count = 0

    def put(self, key: Any, value: Any) -> None:
        self._by_key.setdefault(key, []).append(value)
        self._count += 1
        while self._count > _PENDING_LIMIT:
            _, dropped = self._by_key.popitem(last=False)
            self._count -= len(dropped)

    def take(self, key: Any, prefer: Callable[[Any], bool] = lambda entry: True, *, newest: bool = False) -> Any:
        """The first entry `prefer` accepts, else the oldest; with `newest`, the newest; None when there is none."""
        entries = self._by_key.get(key)
        if not entries:
            return None
        index = len(entries) - 1 if newest else next((i for i, entry in enumerate(entries) if prefer(entry)), 0)
        entry = entries.pop(index)
        self._count -= 1
        if not entries:
            del self._by_key[key]
        return entry

    def find(self, key: Any, prefer: Callable[[Any], bool]) -> Any:
        return next((entry for entry in self._by_key.get(key, ()) if prefer(entry)), None)

    def take_all(self, key: Any) -> list[Any]:
        entries = self._by_key.pop(key, [])
        self._count -= len(entries)
        return entries

    def take_where(self, wanted: Callable[[Any], bool]) -> list[tuple[Any, list[Any]]]:
        """(key, entries) of every key `wanted` accepts, removed."""
        found = [(key, self._by_key.pop(key)) for key in [key for key in self._by_key if wanted(key)]]
        self._count -= sum(len(entries) for _, entries in found)
        return found

    def __len__(self) -> int:
        return self._count


def _run_key(ctx) -> str:
    """LLMCallRequest.run_id and friends: "<turn id>:<runtime id>"."""
    return f"{ctx.turn_id}:{ctx.runtime_id}"


def _exec_key(ctx) -> tuple[str, str, str, str]:
    """Where an execution's pending calls are kept: (turn, root execution, runtime, execution).
    Without an execution id in the context, one key per runtime in the turn (matched by content)."""
    execution_id = getattr(ctx, "execution_id", None) or ""
    root = (getattr(ctx, "root_execution_id", None) or execution_id) if execution_id else ""
    return (ctx.turn_id, root, ctx.runtime_id or "", execution_id)


def _state(ctx) -> dict[str, Any]:
    return {
        "session_id": ctx.session_id, "turn_id": ctx.turn_id, "locale": ctx.locale,
        "plugin_id": ctx.plugin_id, "runtime_id": ctx.runtime_id,
        "execution_id": getattr(ctx, "execution_id", None) or "",
        "subagent_call_id": getattr(ctx, "subagent_call_id", None) or "",
        "parent_runtime_id": getattr(ctx, "parent_runtime_id", None) or "", "ctx": ctx,
    }


def _arguments(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _digest(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _elapsed_ms(started_ns: int | None) -> int:
    return (time.perf_counter_ns() - started_ns) // 1_000_000 if started_ns else 0


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
        wrappers = [f"{impl.plugin_name}.{name}" for name in HOOK_NAMES for impl in self._impls(name)
                    if impl.hookwrapper or impl.wrapper]
        if wrappers:
            raise RegistrationError(
                f"covel.register_hookimpls: {', '.join(wrappers)} is a pluggy wrapper (wrapper=True or hookwrapper=True); "
                "wrappers are not supported: each impl is called on its own, with the contract's rules between impls. "
                "Use a plain @hookimpl (tryfirst/trylast to order it)"
            )
        self._llm_calls = _Pending()
        self._tool_calls = _Pending()
        # Calls this plugin's own deny refused (it has told after_tool_call already).
        self._denied = _Pending()
        # (plugin id, tool name) of every tool an entry module registered: those run here, through CallTool
        # (set by the loader once every plugin is loaded).
        self.plugin_tools: frozenset[tuple[str, str]] = frozenset()

    def implemented(self) -> set[str]:
        return {name for name in HOOK_NAMES if self._impls(name)}

    def _impls(self, name: str) -> list:
        # pluggy calls the last of get_hookimpls() first.
        return list(reversed(getattr(self._manager.hook, name).get_hookimpls()))

    async def _call(self, name: str, impl, **arguments: Any) -> Any:
        """One impl; what it raised is logged, reported to on_error and turned into _MISSING."""
        try:
            # A plain impl runs in a plugin thread; the registration's timeout bounds the whole handler.
            return await call_plugin_code(impl.function, **{arg: arguments[arg] for arg in impl.argnames})
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
        self._llm_calls.put(_exec_key(ctx), _LLMCall(request, time.perf_counter_ns(), _digest(request.messages),
                                              decision.text if decision is not None else None))
        return {"action": "continue", "replace": replace} if replace else None

    async def post_llm_response(self, ctx, payload) -> dict[str, Any] | None:
        run_key = _run_key(ctx)
        sent = _digest(list(payload.get("messages") or []))
        key = _exec_key(ctx)
        # One execution's model calls follow one another: the newest pending one is answered (older ones got no answer).
        pending: _LLMCall | None = self._llm_calls.take(key, lambda entry: entry.sent == sent, newest=bool(key[3]))
        if pending is None:
            pending = _LLMCall(LLMCallRequest(run_id=run_key, model="", messages=list(payload.get("messages") or [])), 0, sent)
        response = payload.get("response") or {}
        replace = None
        if pending.finish is not None:
            response = {**response, "content": pending.finish, "toolCalls": []}
            replace = {"action": "continue", "replace": {"response": response}}
        usage = response.get("usage")
        result = LLMCallResult(
            run_id=run_key, text=response.get("content"), tool_calls=list(response.get("toolCalls") or []),
            usage=dict(usage) if isinstance(usage, dict) else None, duration_ms=_elapsed_ms(pending.started_ns),
        )
        await self._notify_all("after_llm_call", request=pending.request, result=result, state=_state(ctx))
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
        key = (_exec_key(ctx), original.call_id)
        if decision is not None and decision.action == "deny":
            message = decision.message or f"denied by a before_tool_call hook of plugin {self.plugin_id}"
            self._denied.put(key, call.tool)
            await self._notify_all("after_tool_call", call=call, state=state, result=ToolCallResult(
                run_id=run_key, tool=call.tool, arguments=call.arguments, error=ToolCallFailed("refused", message)))
            return {"action": "abort", "reason": message}
        pending = _ToolCall(call, time.perf_counter_ns())
        self._tool_calls.put(key, pending)
        changed = {"arguments": call.arguments} if call.arguments != original.arguments else {}
        if decision is not None:
            pending.replacement = decision.result
            if (ctx.plugin_id, call.tool) not in self.plugin_tools:
                # Not a plugin tool run by CallTool here: renamed so nothing runs (PostToolUse gives the result).
                return {"action": "continue", "replace": {"toolCall": {"name": REPLACED_PREFIX + call.tool, **changed}}}
        return {"action": "continue", "replace": {"toolCall": changed}} if changed else None

    def take_replacement(self, context, call_id: str, name: str, arguments: str) -> Any:
        """CallTool: the result a replace decision gave this call (and it is answered), or _MISSING.
        `context`: the CallTool request's HookContext (turn, runtime and execution of the call)."""
        key = (_exec_key(context), call_id)
        wanted = _arguments(arguments)

        def replaced(entry: _ToolCall) -> bool:
            return entry.replacement is not _MISSING and not entry.answered

        pending: _ToolCall | None = self._tool_calls.find(
            key, lambda entry: replaced(entry) and entry.call.tool == name and entry.call.arguments == wanted
        ) or self._tool_calls.find(key, replaced)
        if pending is None:
            return _MISSING
        pending.answered = True
        return pending.replacement

    async def post_tool_use(self, ctx, payload) -> dict[str, Any] | None:
        raw = payload.get("toolCall") or {}
        run_key = _run_key(ctx)
        key = (_exec_key(ctx), str(raw.get("id") or ""))
        name = str(raw.get("name") or "").removeprefix(REPLACED_PREFIX)
        arguments = _arguments(raw.get("arguments"))
        pending: _ToolCall | None = self._tool_calls.take(
            key, lambda entry: entry.call.tool == name and entry.call.arguments == arguments)
        if pending is None:
            pending = _ToolCall(ToolCall(run_id=run_key, tool=name, arguments=arguments, call_id=key[1], context=ctx), 0)
        call, duration_ms = pending.call, _elapsed_ms(pending.started_ns)
        if pending.replacement is not _MISSING:
            result = ToolCallResult(run_id=run_key, tool=call.tool, arguments=call.arguments, result=pending.replacement,
                                    duration_ms=duration_ms)
            await self._notify_all("after_tool_call", call=call, result=result, state=_state(ctx))
            if pending.answered:
                # CallTool already answered with it: a successful call as it stands.
                return None
            text = json.dumps({"ok": True, "data": pending.replacement}, ensure_ascii=False, default=str)
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

    async def tool_refused(self, ctx, payload, reason: str) -> None:
        """A PreToolUse dispatch ended in abort (another plugin refused, or a guard failed closed):
        after_tool_call hears of it, unless this plugin's own deny already told it."""
        raw = payload.get("toolCall") or {}
        run_key = _run_key(ctx)
        key = (_exec_key(ctx), str(raw.get("id") or ""))
        name = str(raw.get("name") or "").removeprefix(REPLACED_PREFIX)
        if self._denied.take(key, lambda tool: tool == name) is not None:
            return
        pending: _ToolCall | None = self._tool_calls.take(key, lambda entry: entry.call.tool == name)
        if not self._impls("after_tool_call"):
            return
        call = pending.call if pending is not None else ToolCall(
            run_id=run_key, tool=name, arguments=_arguments(raw.get("arguments")), call_id=key[1], context=ctx)
        await self._notify_all("after_tool_call", call=call, state=_state(ctx), result=ToolCallResult(
            run_id=run_key, tool=call.tool, arguments=call.arguments, error=ToolCallFailed("refused", reason),
            duration_ms=_elapsed_ms(pending.started_ns if pending is not None else None)))

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
        reason = str(result.get("reason") or "")
        # Model calls of this execution that never reached PostLLMResponse: failed (or a cut-off answer asked again);
        # and those of the subagent and nested runs it started, which have no PostRuntime of their own.
        key = _exec_key(ctx)
        if key[3]:
            unanswered = self._llm_calls.take_where(lambda other: other[0] == key[0] and other[1] == key[1])
        else:
            unanswered = [(key, self._llm_calls.take_all(key))]
        if any(entries for _, entries in unanswered) and self._impls("after_llm_call"):
            state = _state(ctx)
            for other, entries in sorted(unanswered, key=lambda found: found[0] != key):
                for pending in entries:
                    error = LLMCallFailed(
                        (reason or "the model's answer never reached PostLLMResponse (a cut-off answer was asked again)")
                        if other == key else
                        f"the model call of {other[2]} (execution {other[3]}, run by {ctx.runtime_id}) got no answer: "
                        "that run ended before PostLLMResponse (its model call failed, or a cut-off answer was asked again)")
                    await self._notify_all("after_llm_call", request=pending.request, state=state, result=LLMCallResult(
                        run_id=pending.request.run_id, error=error, duration_ms=_elapsed_ms(pending.started_ns)))
        if result.get("status") == "failed":
            await self._notify_error("runtime", RuntimeFailed(reason or "the runtime failed"))

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


def _loaded_adapters(loaded: list, table, execution) -> list[HookspecAdapter]:
    """The hookspec adapters whose PreToolUse handlers this execution runs (active, approved)."""
    running = {handler.plugin_id for handler in table.handlers_for("PreToolUse", execution)}
    return [plugin.hookspecs for plugin in loaded if plugin.hookspecs is not None and plugin.entry.plugin_id in running]


async def tell_tool_refused(loaded: list, table, execution, payload: dict[str, Any], reason: str) -> None:
    """After a PreToolUse dispatch that ended in abort: each hookspec plugin's after_tool_call hears of it."""
    view = execution.view(EVENTS_BY_NAME["PreToolUse"])
    for adapter in _loaded_adapters(loaded, table, execution):
        await adapter.tool_refused(HookContext(view, adapter.plugin_id), payload, reason)


async def find_replacement(loaded: list, context, call_id: str, name: str, arguments: str) -> tuple[Any] | None:
    """take_replacement for adapters that may live in a sandbox worker (their answer is awaited)."""
    for plugin in loaded:
        if plugin.hookspecs is not None:
            found = plugin.hookspecs.take_replacement(context, call_id, name, arguments)
            if inspect.isawaitable(found):
                found = await found
            if found is not _MISSING:
                return (found,)
    return None


def take_replacement(loaded: list, context, call_id: str, name: str, arguments: str) -> tuple[Any] | None:
    """CallTool: (result,) when a hookspec plugin's replace decision answers this call; else None."""
    for plugin in loaded:
        if plugin.hookspecs is not None:
            found = plugin.hookspecs.take_replacement(context, call_id, name, arguments)
            if found is not _MISSING:
                return (found,)
    return None
