"""Python hookspecs: @hookimpl objects loaded from a real entry module, run by the real
dispatcher on the contract events they map onto; every decision, the error rule and pluggy order."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from services.hooks.common.hookspec_events import EVENTS_OF_HOOK, NOT_SUPPORTED_YET, events_for
from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.in_process import load_entries
from services.hooks.loaded_hookspecs import take_replacement, tell_tool_refused
from services.hooks.plugin_entries import PluginEntry
from shared.hook_events import EVENTS_BY_NAME
from shared.plugin_sdk import hookspecs as sdk
from shared.plugin_sdk.hookspecs import HOOK_NAMES

pytestmark = pytest.mark.asyncio(loop_scope="session")

ALL_EVENTS = ("PreLLMCall", "PostLLMResponse", "PreToolUse", "PostToolUse", "PostContextAssembly", "PostRuntime")

POLICY = '''
import dataclasses
import json

from shared.plugin_sdk.hookspecs import LLMCallDecision, LLMCallRequest, Tool, ToolCallDecision, hookimpl

SEEN = []
RESULTS = []
TOOL_RESULTS = []


class First:
    """Registered first: pluggy runs it last (LIFO), unless tryfirst moves it."""

    @hookimpl
    def before_tool_call(self, call, state):
        SEEN.append(("first", call.tool, dict(call.arguments)))
        if call.tool == "chained":
            return ToolCallDecision.deny("first saw " + json.dumps(call.arguments, sort_keys=True))

    @hookimpl(tryfirst=True)
    def system_prompt(self, prompt, state):
        return "Rule one (tryfirst)."

    @hookimpl
    def after_tool_call(self, call, result, state):
        SEEN.append(("after_tool", call.tool, result.result, type(result.error).__name__ if result.error else None))
        TOOL_RESULTS.append((call, result))

    @hookimpl
    def after_llm_call(self, request, result, state):
        SEEN.append(("after_llm", request.model, result.text, result.run_id))
        RESULTS.append(result)

    @hookimpl
    def on_error(self, stage, error, message):
        SEEN.append(("on_error", stage, str(error)))

    @hookimpl
    def provide_tools(self):
        return [Tool("roll", lambda ctx, args: {"rolled": 4}, description="Roll a die.", read_only=True)]


class Second:
    @hookimpl
    def before_tool_call(self, call, state):
        SEEN.append(("second", call.tool, dict(call.arguments)))
        if call.tool == "forbidden":
            return ToolCallDecision.deny("not at this table")
        if call.tool == "cached":
            return ToolCallDecision.replace({"from": "cache", "q": call.arguments.get("q")})
        if call.tool == "clamped":
            return ToolCallDecision.proceed({"sides": min(call.arguments["sides"], 20)})
        if call.tool == "chained":
            return ToolCallDecision.proceed({**call.arguments, "second": True})
        if call.tool == "explodes":
            raise RuntimeError("policy bug")
        if call.tool == "garbage":
            return "deny it please"

    @hookimpl(trylast=True)
    def system_prompt(self, prompt, state):
        return f"Rule two (trylast), for {prompt!r}."

    @hookimpl
    def before_llm_call(self, request, state):
        last = request.messages[-1]["content"]
        if last == "finish":
            return LLMCallDecision.finish("Finished by a hook.")
        if last == "rewrite":
            return LLMCallRequest(run_id=request.run_id, model="fast", messages=[*request.messages[:-1],
                                  {"role": "user", "content": "rewritten"}], tool_names=("roll",))
        if last == "max-tokens":
            return dataclasses.replace(request, max_tokens=5)
        if last == "wrong":
            return 42
        if last == "raise":
            raise ValueError("llm hook bug")


class Third:
    """Registered last: runs first among plain impls."""

    @hookimpl
    def system_prompt(self, prompt, state):
        return 7


def register(covel):
    covel.register_hookimpls(First())
    covel.register_hookimpls(Second())
    covel.register_hookimpls(Third())
'''


def write_plugin(root: Path, plugin_id: str, code: str) -> Path:
    package = root / plugin_id
    (package / "server").mkdir(parents=True)
    (package / "server" / "index.py").write_text(code)
    return package


def load(tmp_path: Path, plugin_id: str, code: str, hooks=ALL_EVENTS, tools=("roll",)):
    package = write_plugin(tmp_path, plugin_id, code)
    entry = PluginEntry(plugin_id, package, "server/index.py", tuple((event, "normal") for event in hooks), "builtin",
                        declared_tools=tuple(tools))
    return load_entries([entry], generation=1)


@pytest.fixture
def policy(tmp_path: Path):
    result = load(tmp_path, "policy", POLICY)
    assert result.errors == {}
    [loaded] = result.loaded
    module = __import__("sys").modules["covel_plugin_policy_g1.server.index"]
    module.SEEN.clear()
    module.RESULTS.clear()
    module.TOOL_RESULTS.clear()
    table = HandlerTable(loaded.registrar.hooks, {"policy": "builtin"})
    return table, module.SEEN, loaded


EXECUTION = ExecutionContext(session_id="s", turn_id="t1", locale="en", active_plugin_ids=("policy",),
                             plugin_id="policy", runtime_id="policy/agent")


async def pre_tool(table, name: str, arguments: dict, call_id: str = "c1"):
    return await dispatch(table, "PreToolUse", EXECUTION, {"toolCall": {"id": call_id, "name": name, "arguments": json.dumps(arguments)}})


async def post_tool(table, call: dict, result: dict):
    return await dispatch(table, "PostToolUse", EXECUTION, {"toolCall": call, "result": {"result": json.dumps(result), "success": result["ok"]}})


async def test_hooks_map_onto_their_events_and_tools_register(policy) -> None:
    table, _, loaded = policy
    assert {hook.event for hook in loaded.registrar.hooks} == set(ALL_EVENTS)
    assert [tool.name for tool in loaded.registrar.tools] == ["roll"] and loaded.registrar.tools[0].read_only
    # Every agent hook and app hook the kernel calls (the turn hooks: tests/hooks/test_turn_hooks.py).
    assert loaded.hookspecs.implemented() == {"before_llm_call", "after_llm_call", "before_tool_call", "after_tool_call",
                                              "system_prompt", "on_error", "provide_tools"} < set(EVENTS_OF_HOOK)
    assert events_for({"before_tool_call"}) == ["PreToolUse", "PostToolUse"]


async def test_deny_refuses_the_call_with_the_message_and_after_tool_call_sees_it(policy) -> None:
    table, seen, _ = policy
    result = await pre_tool(table, "forbidden", {})
    assert result.aborted and result.reason == "not at this table"
    assert ("after_tool", "forbidden", None, "ToolCallFailed") in seen


async def test_proceed_with_arguments_rewrites_them_and_the_chain_goes_on(policy) -> None:
    table, seen, _ = policy
    result = await pre_tool(table, "clamped", {"sides": 1000})
    assert not result.aborted
    assert json.loads(json.dumps(result.payload["toolCall"]["arguments"])) == {"sides": 20}
    # pluggy order: Second (registered later) first, then First sees Second's arguments.
    chained = await pre_tool(table, "chained", {"a": 1}, call_id="c2")
    assert chained.aborted and chained.reason == 'first saw {"a": 1, "second": true}'
    assert [entry[0] for entry in seen if entry[1] == "chained"] == ["second", "first", "after_tool"]


async def test_replace_answers_for_the_tool_without_running_it(policy) -> None:
    """A kernel tool (not one an entry module registered): PreToolUse's replace.result answers it; the scheduler
    does not run it and counts a successful call."""
    table, seen, _ = policy
    pre = await pre_tool(table, "cached", {"q": "moon"}, call_id="c3")
    assert not pre.aborted and pre.payload["result"] == {"from": "cache", "q": "moon"}
    assert pre.payload["toolCall"]["name"] == "cached", "the call keeps its name"
    # The scheduler's PostToolUse carries that result, unchanged; after_tool_call hears of it as a success.
    ok = {"ok": True, "data": {"from": "cache", "q": "moon"}}
    post = await post_tool(table, {"id": "c3", "name": "cached", "arguments": json.dumps({"q": "moon"})}, ok)
    assert post.payload["result"] == {"result": json.dumps(ok), "success": True}
    assert [entry for entry in seen if entry[0] == "after_tool" and entry[1] == "cached"] == [
        ("after_tool", "cached", {"from": "cache", "q": "moon"}, None)], "heard once"


async def test_after_tool_call_gets_results_and_failures(policy) -> None:
    table, seen, _ = policy
    await pre_tool(table, "roll", {}, call_id="c4")
    await post_tool(table, {"id": "c4", "name": "roll", "arguments": "{}"}, {"ok": True, "data": {"rolled": 4}})
    await pre_tool(table, "roll", {}, call_id="c5")
    await post_tool(table, {"id": "c5", "name": "roll", "arguments": "{}"}, {"ok": False, "error": {"code": "not-found", "message": "x"}})
    assert ("after_tool", "roll", {"rolled": 4}, None) in seen and ("after_tool", "roll", None, "ToolCallFailed") in seen


async def test_a_raising_impl_is_logged_skipped_and_reported_to_on_error(policy) -> None:
    table, seen, _ = policy
    result = await pre_tool(table, "explodes", {}, call_id="c6")
    assert not result.aborted, "an exception never blocks: a policy must return deny"
    assert ("first", "explodes", {}) in seen, "the next impl still ran"
    assert ("on_error", "before_tool_call", "policy bug") in seen
    assert [entry.status for entry in result.trace] == ["ok"]


async def test_a_wrong_return_type_is_logged_and_skipped(policy) -> None:
    table, seen, _ = policy
    result = await pre_tool(table, "garbage", {}, call_id="c7")
    assert not result.aborted and "toolCall" in result.payload and result.payload["toolCall"]["name"] == "garbage"
    assert ("first", "garbage", {}) in seen


def llm_payload(last: str) -> dict:
    return {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": last}], "model": "story",
            "tools": ["roll"], "stream": True}


async def test_before_llm_call_returns_a_changed_request(policy) -> None:
    table, seen, _ = policy
    result = await dispatch(table, "PreLLMCall", EXECUTION, llm_payload("rewrite"))
    assert result.payload["model"] == "fast" and result.payload["messages"][-1]["content"] == "rewritten"
    assert result.payload["tools"] == ["roll"] and result.payload["stream"] is True
    answer = {"content": "model text", "finishReason": "stop", "toolCalls": []}
    post = await dispatch(table, "PostLLMResponse", EXECUTION, {"response": answer, "messages": result.payload["messages"]})
    assert post.payload["response"] == answer, "no finish decision: the answer stays the model's"
    assert ("after_llm", "fast", "model text", "t1:policy/agent") in seen


async def test_finish_decision_answers_the_call_through_replace_response(policy) -> None:
    """finish(text) is PreLLMCall's replace.response: the scheduler makes no model call (tests/scheduler)."""
    table, seen, _ = policy
    pre = await dispatch(table, "PreLLMCall", EXECUTION, llm_payload("finish"))
    assert pre.payload["response"] == {"content": "Finished by a hook."}
    assert pre.payload["tools"] == ["roll"] and pre.payload["stream"] is True, "nothing else of the call is changed"
    # The scheduler's reply to the answered call: PostLLMResponse as for any reply; after_llm_call hears the text.
    answer = {"content": "Finished by a hook.", "finishReason": "stop", "toolCalls": []}
    post = await dispatch(table, "PostLLMResponse", EXECUTION, {"response": answer, "messages": pre.payload["messages"]})
    assert post.payload["response"] == answer and post.trace[0].status == "ok"
    assert ("after_llm", "story", "Finished by a hook.", "t1:policy/agent") in seen
    # Another plugin changed the answer since: finish's text is put back.
    pre = await dispatch(table, "PreLLMCall", EXECUTION, llm_payload("finish"))
    changed = {"content": "someone else's", "finishReason": "stop", "toolCalls": [{"id": "x", "name": "roll", "arguments": "{}"}]}
    post = await dispatch(table, "PostLLMResponse", EXECUTION, {"response": changed, "messages": pre.payload["messages"]})
    assert post.payload["response"]["content"] == "Finished by a hook." and post.payload["response"]["toolCalls"] == []


