"""Plain `def` plugin code in the hooks service runs in plugin threads: bounded by its timeout
like async code, and never blocking the event loop (other sessions' dispatches, tools,
extension providers, event-key handlers, hookspec impls)."""

from __future__ import annotations

import asyncio
import threading
import time

from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.hooks.event_keys import Audience, EventKeyBus, EventKeyTable
from services.hooks.extension_host import call_extension
from services.hooks.plugin_side.hookspec_adapter import register_hookimpls
from services.hooks.tool_host import call_tool
from shared.plugin_sdk import PluginRegistrar
from shared.plugin_sdk.hookspecs import hookimpl
from shared.plugin_sdk.tools import ToolContext
from shared.plugin_threads import PLUGIN_THREADS, in_plugin_thread

# Generous: a blocked loop stalls for the whole 500 ms sleep; a free one answers in a few ms.
PROMPT_S = 0.25


def table_of(registrar: PluginRegistrar) -> HandlerTable:
    return HandlerTable(registrar.hooks, {registrar.plugin_id: "builtin"})


def execution(plugin_id: str, session_id: str = "s1") -> ExecutionContext:
    return ExecutionContext(session_id=session_id, turn_id=f"{session_id}-t1", locale="en", active_plugin_ids=(plugin_id,))


async def longest_loop_stall(awaitable) -> tuple[object, float]:
    """(what `awaitable` gave, the longest the event loop went without running a 10 ms ticker)."""
    finished = asyncio.Event()
    stalls = [0.0]

    async def ticker() -> None:
        last = time.monotonic()
        while not finished.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            stalls.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    try:
        result = await awaitable
    finally:
        finished.set()
        await ticking
    return result, max(stalls)


async def test_a_sync_guard_handler_past_its_timeout_fails_closed_as_a_timeout() -> None:
    plugin = PluginRegistrar("slow")
    seen_abort = threading.Event()

    def sleeper(ctx, payload):
        time.sleep(0.5)
        if ctx.signal.aborted and ctx.signal.reason == "timeout":
            seen_abort.set()
        return None

    plugin.on("TurnStart", sleeper, timeout_ms=50)
    started = time.monotonic()
    result, stall = await longest_loop_stall(dispatch(table_of(plugin), "TurnStart", execution("slow"), {"playerMessage": ""}))
    assert time.monotonic() - started < 0.4, "the dispatch waited for the thread instead of its timeout"
    assert result.aborted and "slow" in result.reason and "50 ms" in result.reason
    [entry] = result.trace
    assert entry.status == "timeout" and "thread runs on" in entry.message
    assert stall < PROMPT_S
    # The thread runs on and sees the signal the timeout fired.
    assert await asyncio.to_thread(seen_abort.wait, 2)


async def test_a_slow_sync_handler_in_one_session_does_not_delay_another_sessions_dispatch() -> None:
    plugin = PluginRegistrar("per-session")
    sleeping = threading.Event()

    def handler(ctx, payload):
        if ctx.session_id == "A":
            sleeping.set()
            time.sleep(0.5)
        return {"action": "continue", "replace": {"activeRuntimes": [ctx.session_id]}}

    plugin.on("PreSchedule", handler, timeout_ms=2000)
    table = table_of(plugin)
    session_a = asyncio.create_task(dispatch(table, "PreSchedule", execution("per-session", "A"), {"triggered": []}))
    assert await asyncio.to_thread(sleeping.wait, 2)
    started = time.monotonic()
    session_b = await dispatch(table, "PreSchedule", execution("per-session", "B"), {"triggered": []})
    took = time.monotonic() - started
    assert took < PROMPT_S, f"session B waited {took:.3f} s behind session A's handler"
    assert not session_a.done()
    assert [entry.status for entry in session_b.trace] == ["ok"]
    assert (await session_a).trace[0].status == "ok"


async def test_a_sync_timeout_on_a_sequential_non_guard_event_skips_the_handler_like_an_async_one() -> None:
    plugin = PluginRegistrar("p")
    plugin.on("PreLLMCall", lambda ctx, p: {"replace": {"model": "fast"}})

    def slow(ctx, payload):
        time.sleep(0.5)
        return {"replace": {"model": "never"}}

    async def slow_async(ctx, payload):
        await asyncio.sleep(0.5)
        return {"replace": {"model": "never"}}

    plugin.on("PreLLMCall", slow, timeout_ms=50)
    plugin.on("PreLLMCall", slow_async, timeout_ms=50)
    plugin.on("PreLLMCall", lambda ctx, p: {"replace": {"stream": False}})
    result, stall = await longest_loop_stall(dispatch(table_of(plugin), "PreLLMCall", execution("p"), {"model": "story"}))
    assert not result.aborted
    assert result.payload == {"model": "fast", "stream": False}
    assert [entry.status for entry in result.trace] == ["ok", "timeout", "timeout", "ok"]
    assert stall < PROMPT_S


