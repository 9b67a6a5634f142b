"""Python hookspecs onto the contract's events (spec: python-hookspecs, "App Hooks 与 Agent 事件").

A plugin registers objects with `@hookimpl` methods (`covel.register_hookimpls(obj)`); this module
turns them into ordinary `covel.on(...)` registrations of the plugin on the events hookspec_events.py
maps each hook to, so the dispatcher, declarations (contributes.hooks) and traces treat them like any
handler. What a Pre… event leaves for its Post… is in pending_calls.py.

The turn hooks' code is in turn_hooks.py, the app hooks' in app_hooks.py (provide_lifespan in lifespans.py,
provide_environment in environments.py, both run where the plugin's code runs); the decision chains and
the error rule in shared/plugin_sdk/agent_plugins.py (PluginAgentHooks). A hook not supported yet
(NOT_SUPPORTED_YET) fails the load, naming it; docs/hookspecs.md is the table of all of them (covel_cli/hookspec_doc_tables.py).

The difference from `covel.on` handlers: an impl that raises or returns the wrong type is
logged and skipped (and reported to on_error); it never blocks. Impls run in pluggy's order
(LIFO registration, tryfirst/trylast).

What the kernel's results cannot say, and how it is met:
- LLMCallDecision.finish(text): PreLLMCall's replace.response answers the call with `text`; the
  model is not asked. PostLLMResponse follows as for any reply (after_llm_call hears of it there;
  its answer is set to `text` again, should another plugin's handler have changed it).
- run_model_stream: a stream answers as it goes. PreLLMCall keeps it open in this process and answers
  replace.responseStream {plugin, streamId}; the scheduler reads it through StreamModelAnswer and
  streams it to the player like a model's reply (model_streams.py).
- ToolCallDecision.replace(result): for a tool registered by a plugin's entry module (it runs
  here, through CallTool), the call goes on unchanged and CallTool answers
  `{"ok": true, "data": result}` without running the tool (`take_replacement`). Any other tool
  (the kernel's own, run by the scheduler) is answered by PreToolUse's replace.result: the
  scheduler does not run it. Either way a successful call. (REPLACED_PREFIX, the renaming an
  older adapter used for kernel tools, is still stripped from names it sees.)
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

import json
import time
from collections.abc import Callable
from dataclasses import replace as dataclass_replace
from typing import Any

import pluggy

from services.hooks.common import hookspec_events
from services.hooks.common.hookspec_events import EVENTS_OF_HOOK, KEYS_OF_HOOK, events_for
from services.hooks.common.markers import MISSING, CallContext
from services.hooks.plugin_side import admission, app_hooks, tape_mirror, turn_hooks, turn_share
from services.hooks.plugin_side.environments import SessionEnvironments, state_fields
from services.hooks.plugin_side.lifespans import Lifespans
from services.hooks.plugin_side.model_streams import OPEN_STREAMS, StreamAnswer
from services.hooks.plugin_side.pending_calls import (
    REPLACED_PREFIX,
    LLMCallFailed,
    Pending,
    PendingLLMCall,
    PendingToolCall,
    digest,
    elapsed_ms,
    execution_key,
    hook_state,
    run_id_of,
    tool_arguments,
)
from shared.logs import get_logger
from shared.plugin_sdk import HookContext
from shared.plugin_sdk.agent_plugins import RAISED, PluginAgentHooks
from shared.plugin_sdk.event_keys import InternalEvent
from shared.plugin_sdk.hookspecs import (
    HOOK_NAMES,
    PROJECT,
    CovelHookSpecs,
    LLMCallRequest,
    LLMCallResult,
    RuntimeFailed,
    Tool,
    ToolCall,
    ToolCallFailed,
    ToolCallResult,
)
from shared.plugin_sdk.registrar import PluginRegistrar, RegistrationError

log = get_logger(component="hookspecs")


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
        self._refuse_unsupported()
        # The decision chains and the error rule, shared with in-process agents (shared/plugin_sdk/agent_plugins.py).
        self._agent_hooks = PluginAgentHooks(self._manager, plugin_id=plugin_id, on_raised=self._on_raised)
        self._sidecars = app_hooks.sidecars(self._agent_hooks)
        self._tape_mirror = tape_mirror.TapeMirror(self._agent_hooks, self._notify_error)
        self._inboxes = app_hooks.inboxes(self._agent_hooks)
        # provide_lifespan and provide_environment, run by the process that runs this plugin's code.
        self.lifespans = Lifespans(self._agent_hooks)
        self.environments = SessionEnvironments(plugin_id, self._agent_hooks)
        # Each session's turn (its message, load_state's state) from TurnStart to message:sent.
        self._turns = turn_share.KnownTurns(plugin_id)
        self._llm_calls = Pending()
        self._tool_calls = Pending()
        # Calls this plugin's own deny refused (it has told after_tool_call already).
        self._denied = Pending()
        # (plugin id, tool name) of every tool an entry module registered: those run here, through CallTool
        # (set by the loader once every plugin is loaded).
        self.plugin_tools: frozenset[tuple[str, str]] = frozenset()

    def _refuse_unsupported(self) -> None:
        unsupported = [f"{impl.plugin_name}.{name}" for name in hookspec_events.NOT_SUPPORTED_YET for impl in self._impls(name)]
        if unsupported:
            raise RegistrationError(
                f"covel.register_hookimpls: {', '.join(unsupported)}: a hook of the spec that Covel does not call yet "
                f"(see docs/hookspecs.md); the hooks it calls are {', '.join(EVENTS_OF_HOOK)}"
            )

    def _state(self, ctx: HookContext) -> dict[str, Any]:
        """The hook state: the context's fields over what load_state gave this turn."""
        turn = self._turns.get(getattr(ctx, "session_id", None) or "", getattr(ctx, "turn_id", None) or "")
        return hook_state(ctx, turn[2] if turn is not None else None)

    async def turn_start(self, ctx: HookContext, payload: dict[str, Any]) -> None:
        """TurnStart: the turn's message, and load_state's state for this turn's hooks (never blocks the turn)."""
        message = turn_hooks.inbound(payload, ctx)
        loaded = await self._agent_hooks.merged_state(message, ctx.session_id) if self._impls("load_state") else {}
        self._turns.remember(ctx.session_id, (ctx.turn_id, message, loaded))
        # The turn's later events may reach another hooks replica: it reads the turn from the store (turn_share.py).
        await turn_share.share(self.plugin_id, ctx.session_id, (ctx.turn_id, message, loaded))

    def with_turn(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        """A handler of a turn's later event, run once this process knows the turn TurnStart began (another
        replica may have served TurnStart: the turn is then read from the store, once per turn)."""
        async def handle(ctx: HookContext, payload: dict[str, Any]) -> Any:
            await self._turns.known(ctx.session_id, ctx.turn_id)
            return await handler(ctx, payload)

        return handle

    async def pre_step(self, ctx: HookContext, payload: dict[str, Any]) -> dict[str, Any] | None:
        """PreStep: the steering inboxes drained into a run that takes interjections (MessagesPending); after a step
        that continued (`previous`, StepFinished), continue_prompt's answer as the next step's prompt."""
        replace: dict[str, Any] = {}
        texts = await app_hooks.drained(self._inboxes, self.plugin_id, ctx.session_id) if payload.get("steering") is True else []
        if texts:
            replace["interjections"] = [*(payload.get("interjections") or []), *texts]
        if self._impls("continue_prompt"):
            next_prompt = await turn_hooks.continue_prompt(self._agent_hooks, payload, self._state(ctx))
            if next_prompt is not None:
                replace["nextPrompt"] = next_prompt
        return {"action": "continue", "replace": replace} if replace else None

    async def message_sent(self, event: InternalEvent) -> None:
        """message:sent: save_state, render_outbound and dispatch_outbound with the story (model_output)."""
        session_id = event.session_key or str(event.context.get("to") or "")
        turn = await self._turns.known(session_id, str(event.context.get("turnId") or ""))  # the turn whose story went out
        turn_id = turn[0] if turn is not None else ""
        self._turns.forget(session_id, turn_id)
        message = turn[1] if turn is not None else {"content": "", "session_id": session_id, "channel": "grpc"}
        state = {**(turn[2] if turn is not None else {}), "session_id": session_id, "turn_id": turn_id,
                 "sent": bool(event.context.get("success")), "message_id": event.context.get("messageId"),
                 **state_fields(await self.environments.of(session_id) if session_id else None)}
        story = str(event.context.get("content") or "")
        entries = tape_mirror.turn_entries(state["turn_id"], message["content"], story, state["message_id"])
        await app_hooks.tell_sidecars(self._sidecars, self.plugin_id, session_id, [dict(entry) for entry in entries])
        delivered = await turn_hooks.after_turn(self._agent_hooks, session_id, state, message, story)
        log.info("hookspecs.outbound", plugin_id=self.plugin_id, session_id=session_id, delivered=delivered)
        # provide_tape_store: last, as a fill from the store's log may take a while.
        await self._tape_mirror.mirror(session_id, state["turn_id"], entries)

    async def admit_message(self, session_id: str, message: dict[str, Any], turn: dict[str, Any]) -> dict[str, str] | None:
        """AdmitMessage: this plugin's admit_message decision for a submit meeting a running turn (admission.py)."""
        return await admission.decide(self._agent_hooks, session_id, message, admission.snapshot(session_id, turn))

    def implemented(self) -> set[str]:
        return {name for name in HOOK_NAMES if self._impls(name)}

    def registered(self) -> list[str]:
        """The contract events this plugin's hooks register."""
        return events_for(self.implemented())

    def _impls(self, name: str) -> list[pluggy.HookImpl]:
        # pluggy calls the last of get_hookimpls() first.
        return list(reversed(getattr(self._manager.hook, name).get_hookimpls()))

    async def _call(self, name: str, impl: pluggy.HookImpl, **arguments: Any) -> Any:
        """One impl (a plain one in a plugin thread; the registration's timeout bounds the whole handler);
        what it raised is logged, reported to on_error and turned into MISSING."""
        outcome = await self._agent_hooks.call(name, impl, **arguments)
        return MISSING if outcome is RAISED else outcome

    async def _on_raised(self, name: str, error: Exception) -> None:
        if name != "on_error":
            await self._notify_error(name, error)

    def _wrong_type(self, name: str, impl: pluggy.HookImpl, outcome: Any, expected: str) -> None:
        self._agent_hooks.wrong_type(name, impl, outcome, expected)

    async def _notify_error(self, stage: str, error: Exception) -> None:
        for impl in self._impls("on_error"):
            outcome = await self._call("on_error", impl, stage=stage, error=error, message=None)
            if outcome is not None and outcome is not MISSING:
                self._wrong_type("on_error", impl, outcome, "None")

    async def _notify_all(self, name: str, **arguments: Any) -> None:
        for impl in self._impls(name):
            outcome = await self._call(name, impl, **arguments)
            if outcome is not None and outcome is not MISSING:
                self._wrong_type(name, impl, outcome, "None")

    # PreLLMCall / PostLLMResponse

    async def pre_llm_call(self, ctx: HookContext, payload: dict[str, Any]) -> dict[str, Any] | None:
        run_key = run_id_of(ctx)
        original = LLMCallRequest(
            run_id=run_key, model=str(payload.get("model") or ""), messages=list(payload.get("messages") or []),
            tool_names=tuple(payload.get("tools") or ()),
        )
        state = self._state(ctx)
        chosen = await app_hooks.model_choice(self._agent_hooks, ctx.session_id) if self._impls("provide_model_options") else None
        if chosen is not None:
            # provide_model_options: the session's model, before before_llm_call sees the request.
            original = dataclass_replace(original, model=chosen)
        request, decision = await self._agent_hooks.before_llm_call(original, state)
        if request.max_tokens != original.max_tokens:
            log.warning("hookimpl.ignored", plugin_id=self.plugin_id, hook="before_llm_call",
                        field="max_tokens", why="PreLLMCall cannot change the output limit")
        replace: dict[str, Any] = {}
        if request.messages != original.messages:
            replace["messages"] = request.messages
        if request.model != str(payload.get("model") or ""):
            replace["model"] = request.model
        if request.tool_names != original.tool_names:
            replace["tools"] = list(request.tool_names)
        # finish(text), else a run_model answer: PreLLMCall's replace.response answers the call, the model is not asked;
        # a run_model_stream kept open: replace.responseStream, which the scheduler reads (services/hooks/plugin_side/model_streams.py).
        answer = decision.text if decision is not None else await turn_hooks.run_model(self._agent_hooks, request, state)
        if isinstance(answer, StreamAnswer):
            replace["responseStream"], answer = answer.wire(), None
        elif answer is not None:
            replace["response"] = {"content": answer}
        self._llm_calls.put(execution_key(ctx), PendingLLMCall(request, time.perf_counter_ns(), digest(request.messages), answer))
        return {"action": "continue", "replace": replace} if replace else None

    async def stream_batch(self, stream_id: str, *, session_id: str, claim: bool, wait_s: float) -> dict[str, Any]:
        """StreamModelAnswer: the next batch of a run_model_stream this plugin's PreLLMCall kept open."""
        return await OPEN_STREAMS.next_batch(self.plugin_id, stream_id, session_id=session_id, claim=claim, wait_s=wait_s)

    async def close_stream(self, stream_id: str) -> None:
        OPEN_STREAMS.close(self.plugin_id, stream_id)

    async def post_llm_response(self, ctx: HookContext, payload: dict[str, Any]) -> dict[str, Any] | None:
        run_key = run_id_of(ctx)
        sent = digest(list(payload.get("messages") or []))
        key = execution_key(ctx)
        # One execution's model calls follow one another: the newest pending one is answered (older ones got no answer).
        pending: PendingLLMCall | None = self._llm_calls.take(key, lambda entry: entry.sent == sent, newest=bool(key[3]))
        if pending is None:
            pending = PendingLLMCall(LLMCallRequest(run_id=run_key, model="", messages=list(payload.get("messages") or [])), 0, sent)
        response = payload.get("response") or {}
        replace = None
        # The call was answered with finish's text (replace.response); another plugin's handler may have changed it since.
        if pending.finish is not None and (response.get("content") != pending.finish or response.get("toolCalls")):
            response = {**response, "content": pending.finish, "toolCalls": []}
            replace = {"action": "continue", "replace": {"response": response}}
        usage = response.get("usage")
        result = LLMCallResult(
            run_id=run_key, text=response.get("content"), tool_calls=list(response.get("toolCalls") or []),
            usage=dict(usage) if isinstance(usage, dict) else None, duration_ms=elapsed_ms(pending.started_ns),
        )
        await self._notify_all("after_llm_call", request=pending.request, result=result, state=self._state(ctx))
        return replace

    # PreToolUse / PostToolUse

    async def pre_tool_use(self, ctx: HookContext, payload: dict[str, Any]) -> dict[str, Any] | None:
        raw = payload.get("toolCall") or {}
        run_key = run_id_of(ctx)
        original = ToolCall(run_id=run_key, tool=str(raw.get("name") or ""), arguments=tool_arguments(raw.get("arguments")),
                            call_id=str(raw.get("id") or ""), context=ctx)
        state = self._state(ctx)
        call, chosen = await self._agent_hooks.before_tool_call(original, state)
        decision = chosen if chosen.action != "proceed" else None
        key = (execution_key(ctx), original.call_id)
        if decision is not None and decision.action == "deny":
            message = decision.message or f"denied by a before_tool_call hook of plugin {self.plugin_id}"
            self._denied.put(key, call.tool)
            await self._notify_all("after_tool_call", call=call, state=state, result=ToolCallResult(
                run_id=run_key, tool=call.tool, arguments=call.arguments, error=ToolCallFailed("refused", message)))
            return {"action": "abort", "reason": message}
        pending = PendingToolCall(call, time.perf_counter_ns())
        self._tool_calls.put(key, pending)
        changed = {"arguments": call.arguments} if call.arguments != original.arguments else {}
        if decision is not None:
            pending.replacement = decision.result
            if (ctx.plugin_id, call.tool) not in self.plugin_tools:
                # Not a plugin tool run by CallTool here: PreToolUse's replace.result answers it (nothing runs, a success).
                pending.answered = True
                replace: dict[str, Any] = {"result": json.loads(json.dumps(decision.result, ensure_ascii=False, default=str))}
                return {"action": "continue", "replace": {**replace, "toolCall": changed} if changed else replace}
        return {"action": "continue", "replace": {"toolCall": changed}} if changed else None

    def take_replacement(self, context: CallContext, call_id: str, name: str, arguments: str) -> Any:
        """CallTool: the result a replace decision gave this call (and it is answered), or MISSING.
        `context`: the CallTool request's HookContext (turn, runtime and execution of the call)."""
        key = (execution_key(context), call_id)
        wanted = tool_arguments(arguments)

        def replaced(entry: PendingToolCall) -> bool:
            return entry.replacement is not MISSING and not entry.answered

        pending: PendingToolCall | None = self._tool_calls.find(
            key, lambda entry: replaced(entry) and entry.call.tool == name and entry.call.arguments == wanted
        ) or self._tool_calls.find(key, replaced)
        if pending is None:
            return MISSING
        pending.answered = True
        return pending.replacement

    async def post_tool_use(self, ctx: HookContext, payload: dict[str, Any]) -> dict[str, Any] | None:
        raw = payload.get("toolCall") or {}
        run_key = run_id_of(ctx)
        key = (execution_key(ctx), str(raw.get("id") or ""))
        name = str(raw.get("name") or "").removeprefix(REPLACED_PREFIX)
        arguments = tool_arguments(raw.get("arguments"))
        pending: PendingToolCall | None = self._tool_calls.take(
            key, lambda entry: entry.call.tool == name and entry.call.arguments == arguments)
        if pending is None:
            pending = PendingToolCall(ToolCall(run_id=run_key, tool=name, arguments=arguments, call_id=key[1], context=ctx), 0)
        call, duration_ms = pending.call, elapsed_ms(pending.started_ns)
        if pending.replacement is not MISSING:
            result = ToolCallResult(run_id=run_key, tool=call.tool, arguments=call.arguments, result=pending.replacement,
                                    duration_ms=duration_ms)
            await self._notify_all("after_tool_call", call=call, result=result, state=self._state(ctx))
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
        await self._notify_all("after_tool_call", call=call, result=result, state=self._state(ctx))
        return None

    async def tool_refused(self, ctx: HookContext, payload: dict[str, Any], reason: str) -> None:
        """A PreToolUse dispatch ended in abort (another plugin refused, or a guard failed closed):
        after_tool_call hears of it, unless this plugin's own deny already told it."""
        raw = payload.get("toolCall") or {}
        run_key = run_id_of(ctx)
        key = (execution_key(ctx), str(raw.get("id") or ""))
        name = str(raw.get("name") or "").removeprefix(REPLACED_PREFIX)
        if self._denied.take(key, lambda tool: tool == name) is not None:
            return
        pending: PendingToolCall | None = self._tool_calls.take(key, lambda entry: entry.call.tool == name)
        if not self._impls("after_tool_call"):
            return
        call = pending.call if pending is not None else ToolCall(
            run_id=run_key, tool=name, arguments=tool_arguments(raw.get("arguments")), call_id=key[1], context=ctx)
        await self._notify_all("after_tool_call", call=call, state=self._state(ctx), result=ToolCallResult(
            run_id=run_key, tool=call.tool, arguments=call.arguments, error=ToolCallFailed("refused", reason),
            duration_ms=elapsed_ms(pending.started_ns if pending is not None else None)))

    # PostContextAssembly / PostRuntime

    async def post_context_assembly(self, ctx: HookContext, payload: dict[str, Any]) -> dict[str, Any] | None:
        messages = payload.get("messages") or []
        prompt = next((m.get("content") for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), "")
        state = self._state(ctx)
        parts = []
        for impl in self._impls("system_prompt"):
            outcome = await self._call("system_prompt", impl, prompt=prompt or "", state=state)
            if outcome is None or outcome is MISSING:
                continue
            if not isinstance(outcome, str):
                self._wrong_type("system_prompt", impl, outcome, "str")
                continue
            if outcome.strip():
                parts.append(outcome.strip())
        replace: dict[str, Any] = {}
        if parts:
            replace["systemPrompt"] = "\n\n".join([str(payload.get("systemPrompt") or ""), *parts]).strip()
        viewed = await app_hooks.tape_context(self._agent_hooks, ctx.session_id, list(messages)) if self._impls("build_tape_context") else None
        built = await turn_hooks.build_prompt(self._agent_hooks, viewed if viewed is not None else list(messages), state)
        if built is not None or viewed is not None:
            replace["messages"] = built if built is not None else viewed
        return {"action": "continue", "replace": replace} if replace else None

    async def post_runtime(self, ctx: HookContext, payload: dict[str, Any]) -> None:
        result = payload.get("result") or {}
        reason = str(result.get("reason") or "")
        # Model calls of this execution that never reached PostLLMResponse: failed (or a cut-off answer asked again);
        # and those of the subagent and nested runs it started, which have no PostRuntime of their own.
        key = execution_key(ctx)
        if key[3]:
            unanswered = self._llm_calls.take_where(lambda other: other[0] == key[0] and other[1] == key[1])
        else:
            unanswered = [(key, self._llm_calls.take_all(key))]
        if any(entries for _, entries in unanswered) and self._impls("after_llm_call"):
            state = self._state(ctx)
            for other, entries in sorted(unanswered, key=lambda found: found[0] != key):
                for pending in entries:
                    error = LLMCallFailed(
                        (reason or "the model's answer never reached PostLLMResponse (a cut-off answer was asked again)")
                        if other == key else
                        f"the model call of {other[2]} (execution {other[3]}, run by {ctx.runtime_id}) got no answer: "
                        "that run ended before PostLLMResponse (its model call failed, or a cut-off answer was asked again)")
                    await self._notify_all("after_llm_call", request=pending.request, state=state, result=LLMCallResult(
                        run_id=pending.request.run_id, error=error, duration_ms=elapsed_ms(pending.started_ns)))
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
        "TurnStart": adapter.turn_start,
        "PreStep": adapter.pre_step,
    }
    wants_turn = "TurnStart" in adapter.registered()
    for event in events_for(adapter.implemented()):
        handler = handlers[event]
        registrar.on(event, adapter.with_turn(handler) if wants_turn and event != "TurnStart" else handler)
    for key in dict.fromkeys(key for name in adapter.implemented() for key in KEYS_OF_HOOK.get(name, ())):
        registrar.on_event(key, adapter.message_sent)
    for tool in adapter.tools():
        registrar.register_tool(tool.name, tool.handler, description=tool.description, parameters=tool.parameters,
                                read_only=tool.read_only)
    return adapter