async def test_llm_hooks_that_raise_return_garbage_or_change_max_tokens_change_nothing(policy) -> None:
    table, seen, _ = policy
    for last in ("wrong", "raise", "max-tokens"):
        result = await dispatch(table, "PreLLMCall", EXECUTION, llm_payload(last))
        assert result.payload == llm_payload(last) and not result.aborted
    assert ("on_error", "before_llm_call", "llm hook bug") in seen


async def test_system_prompt_parts_join_in_pluggy_order_and_wrong_types_are_skipped(policy) -> None:
    table, _, _ = policy
    payload = {"systemPrompt": "Preamble.", "messages": [{"role": "user", "content": "I wave."}]}
    result = await dispatch(table, "PostContextAssembly", EXECUTION, payload)
    assert result.payload["systemPrompt"] == "Preamble.\n\nRule one (tryfirst).\n\nRule two (trylast), for 'I wave.'."


async def test_on_error_hears_of_failed_runtimes_only(policy) -> None:
    table, seen, _ = policy
    await dispatch(table, "PostRuntime", EXECUTION, {"result": {"status": "success", "reason": ""}})
    await dispatch(table, "PostRuntime", EXECUTION, {"result": {"status": "failed", "reason": "model call failed: boom"}})
    assert [entry for entry in seen if entry[0] == "on_error"] == [("on_error", "runtime", "model call failed: boom")]


