"""The dispatcher's semantics, in process: ordering, results, failures, gating, payload copies."""

from __future__ import annotations

import asyncio

import pytest

from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from shared.plugin_sdk import PluginRegistrar


def table_of(*registrars: PluginRegistrar, sources: dict[str, str] | None = None) -> HandlerTable:
    return HandlerTable([hook for registrar in registrars for hook in registrar.hooks], sources or {})


def execution(*active: str, approved: tuple[str, ...] = (), **kwargs) -> ExecutionContext:
    return ExecutionContext(
        session_id="s1", turn_id="t1", locale="en", active_plugin_ids=active, approved_plugin_ids=frozenset(approved), **kwargs
    )


async def test_groups_run_pre_normal_post_then_registration_order() -> None:
    calls: list[str] = []
    first, second = PluginRegistrar("first"), PluginRegistrar("second")
    first.on("TurnStart", lambda ctx, p: calls.append("first-post"), enforce="post")
    first.on("TurnStart", lambda ctx, p: calls.append("first-normal"))
    second.on("TurnStart", lambda ctx, p: calls.append("second-pre"), enforce="pre")
    second.on("TurnStart", lambda ctx, p: calls.append("second-normal"))
    await dispatch(table_of(first, second), "TurnStart", execution("first", "second"), {"playerMessage": "hi"})
    assert calls == ["second-pre", "first-normal", "second-normal", "first-post"]


async def test_framework_hooks_run_first_in_their_group_and_always() -> None:
    calls: list[str] = []
    plugin, framework = PluginRegistrar("plugin"), PluginRegistrar("framework")
    plugin.on("TurnStart", lambda ctx, p: calls.append("plugin-pre"), enforce="pre")
    plugin.on("TurnStart", lambda ctx, p: calls.append("plugin-normal"))
    framework.on("TurnStart", lambda ctx, p: calls.append("framework-normal"))
    framework.on("TurnStart", lambda ctx, p: calls.append("framework-post"), enforce="post")
    await dispatch(table_of(plugin, framework), "TurnStart", execution("plugin"), {})
    assert calls == ["plugin-pre", "framework-normal", "plugin-normal", "framework-post"]
    calls.clear()
    await dispatch(table_of(plugin, framework), "TurnStart", execution(), {})
    assert calls == ["framework-normal", "framework-post"]


async def test_replace_chains_and_only_listed_fields_count() -> None:
    plugin = PluginRegistrar("p")
    seen = []
    plugin.on("PreLLMCall", lambda ctx, p: {"action": "continue", "replace": {"model": "fast", "bogus": 1}})
    plugin.on("PreLLMCall", lambda ctx, p: seen.append(p["model"]))
    result = await dispatch(table_of(plugin), "PreLLMCall", execution("p"), {"model": "story", "messages": []})
    assert seen == ["fast"]
    assert result.payload == {"model": "fast", "messages": []}


async def test_mutating_the_payload_has_no_effect() -> None:
    plugin = PluginRegistrar("p")

    def mutate(ctx, payload):
        payload["messages"].append("sneaky")
        payload["model"] = "changed"

    seen = []
    plugin.on("PreLLMCall", mutate, match=lambda p: p.update(model="from-match") or True)
    plugin.on("PreLLMCall", lambda ctx, p: seen.append(dict(p)))
    original = {"model": "story", "messages": ["a"]}
    result = await dispatch(table_of(plugin), "PreLLMCall", execution("p"), original)
    assert seen == [{"model": "story", "messages": ["a"]}]
    assert result.payload == original and original == {"model": "story", "messages": ["a"]}


async def test_abort_ends_the_chain_on_a_guard_event() -> None:
    plugin = PluginRegistrar("p")
    later = []
    plugin.on("PreToolUse", lambda ctx, p: {"action": "abort", "reason": "no deleting"})
    plugin.on("PreToolUse", lambda ctx, p: later.append(1))
    result = await dispatch(table_of(plugin), "PreToolUse", execution("p"), {"toolCall": {}})
    assert result.aborted and result.reason == "no deleting"
    assert later == []
    assert [entry.status for entry in result.trace] == ["abort"]


async def test_abort_on_a_non_guard_event_changes_nothing() -> None:
    plugin = PluginRegistrar("p")
    plugin.on("PreSchedule", lambda ctx, p: {"action": "abort", "reason": "meh"})
    result = await dispatch(table_of(plugin), "PreSchedule", execution("p"), {"triggered": [1]})
    assert not result.aborted and result.payload == {"triggered": [1]}