async def test_sync_handlers_of_a_parallel_event_run_at_once_and_time_out_alone() -> None:
    plugin = PluginRegistrar("p")
    both_running = threading.Barrier(2, timeout=2)

    def meets_the_other(ctx, payload):
        both_running.wait()

    def slow(ctx, payload):
        time.sleep(0.5)

    plugin.on("TurnStop", meets_the_other)
    plugin.on("TurnStop", meets_the_other)
    plugin.on("TurnStop", slow, timeout_ms=50)
    started = time.monotonic()
    result = await dispatch(table_of(plugin), "TurnStop", execution("p"), {"durationMs": 7})
    assert time.monotonic() - started < 0.4
    assert [entry.status for entry in result.trace] == ["ok", "ok", "timeout"]


async def test_a_sync_handler_that_raises_or_returns_garbage_fails_as_before() -> None:
    plugin = PluginRegistrar("p")

    def broken(ctx, payload):
        raise RuntimeError("boom")

    plugin.on("PreLLMCall", broken)
    plugin.on("PreLLMCall", lambda ctx, p: "garbage")
    result = await dispatch(table_of(plugin), "PreLLMCall", execution("p"), {"model": "story"})
    assert [(entry.status, entry.message) for entry in result.trace] == [
        ("error", "raised RuntimeError: boom"),
        ("invalid-result", "returned str; return None or a dict with action"),
    ]


async def test_a_sync_tool_past_its_time_limit_answers_timeout_without_blocking() -> None:
    plugin = PluginRegistrar("tools")

    def slow_tool(ctx, args):
        time.sleep(0.5)
        return {"late": True}

    plugin.register_tool("slow", slow_tool, description="sleeps", parameters={"type": "object"})
    context = ToolContext(session_id="s1", turn_id="t1", locale="en", runtime_id="r", logical_turn=1)
    result, stall = await longest_loop_stall(call_tool(plugin.tools[0], context, "{}", timeout_s=0.05))
    assert result["ok"] is False and result["error"]["code"] == "timeout"
    assert context.signal.aborted and stall < PROMPT_S


async def test_a_sync_extension_provider_past_its_time_limit_fails_without_blocking() -> None:
    plugin = PluginRegistrar("ext")

    def slow_provider(ctx, payload):
        time.sleep(0.5)
        return {"late": True}

    plugin.provide_extension("history.compact@2", "slow", slow_provider)
    context = ToolContext(session_id="s1", turn_id="t1", locale="en", runtime_id="r", logical_turn=1)
    answer, stall = await longest_loop_stall(call_extension(plugin.extensions[0], context, {}, timeout_s=0.05))
    assert not answer.ok and "did not answer" in answer.error
    assert stall < PROMPT_S


async def test_a_sync_event_key_handler_past_its_timeout_cannot_change_the_context_after_it() -> None:
    plugin = PluginRegistrar("keys")

    def slow(event):
        time.sleep(0.5)
        event.context["late"] = True

    def after(event):
        event.context["after"] = True

    plugin.on_event("message:received", slow, timeout_ms=50)
    plugin.on_event("message:received", after)
    table = EventKeyTable(plugin.event_handlers, {"keys": "builtin"})
    bus = EventKeyBus()
    emission, stall = await longest_loop_stall(bus.emit(table, "message:received", Audience(), {"from": "x"}))
    assert [entry.status for entry in emission.trace] == ["timeout", "ok"]
    assert stall < PROMPT_S
    await bus.join()
    assert emission.context == {"from": "x", "after": True}


async def test_a_sync_hookimpl_runs_off_the_event_loop() -> None:
    plugin = PluginRegistrar("specs")

    class SlowPrompt:
        @hookimpl
        def system_prompt(self, prompt, state):
            time.sleep(0.5)
            return "Be brief."

    plugin.register_hookimpls(SlowPrompt())
    register_hookimpls(plugin)
    result, stall = await longest_loop_stall(dispatch(
        table_of(plugin), "PostContextAssembly", execution("specs"),
        {"systemPrompt": "You narrate.", "messages": [{"role": "user", "content": "hi"}]},
    ))
    assert result.payload["systemPrompt"] == "You narrate.\n\nBe brief."
    assert stall < PROMPT_S


async def test_with_every_plugin_thread_busy_a_queued_handler_times_out_without_running() -> None:
    release = threading.Event()
    busy = [in_plugin_thread(release.wait, 5) for _ in range(PLUGIN_THREADS)]
    plugin = PluginRegistrar("queued")
    ran = threading.Event()
    plugin.on("TurnStart", lambda ctx, payload: ran.set(), timeout_ms=50)
    try:
        result = await dispatch(table_of(plugin), "TurnStart", execution("queued"), {"playerMessage": ""})
    finally:
        release.set()
        await asyncio.gather(*busy)
    assert result.aborted and result.trace[0].status == "timeout"
    # Once the pool is free again the dropped call still never runs.
    await asyncio.sleep(0.1)
    assert not ran.is_set()