async def test_loading_fails_clearly_for_undeclared_events_unknown_hooks_and_bad_arguments(tmp_path: Path) -> None:
    undeclared = load(tmp_path, "undeclared", POLICY, hooks=("PreToolUse",))
    assert "PostToolUse" in undeclared.errors["undeclared"] and "missing from contributes.hooks" in undeclared.errors["undeclared"]
    unknown = load(tmp_path, "unknown", "from shared.plugin_sdk.hookspecs import hookimpl\n"
                   "class P:\n    @hookimpl\n    def render_outbund(self, message):\n        pass\n"
                   "def register(covel):\n    covel.register_hookimpls(P())\n", hooks=(), tools=())
    assert "render_outbund" in unknown.errors["unknown"] and "before_llm_call" in unknown.errors["unknown"]
    bad_args = load(tmp_path, "bad-args", "from shared.plugin_sdk.hookspecs import hookimpl\n"
                    "class P:\n    @hookimpl\n    def before_tool_call(self, tool_call, state):\n        pass\n"
                    "def register(covel):\n    covel.register_hookimpls(P())\n", hooks=("PreToolUse", "PostToolUse"), tools=())
    assert "tool_call" in bad_args.errors["bad-args"]
    assert set(ALL_EVENTS) <= set(EVENTS_BY_NAME)