async def test_guard_handler_past_its_timeout_blocks_and_is_cancelled() -> None:
    plugin = PluginRegistrar("slow")
    cancelled = asyncio.Event()

    async def sleeper(ctx, payload):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    plugin.on("TurnStart", sleeper, timeout_ms=50)
    result = await dispatch(table_of(plugin), "TurnStart", execution("slow"), {"playerMessage": ""})
    assert result.aborted and "slow" in result.reason and "50 ms" in result.reason
    assert result.trace[0].status == "timeout"
    assert cancelled.is_set()


@pytest.mark.parametrize(
    ("returned", "status"),
    [("garbage", "invalid-result"), ({"action": "explode"}, "invalid-result"), ({"action": "abort"}, "invalid-result"),
     ({"replace": [1]}, "invalid-result")],
)
async def test_malformed_result_fails_closed_on_guard_events(returned, status) -> None:
    plugin = PluginRegistrar("p")
    plugin.on("PreStateCommit", lambda ctx, p: returned)
    result = await dispatch(table_of(plugin), "PreStateCommit", execution("p"), {"proposal": {}})
    assert result.aborted
    assert result.trace[0].status == status


async def test_failing_handler_on_other_events_is_skipped_and_earlier_replace_kept() -> None:
    plugin = PluginRegistrar("p")
    plugin.on("PreLLMCall", lambda ctx, p: {"replace": {"model": "fast"}})

    def broken(ctx, p):
        raise RuntimeError("boom")

    plugin.on("PreLLMCall", broken)
    result = await dispatch(table_of(plugin), "PreLLMCall", execution("p"), {"model": "story"})
    assert not result.aborted and result.payload["model"] == "fast"
    assert [entry.status for entry in result.trace] == ["ok", "error"]
    assert "RuntimeError: boom" in result.trace[1].message


async def test_parallel_event_runs_handlers_together_and_ignores_results() -> None:
    plugin = PluginRegistrar("p")
    both_running = asyncio.Event()
    arrived = []

    async def waiter(ctx, payload):
        arrived.append(1)
        if len(arrived) == 2:
            both_running.set()
        await asyncio.wait_for(both_running.wait(), 1)
        return {"action": "continue", "replace": {"durationMs": 0}}

    plugin.on("TurnStop", waiter)
    plugin.on("TurnStop", waiter)
    result = await dispatch(table_of(plugin), "TurnStop", execution("p"), {"durationMs": 7})
    assert [entry.status for entry in result.trace] == ["ok", "ok"]
    assert result.payload == {"durationMs": 7}


async def test_only_active_and_approved_plugins_run() -> None:
    builtin, community, inactive = PluginRegistrar("b"), PluginRegistrar("c"), PluginRegistrar("off")
    ran = []
    for registrar in (builtin, community, inactive):
        registrar.on("TurnStart", lambda ctx, p, name=registrar.plugin_id: ran.append(name))
    table = table_of(builtin, community, inactive, sources={"b": "builtin", "c": "community", "off": "builtin"})
    await dispatch(table, "TurnStart", execution("b", "c"), {})
    assert ran == ["b"]
    await dispatch(table, "TurnStart", execution("b", "c", approved=("c",)), {})
    assert ran == ["b", "b", "c"]


async def test_context_names_the_runtime_only_for_runtime_events() -> None:
    plugin = PluginRegistrar("watcher")
    contexts = []
    plugin.on("PreRuntime", lambda ctx, p: contexts.append(ctx))
    plugin.on("TurnStart", lambda ctx, p: contexts.append(ctx))
    plugin.on("SessionStart", lambda ctx, p: contexts.append(ctx))
    run = execution("watcher", plugin_id="narrator", runtime_id="narrator", plugin_settings={"watcher": {"level": 2}})
    await dispatch(table_of(plugin), "PreRuntime", run, {})
    await dispatch(table_of(plugin), "TurnStart", run, {})
    await dispatch(table_of(plugin), "SessionStart", run, {})
    runtime_ctx, turn_ctx, session_ctx = contexts
    assert (runtime_ctx.plugin_id, runtime_ctx.runtime_id) == ("narrator", "narrator")
    assert turn_ctx.plugin_id is None and turn_ctx.runtime_id is None and turn_ctx.turn_id == "t1"
    assert session_ctx.turn_id == ""
    assert runtime_ctx.get_own_settings() == {"level": 2}
    with pytest.raises(TypeError):
        runtime_ctx.get_own_settings()["level"] = 3  # read-only
