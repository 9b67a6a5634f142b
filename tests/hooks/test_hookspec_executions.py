"""Python hookspecs keyed by execution: the hook context's execution_id tells apart concurrent runs
of one runtime (subagents of one provider), even when another plugin rewrites what the Post… events
carry; a subagent's model call that got no answer reaches after_llm_call at its root's PostRuntime."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from tests.hooks.test_hookspecs import ALL_EVENTS, POLICY, llm_payload, write_plugin

pytestmark = pytest.mark.asyncio(loop_scope="session")

# Another plugin, in the post group (after the hookspec plugin): it rewrites every call's messages and
# arguments, so what PostLLMResponse / PostToolUse carry matches no request the hookspec plugin saw.
REWRITER = '''
CONTEXTS = []


def register(covel):
    def seen(ctx):
        CONTEXTS.append((ctx.event, ctx.runtime_id, ctx.execution_id, ctx.root_execution_id, ctx.subagent_call_id,
                         ctx.parent_runtime_id))

    def messages(ctx, payload):
        seen(ctx)
        return {"action": "continue", "replace": {"messages": [*payload["messages"], {"role": "user", "content": "(house rule)"}]}}

    def arguments(ctx, payload):
        seen(ctx)
        call = payload["toolCall"]
        return {"action": "continue", "replace": {"toolCall": {"arguments": call["arguments"][:-1] + ', "house": true}'}}}

    covel.on("PreLLMCall", messages, enforce="post")
    covel.on("PreToolUse", arguments, enforce="post")
'''

SESSION = dict(session_id="s", turn_id="t1", locale="en", active_plugin_ids=("execpolicy", "rewriter"))
ROOT = ExecutionContext(**SESSION, plugin_id="execpolicy", runtime_id="execpolicy/agent", execution_id="run-1",
                        root_execution_id="run-1")


def subagent(call_id: str, root: str = "run-1") -> ExecutionContext:
    """A subagent run of execpolicy/helper delegated by execpolicy/agent (its call id is its execution id)."""
    return ExecutionContext(**SESSION, plugin_id="execpolicy", runtime_id="execpolicy/helper", execution_id=call_id,
                            root_execution_id=root, subagent_call_id=call_id, parent_runtime_id="execpolicy/agent")


@pytest.fixture
def loaded(tmp_path: Path):
    policy, rewriter = write_plugin(tmp_path, "execpolicy", POLICY), write_plugin(tmp_path, "rewriter", REWRITER)
    result = load_entries([
        PluginEntry("execpolicy", policy, "server/index.py", tuple((e, "normal") for e in ALL_EVENTS), "builtin",
                    declared_tools=("roll",)),
        PluginEntry("rewriter", rewriter, "server/index.py", (("PreLLMCall", "post"), ("PreToolUse", "post")), "builtin"),
    ], generation=1)
    assert result.errors == {}
    module = sys.modules["covel_plugin_execpolicy_g1.server.index"]
    for seen in (module.SEEN, module.RESULTS, module.TOOL_RESULTS):
        seen.clear()
    sys.modules["covel_plugin_rewriter_g1.server.index"].CONTEXTS.clear()
    table = HandlerTable([h for plugin in result.loaded for h in plugin.registrar.hooks],
                         {"execpolicy": "builtin", "rewriter": "builtin"})
    return table, module


def answer(content: str = "model text") -> dict:
    return {"content": content, "finishReason": "stop", "toolCalls": []}


async def test_the_context_names_the_execution_on_runtime_events_only(loaded) -> None:
    table, _ = loaded
    await dispatch(table, "PreLLMCall", subagent("sub-a"), llm_payload("hello"))
    await dispatch(table, "PreToolUse", ROOT, {"toolCall": {"id": "c1", "name": "roll", "arguments": "{}"}})
    contexts = sys.modules["covel_plugin_rewriter_g1.server.index"].CONTEXTS
    assert contexts == [("PreLLMCall", "execpolicy/helper", "sub-a", "run-1", "sub-a", "execpolicy/agent"),
                        ("PreToolUse", "execpolicy/agent", "run-1", "run-1", "", "")]
    view = ROOT.view(__import__("shared.hook_events", fromlist=["EVENTS_BY_NAME"]).EVENTS_BY_NAME["TurnStart"])
    assert view.execution_id is None and view.subagent_call_id is None, "a turn event is about no execution"


async def test_concurrent_subagents_of_one_runtime_get_their_own_model_calls_when_another_plugin_rewrites(loaded) -> None:
    table, module = loaded
    a, b = subagent("sub-a"), subagent("sub-b")
    finishing = await dispatch(table, "PreLLMCall", a, llm_payload("finish"))  # sub-a's hook answers for the model
    plain = await dispatch(table, "PreLLMCall", b, llm_payload("brief two"))
    assert finishing.payload["messages"][-1]["content"] == "(house rule)", "the rewriter ran after the hookspec plugin"
    # sub-b answers first; what it carries matches neither request the hookspec plugin saw.
    second = await dispatch(table, "PostLLMResponse", b, {"response": answer(), "messages": plain.payload["messages"]})
    first = await dispatch(table, "PostLLMResponse", a, {"response": answer(), "messages": finishing.payload["messages"]})
    assert second.payload["response"]["content"] == "model text", "sub-b's call is not sub-a's finish"
    assert first.payload["response"]["content"] == "Finished by a hook."
    assert [result.text for result in module.RESULTS] == ["model text", "Finished by a hook."]
    assert [entry[2] for entry in module.SEEN if entry[0] == "after_llm"] == ["model text", "Finished by a hook."]


async def test_without_an_execution_id_the_same_rewrite_picks_the_oldest_call(loaded) -> None:
    """What the execution id fixes: an older scheduler's context (no execution id) falls back to the oldest."""
    table, _ = loaded
    legacy = ExecutionContext(**SESSION, plugin_id="execpolicy", runtime_id="execpolicy/helper")
    finishing = await dispatch(table, "PreLLMCall", legacy, llm_payload("finish"))
    plain = await dispatch(table, "PreLLMCall", legacy, llm_payload("brief two"))
    second = await dispatch(table, "PostLLMResponse", legacy, {"response": answer(), "messages": plain.payload["messages"]})
    assert second.payload["response"]["content"] == "Finished by a hook.", "the wrong call's decision"
    assert finishing.payload["messages"] != plain.payload["messages"]