async def test_provide_tools_with_a_wrong_type_is_skipped(tmp_path: Path, caplog) -> None:
    code = ("from shared.plugin_sdk.hookspecs import hookimpl\n"
            "class P:\n    @hookimpl\n    def provide_tools(self):\n        return ['roll']\n"
            "def register(covel):\n    covel.register_hookimpls(P())\n")
    with caplog.at_level(logging.WARNING):
        result = load(tmp_path, "no-tools", code, hooks=(), tools=())
    assert result.errors == {} and result.loaded[0].registrar.tools == []


async def test_pluggy_wrappers_are_refused_at_load_with_a_diagnostic(tmp_path: Path) -> None:
    for flag in ("wrapper=True", "hookwrapper=True"):
        code = ("from shared.plugin_sdk.hookspecs import hookimpl\n"
                f"class Timing:\n    @hookimpl({flag})\n    def before_tool_call(self, call, state):\n        yield\n"
                "def register(covel):\n    covel.register_hookimpls(Timing())\n")
        plugin_id = "wrap-" + flag.split("=")[0]
        result = load(tmp_path, plugin_id, code, hooks=("PreToolUse", "PostToolUse"), tools=())
        message = result.errors[plugin_id]
        assert "Timing.before_tool_call is a pluggy wrapper" in message and "not supported" in message, message


