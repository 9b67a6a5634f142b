"""The dispatcher's fast path keeps the semantics: cached handler lists, and `async def` handlers whose
first step runs untimed in the dispatch loop (a timer only for one that suspends)."""

from __future__ import annotations

import asyncio
import time

import pytest

from services.hooks import dispatcher
from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from shared.plugin_sdk import PluginRegistrar


def execution(*active: str, approved: tuple[str, ...] = ()) -> ExecutionContext:
    return ExecutionContext("s1", "t1", "en", active, frozenset(approved))


def plugin_with(plugin_id: str, *handlers, event: str = "PreToolUse", timeout_ms: int = 5000) -> PluginRegistrar:
    registrar = PluginRegistrar(plugin_id)
    for handler in handlers:
        registrar.on(event, handler, timeout_ms=timeout_ms)
    return registrar


async def allow(ctx, payload):
    return None


def test_handler_lists_are_cached_per_plugin_set_and_follow_it() -> None:
    builtin, community = plugin_with("b", allow), plugin_with("c", allow)
    table = HandlerTable([*builtin.hooks, *community.hooks], {"b": "builtin", "c": "community"})
    first = table.handlers_for("PreToolUse", execution("b", "c"))
    # Another execution with the same plugin set (a new context per RPC) gets the same list.
    assert table.handlers_for("PreToolUse", execution("b", "c")) is first
    assert [h.plugin_id for h in first] == ["b"]
    assert [h.plugin_id for h in table.handlers_for("PreToolUse", execution("b", "c", approved=("c",)))] == ["b", "c"]
    assert [h.plugin_id for h in table.handlers_for("PreToolUse", execution("c", approved=("c",)))] == ["c"]
    assert table.handlers_for("TurnStart", execution("b", "c")) == ()


def test_a_reload_builds_a_new_table_whose_lists_hold_the_new_handlers() -> None:
    async def deny(ctx, payload):
        return {"action": "abort", "reason": "no"}

    before = HandlerTable(plugin_with("p", allow).hooks, {"p": "builtin"})
    assert [h.handler for h in before.handlers_for("PreToolUse", execution("p"))] == [allow]
    after = HandlerTable(plugin_with("p", allow, deny).hooks, {"p": "builtin"})
    assert [h.handler for h in after.handlers_for("PreToolUse", execution("p"))] == [allow, deny]
    # The old table (dispatches still running on it) keeps what it had.
    assert [h.handler for h in before.handlers_for("PreToolUse", execution("p"))] == [allow]


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatcher, "CHOSEN_KEPT", 3)
    table = HandlerTable(plugin_with("p", allow).hooks, {"p": "builtin"})
    for index in range(10):
        assert len(table.handlers_for("PreToolUse", execution("p", f"other-{index}"))) == 1
        assert len(table._chosen) <= 3


async def test_handlers_that_suspend_chain_payloads_and_fail_closed_as_before() -> None:
    ran = []

    async def rewrite(ctx, payload):
        await asyncio.sleep(0)
        ran.append("rewrite")
        return {"replace": {"toolCall": {"name": "safe"}}}

    async def check(ctx, payload):
        await asyncio.sleep(0.001)
        ran.append(payload["toolCall"]["name"])
        raise RuntimeError("broken after a wait")

    async def never(ctx, payload):
        ran.append("never")

    plugin = plugin_with("p", rewrite, check, never)
    result = await dispatch(HandlerTable(plugin.hooks, {}), "PreToolUse", execution("p"), {"toolCall": {"name": "rm"}})
    assert ran == ["rewrite", "safe"]
    assert result.aborted and "broken after a wait" in result.reason
    assert [entry.status for entry in result.trace] == ["ok", "error"]


async def test_a_handler_that_suspends_has_what_is_left_of_its_timeout() -> None:
    signals = []

    async def busy_then_wait(ctx, payload):
        signals.append(ctx.signal)
        time.sleep(0.06)  # its first step: counted in its timeout
        await asyncio.sleep(0.06)

    result = await dispatch(HandlerTable(plugin_with("p", busy_then_wait, timeout_ms=100).hooks, {}), "PreToolUse",
                            execution("p"), {})
    assert result.aborted and result.trace[0].status == "timeout" and "100 ms" in result.trace[0].message
    assert signals[0].aborted and signals[0].reason == "timeout"
    result = await dispatch(HandlerTable(plugin_with("p", busy_then_wait, timeout_ms=1000).hooks, {}), "PreToolUse",
                            execution("p"), {})
    assert not result.aborted and result.trace[0].status == "ok"


async def test_a_handler_that_never_suspends_is_not_timed_out_as_before() -> None:
    # No timer can fire while a handler holds the loop; asyncio.timeout around it never did either.
    async def busy(ctx, payload):
        time.sleep(0.08)

    result = await dispatch(HandlerTable(plugin_with("p", busy, timeout_ms=50).hooks, {}), "PreToolUse", execution("p"), {})
    assert not result.aborted and result.trace[0].status == "ok"


@pytest.mark.parametrize("suspend_first", [False, True])
async def test_exceptions_of_the_first_step_and_of_the_rest_count_the_same(suspend_first: bool) -> None:
    async def raises(ctx, payload):
        if suspend_first:
            await asyncio.sleep(0)
        raise ValueError("bad")

    async def times_out_itself(ctx, payload):
        if suspend_first:
            await asyncio.sleep(0)
        raise TimeoutError

    for handler, status in ((raises, "error"), (times_out_itself, "timeout")):
        result = await dispatch(HandlerTable(plugin_with("p", handler).hooks, {}), "PreToolUse", execution("p"), {})
        assert result.aborted and result.trace[0].status == status


async def test_cancelling_the_dispatch_cancels_the_waiting_handler_and_fires_its_signal() -> None:
    started, seen = asyncio.Event(), []

    async def waits(ctx, payload):
        seen.append(ctx.signal)
        started.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    running = asyncio.ensure_future(dispatch(HandlerTable(plugin_with("p", waits).hooks, {}), "PreToolUse", execution("p"), {}))
    await started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert seen[1] == "cancelled" and seen[0].aborted and seen[0].reason == "cancelled"