async def test_concurrent_subagents_keep_their_tool_calls_when_another_plugin_rewrites_arguments(loaded) -> None:
    table, module = loaded
    a, b = subagent("sub-a"), subagent("sub-b")
    # The same model call id in both runs, the same tool; the rewriter changes both calls' arguments.
    pre_a = await dispatch(table, "PreToolUse", a, {"toolCall": {"id": "call-1", "name": "roll", "arguments": json.dumps({"run": 1})}})
    pre_b = await dispatch(table, "PreToolUse", b, {"toolCall": {"id": "call-1", "name": "roll", "arguments": json.dumps({"run": 2})}})
    assert json.loads(pre_b.payload["toolCall"]["arguments"]) == {"run": 2, "house": True}
    for execution, pre, data in ((b, pre_b, 2), (a, pre_a, 1)):
        # The kernel keeps the call's id and merges the rewritten arguments (apply_pre_tool_use).
        call = {"id": "call-1", "name": "roll", "arguments": pre.payload["toolCall"]["arguments"]}
        await dispatch(table, "PostToolUse", execution, {"toolCall": call,
                                                         "result": {"result": json.dumps({"ok": True, "data": data}), "success": True}})
    assert [(call.arguments, result.result) for call, result in module.TOOL_RESULTS] == [({"run": 2}, 2), ({"run": 1}, 1)]


async def test_a_subagents_failed_model_call_reaches_after_llm_call_at_its_roots_post_runtime(loaded) -> None:
    table, module = loaded
    await dispatch(table, "PreLLMCall", subagent("sub-a"), llm_payload("hello"))  # its model call fails: no PostLLMResponse
    answered = await dispatch(table, "PreLLMCall", subagent("sub-b"), llm_payload("fine"))
    await dispatch(table, "PostLLMResponse", subagent("sub-b"), {"response": answer("ok"), "messages": answered.payload["messages"]})
    await dispatch(table, "PreLLMCall", subagent("sub-c", root="run-2"), llm_payload("elsewhere"))  # another root's, still running
    assert [result.error for result in module.RESULTS] == [None]
    # The delegating runtime ends well (the delegate call answered an error the model read).
    await dispatch(table, "PostRuntime", ROOT, {"result": {"status": "success"}})
    failed = [result for result in module.RESULTS if result.error is not None]
    assert len(failed) == 1 and type(failed[0].error).__name__ == "LLMCallFailed"
    assert "execpolicy/helper" in str(failed[0].error) and "sub-a" in str(failed[0].error)
    assert failed[0].run_id == "t1:execpolicy/helper" and failed[0].text is None
    assert not [entry for entry in module.SEEN if entry[0] == "on_error"], "the root did not fail"
    # Told once; run-2's pending call waits for run-2's own PostRuntime.
    await dispatch(table, "PostRuntime", ROOT, {"result": {"status": "success"}})
    assert len(module.RESULTS) == 2
    other_root = ExecutionContext(**SESSION, plugin_id="execpolicy", runtime_id="execpolicy/other", execution_id="run-2",
                                  root_execution_id="run-2")
    await dispatch(table, "PostRuntime", other_root, {"result": {"status": "failed", "reason": "boom"}})
    assert len(module.RESULTS) == 3 and "sub-c" in str(module.RESULTS[-1].error)


async def test_a_cut_off_answer_asked_again_in_one_execution_leaves_the_newest_call_answered(loaded) -> None:
    table, module = loaded
    a = subagent("sub-a")
    await dispatch(table, "PreLLMCall", a, llm_payload("finish"))  # cut off: asked again, never reaches PostLLMResponse
    again = await dispatch(table, "PreLLMCall", a, llm_payload("brief two"))
    reviewed = await dispatch(table, "PostLLMResponse", a, {"response": answer(), "messages": again.payload["messages"]})
    assert reviewed.payload["response"]["content"] == "model text", "the newest call of the execution is the one answered"
    await dispatch(table, "PostRuntime", ROOT, {"result": {"status": "success"}})
    assert [result.text for result in module.RESULTS] == ["model text", None]