SPEC_HOOKS = (
    "resolve_session", "load_state", "build_prompt", "run_model", "run_model_stream", "continue_prompt", "save_state",
    "render_outbound", "dispatch_outbound", "register_cli_commands", "onboard_config", "provide_model_options",
    "provide_environment", "on_error", "system_prompt", "provide_tape_store", "provide_lifespan", "provide_tape_sidecar",
    "provide_channels", "build_tape_context", "admit_message", "provide_steering_inbox", "provide_tools",
    "before_llm_call", "after_llm_call", "before_tool_call", "after_tool_call",
)


async def test_the_sdk_declares_every_hook_of_the_spec_and_its_types() -> None:
    assert HOOK_NAMES == SPEC_HOOKS
    assert set(NOT_SUPPORTED_YET) | set(EVENTS_OF_HOOK) == set(HOOK_NAMES)
    for name in ("Envelope", "TurnState", "UserContent", "LegacyPrompt", "AsyncStreamEvents", "Tape", "StreamState",
                 "ModelOptions", "Environment", "TapeStore", "AsyncTapeStore", "TapeSidecar", "TapeContext",
                 "MessageHandler", "Channel", "TurnSnapshot", "AdmitDecision", "SteeringInbox"):
        assert hasattr(sdk, name) and name in sdk.__all__, name
    assert sdk.AdmitDecision.refuse("busy") == sdk.AdmitDecision("refuse", "busy")


def spec_impl(name: str) -> str:
    """A hookimpl of `name` written with the spec's own argument names."""
    import inspect

    params = ", ".join(["self", *list(inspect.signature(getattr(sdk.CovelHookSpecs, name)).parameters)[1:]])
    return (f"from shared.plugin_sdk.hookspecs import hookimpl\n"
            f"class Later:\n    @hookimpl\n    def {name}({params}):\n        return None\n"
            "def register(covel):\n    covel.register_hookimpls(Later())\n")


@pytest.mark.parametrize("name", HOOK_NAMES)
async def test_every_hook_of_the_spec_loads_written_with_its_own_signature(tmp_path: Path, name: str) -> None:
    """No hook of the spec is refused: an impl with the spec's argument names loads and registers its events."""
    assert NOT_SUPPORTED_YET == ()
    plugin_id = "spec-" + name.replace("_", "-")
    result = load(tmp_path, plugin_id, spec_impl(name), hooks=events_for({name}), tools=())
    assert not result.errors, result.errors
    assert result.loaded[0].hookspecs.implemented() == {name}
    assert {hook.event for hook in result.loaded[0].registrar.hooks} == set(events_for({name}))


async def test_a_hook_the_kernel_would_not_call_is_refused_at_load_naming_it(tmp_path: Path, monkeypatch) -> None:
    """A hook a later spec adds, before the kernel calls it: never accepted and silently not called."""
    from services.hooks.common import hookspec_events

    monkeypatch.setattr(hookspec_events, "NOT_SUPPORTED_YET", ("provide_lifespan",))
    result = load(tmp_path, "later-lifespan", spec_impl("provide_lifespan"), hooks=(), tools=())
    message = result.errors["later-lifespan"]
    assert "Later.provide_lifespan: a hook of the spec that Covel does not call yet" in message, message
    assert "docs/hookspecs.md" in message and "unknown" not in message


@pytest.mark.parametrize("name", ["onboard_config", "provide_tape_store"])
async def test_onboard_config_and_provide_tape_store_load_with_their_events(tmp_path: Path, name: str) -> None:
    """No hook is refused by design any more: a tape store is a mirror (services/hooks/plugin_side/tape_mirror.py), onboard_config
    is `covel onboard`'s (covel_cli/onboard.py)."""
    plugin_id = "loads-" + name.replace("_", "-")
    result = load(tmp_path, plugin_id, spec_impl(name), hooks=EVENTS_OF_HOOK[name], tools=())
    assert not result.errors, result.errors
    assert result.loaded[0].hookspecs.implemented() == {name}


@pytest.mark.parametrize("name", ["provide_lifespan", "provide_environment"])
async def test_provide_lifespan_and_provide_environment_load_and_register_no_event(tmp_path: Path, name: str) -> None:
    """Run by the process that runs the plugin's code (services/hooks/plugin_side/lifespans.py, environments.py), on no event."""
    plugin_id = "loads-" + name.replace("_", "-")
    result = load(tmp_path, plugin_id, spec_impl(name), hooks=(), tools=())
    assert not result.errors, result.errors
    assert result.loaded[0].hookspecs.implemented() == {name} and result.loaded[0].registrar.hooks == []


async def test_a_hook_outside_the_spec_still_fails_as_unknown(tmp_path: Path) -> None:
    code = spec_impl("resolve_session").replace("def resolve_session", "def resolve_sesion")
    result = load(tmp_path, "typo", code, hooks=(), tools=())
    assert "resolve_sesion" in result.errors["typo"] and "unknown hook" in result.errors["typo"], result.errors


async def test_after_llm_call_gets_usage_and_hears_of_a_failed_call_at_post_runtime(policy) -> None:
    table, seen, _ = policy
    pre = await dispatch(table, "PreLLMCall", EXECUTION, llm_payload("hello"))
    usage = {"promptTokens": 12, "completionTokens": 3, "totalTokens": 15}
    await dispatch(table, "PostLLMResponse", EXECUTION, {"response": {"content": "hi", "toolCalls": [], "usage": usage},
                                                         "messages": pre.payload["messages"]})
    module = __import__("sys").modules["covel_plugin_policy_g1.server.index"]
    # A second call whose model call failed: no PostLLMResponse, the runtime fails.
    await dispatch(table, "PreLLMCall", EXECUTION, llm_payload("again"))
    assert ("after_llm", "story", "hi", "t1:policy/agent") in seen
    assert not [entry for entry in seen if entry[0] == "after_llm" and entry[2] is None]
    await dispatch(table, "PostRuntime", EXECUTION, {"result": {"status": "failed", "reason": "model call failed: 503"}})
    failed = [entry for entry in seen if entry[0] == "after_llm" and entry[2] is None]
    assert failed == [("after_llm", "story", None, "t1:policy/agent")]
    assert module.RESULTS[0].usage == usage and module.RESULTS[0].error is None
    assert type(module.RESULTS[1].error).__name__ == "LLMCallFailed" and str(module.RESULTS[1].error) == "model call failed: 503"
    assert ("on_error", "runtime", "model call failed: 503") in seen
    # Reported once: a later PostRuntime has nothing pending.
    await dispatch(table, "PostRuntime", EXECUTION, {"result": {"status": "success"}})
    assert len(module.RESULTS) == 2


GUARD = '''
def register(covel):
    covel.on("PreToolUse", lambda ctx, payload: {"action": "abort", "reason": "the guard says no"}
             if payload["toolCall"]["name"] == "roll" else None)
'''


async def test_after_tool_call_hears_of_a_call_another_plugin_refused(tmp_path: Path) -> None:
    policy_pkg, guard_pkg = write_plugin(tmp_path, "policy2", POLICY), write_plugin(tmp_path, "refuser", GUARD)
    result = load_entries([
        PluginEntry("policy2", policy_pkg, "server/index.py", tuple((e, "normal") for e in ALL_EVENTS), "builtin",
                    declared_tools=("roll",)),
        PluginEntry("refuser", guard_pkg, "server/index.py", (("PreToolUse", "normal"),), "builtin"),
    ], generation=1)
    assert result.errors == {}
    seen = __import__("sys").modules["covel_plugin_policy2_g1.server.index"].SEEN
    table = HandlerTable([h for plugin in result.loaded for h in plugin.registrar.hooks], {"policy2": "builtin", "refuser": "builtin"})
    execution = ExecutionContext(session_id="s", turn_id="t9", locale="en", active_plugin_ids=("policy2", "refuser"),
                                 plugin_id="policy2", runtime_id="policy2/agent")
    refused = await dispatch(table, "PreToolUse", execution, {"toolCall": {"id": "c1", "name": "roll", "arguments": "{\"n\": 1}"}})
    assert refused.aborted and refused.reason == "the guard says no"
    await tell_tool_refused(result.loaded, table, execution, refused.payload, refused.reason)
    assert ("after_tool", "roll", None, "ToolCallFailed") in seen
    # The policy's own deny is told once, not twice.
    denied = await dispatch(table, "PreToolUse", execution, {"toolCall": {"id": "c2", "name": "forbidden", "arguments": "{}"}})
    await tell_tool_refused(result.loaded, table, execution, denied.payload, denied.reason)
    assert [entry for entry in seen if entry[:2] == ("after_tool", "forbidden")] == [("after_tool", "forbidden", None, "ToolCallFailed")]


async def test_replace_of_a_plugin_tool_is_answered_by_call_tool_as_a_successful_call(policy) -> None:
    table, seen, loaded = policy
    loaded.hookspecs.plugin_tools = frozenset({("policy", "cached")})
    pre = await pre_tool(table, "cached", {"q": "sun"}, call_id="r1")
    assert not pre.aborted and pre.payload["toolCall"]["name"] == "cached", "not renamed: CallTool answers for it"
    context = type("Ctx", (), {"turn_id": "t1", "runtime_id": "policy/agent"})()
    assert take_replacement([loaded], context, "r1", "cached", json.dumps({"q": "sun"})) == ({"from": "cache", "q": "sun"},)
    assert take_replacement([loaded], context, "r1", "cached", json.dumps({"q": "sun"})) is None, "answered once"
    ok = {"ok": True, "data": {"from": "cache", "q": "sun"}}
    post = await post_tool(table, {"id": "r1", "name": "cached", "arguments": json.dumps({"q": "sun"})}, ok)
    assert post.payload["result"] == {"result": json.dumps(ok), "success": True}, "the result stays the (successful) one"
    assert ("after_tool", "cached", {"from": "cache", "q": "sun"}, None) in seen


async def test_concurrent_executions_of_one_runtime_keep_their_own_calls(policy) -> None:
    """Two subagent runs of one runtime in one turn share turn:runtime; each Post… finds its own Pre…."""
    table, seen, _ = policy
    finishing = await dispatch(table, "PreLLMCall", EXECUTION, llm_payload("finish"))
    plain = await dispatch(table, "PreLLMCall", EXECUTION, llm_payload("brief two"))
    answer = {"content": "model text", "finishReason": "stop", "toolCalls": []}
    second = await dispatch(table, "PostLLMResponse", EXECUTION, {"response": answer, "messages": plain.payload["messages"]})
    first = await dispatch(table, "PostLLMResponse", EXECUTION, {"response": answer, "messages": finishing.payload["messages"]})
    assert second.payload["response"]["content"] == "model text"
    assert first.payload["response"]["content"] == "Finished by a hook."
    # The same model call id in both runs: told apart by the call.
    await pre_tool(table, "roll", {"run": 1}, call_id="call-1")
    await pre_tool(table, "roll", {"run": 2}, call_id="call-1")
    await post_tool(table, {"id": "call-1", "name": "roll", "arguments": json.dumps({"run": 2})}, {"ok": True, "data": 2})
    await post_tool(table, {"id": "call-1", "name": "roll", "arguments": json.dumps({"run": 1})}, {"ok": True, "data": 1})
    module = __import__("sys").modules["covel_plugin_policy_g1.server.index"]
    assert [(call.arguments, result.result) for call, result in module.TOOL_RESULTS[-2:]] == [({"run": 2}, 2), ({"run": 1}, 1)]


async def test_tool_call_takes_the_specs_positional_form() -> None:
    """ToolCall(run_id, tool, arguments, context): the spec's order; call_id, this kernel's addition, comes after
    (divergence 9 of issue 40)."""
    from shared.plugin_sdk.hookspecs import ToolCall

    context = object()
    call = ToolCall("run-1", "lookup", {"q": "x"}, context)
    assert call.context is context and call.call_id == ""
    assert ToolCall("run-1", "lookup", {}, None, "call_1").call_id == "call_1"
