"""Declarative hook matches (`covel.on(..., match={...})`): what they accept, what a registration with a
bad one is told, and how the hooks service reports them so the scheduler can test them itself."""

from __future__ import annotations

import asyncio

import pytest

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2
from covel.store.v1 import store_pb2
from services.hooks.dispatcher import ExecutionContext, HandlerTable, dispatch
from services.scheduler.hooks.bus import ExecutionScope, Listeners
from shared.hook_matches import match_from_proto, match_to_proto
from shared.plugin_sdk import PluginRegistrar
from shared.plugin_sdk.hook_match import DeclarativeMatch, MatchError
from shared.plugin_sdk.registrar import RegistrationError

ROLLER = {"result.runtimeId": "dice-check/roller"}


def test_a_path_into_the_payload_and_a_context_field() -> None:
    match = DeclarativeMatch.parse({"result.runtimeId": ["a/x", "b"], "ctx.plugin_id": "a"})
    assert match.accepts({"result": {"runtimeId": "b"}}, {"plugin_id": "a"})
    assert not match.accepts({"result": {"runtimeId": "b"}}, {"plugin_id": "other"})
    assert not match.accepts({"result": {"runtimeId": "c"}}, {"plugin_id": "a"})
    # Every key must match; a missing path or a non-object on the way is null.
    assert not match.accepts({"result": "b"}, {"plugin_id": "a"}) and not match.accepts({}, {"plugin_id": "a"})
    assert DeclarativeMatch.parse({"result.note": None}).accepts({"result": {}}, {})
    assert DeclarativeMatch.parse({"ctx.runtime_id": None}).accepts({}, {"runtime_id": ""})


def test_equality_is_typed_as_json_is() -> None:
    assert DeclarativeMatch.parse({"n": 1}).accepts({"n": 1.0}, {})  # a Struct carries numbers as floats
    assert not DeclarativeMatch.parse({"n": 1}).accepts({"n": True}, {})
    assert not DeclarativeMatch.parse({"flag": True}).accepts({"flag": 1}, {})
    assert DeclarativeMatch.parse({"flag": True}).accepts({"flag": True}, {})


@pytest.mark.parametrize(("spec", "wording"), [
    ({}, "non-empty dict"),
    ("result.runtimeId", "non-empty dict"),
    ({"": "x"}, "dotted path"),
    ({"result..id": "x"}, "dotted path"),
    ({"ctx.session_id": "x"}, "ctx.plugin_id, ctx.runtime_id, ctx.locale"),
    ({"result.runtimeId": []}, "1 to 64 values"),
    ({"result.runtimeId": {"a": 1}}, "dict is not a JSON scalar"),
    ({f"k{i}": 1 for i in range(17)}, "at most 16 keys"),
])
def test_a_match_that_is_not_one_is_refused_at_registration(spec, wording) -> None:
    with pytest.raises(MatchError, match=wording):
        DeclarativeMatch.parse(spec)
    registrar = PluginRegistrar("p")
    with pytest.raises(RegistrationError, match=r"covel.on\('PostRuntime', match=…\)"):
        registrar.on("PostRuntime", lambda ctx, p: None, match=spec)


async def test_the_dispatcher_skips_a_handler_its_match_refuses() -> None:
    calls = []
    plugin = PluginRegistrar("dice")
    plugin.on("PostRuntime", lambda ctx, p: calls.append(p["result"]["runtimeId"]), match=ROLLER)
    plugin.on("PostRuntime", lambda ctx, p: calls.append(f"own:{ctx.plugin_id}"), match={"ctx.plugin_id": "dice"})
    table = HandlerTable(plugin.hooks, {})
    for runtime_id, plugin_id in (("narrator", "narrator"), ("dice-check/roller", "dice-check"), ("dice/x", "dice")):
        context = ExecutionContext(session_id="s", turn_id="t", locale="en", active_plugin_ids=("dice",),
                                   approved_plugin_ids=frozenset(), plugin_id=plugin_id, runtime_id=runtime_id)
        result = await dispatch(table, "PostRuntime", context, {"result": {"runtimeId": runtime_id}})
        assert [entry[1] for entry in result.raw_trace] == (["dice"] if plugin_id != "narrator" else [])
    assert calls == ["dice-check/roller", "own:dice"]


def test_the_service_reports_plugins_whose_every_handler_has_one() -> None:
    dice, guard = PluginRegistrar("dice"), PluginRegistrar("guard")
    dice.on("PostRuntime", lambda ctx, p: None, match=ROLLER)
    dice.on("PreToolUse", lambda ctx, p: None, match={"toolCall.name": "emit-event"})
    dice.on("PreToolUse", lambda ctx, p: None)  # no match: PreToolUse always reaches dice
    guard.on("PostRuntime", lambda ctx, p: None, match=lambda payload: True)  # a function: only its worker can test it
    matched = HandlerTable([*dice.hooks, *guard.hooks], {}).matched()
    assert list(matched) == ["PostRuntime"] and list(matched["PostRuntime"]) == ["dice"]
    [match] = matched["PostRuntime"]["dice"]
    assert match_from_proto(match_to_proto(match)) == match


def scope(*active: str) -> ExecutionScope:
    return ExecutionScope(store_pb2.Session(id="s", locale="en", active_plugins=list(active)), "t", 1)


def test_the_scheduler_dispatches_only_what_a_listener_would_take() -> None:
    subscription = hooks_pb2.Subscription(
        event="PostRuntime", plugin_ids=["dice", "always"],
        matched=[hooks_pb2.PluginMatches(plugin_id="dice", matches=[match_to_proto(DeclarativeMatch.parse(ROLLER))])])
    listeners = Listeners.from_proto(subscription)
    narrator = {"result": {"runtimeId": "narrator"}}
    roller = {"result": {"runtimeId": "dice-check/roller"}}
    assert not listeners.takers(scope("dice"), narrator, "narrator", "narrator")
    assert listeners.takers(scope("dice"), roller, "dice-check", "dice-check/roller")
    assert listeners.takers(scope("dice", "always"), narrator, "narrator", "narrator")
    assert not listeners.takers(scope("narrator"), roller, "dice-check", "dice-check/roller")


def test_a_match_the_scheduler_cannot_read_sends_every_payload() -> None:
    broken = hooks_pb2.HandlerMatch(conditions=[hooks_pb2.MatchCondition(path="ctx.secret")])
    listeners = Listeners.from_proto(hooks_pb2.Subscription(
        event="PostRuntime", plugin_ids=["dice"], matched=[hooks_pb2.PluginMatches(plugin_id="dice", matches=[broken])]))
    assert listeners.takers(scope("dice"), {}, "", "")


async def test_an_observer_only_watches_even_on_a_guard_event() -> None:
    seen = []
    watcher, guard = PluginRegistrar("watcher"), PluginRegistrar("guard")
    watcher.on("PreToolUse", lambda ctx, p: {"action": "abort", "reason": "ignored"}, observe=True)
    watcher.on("PreToolUse", lambda ctx, p: seen.append("second") or (_ for _ in ()).throw(ValueError("boom")), observe=True)
    guard.on("PreLLMCall", lambda ctx, p: {"action": "continue", "replace": {"model": "x"}}, observe=True)
    table = HandlerTable([*watcher.hooks, *guard.hooks], {})
    context = ExecutionContext(session_id="s", turn_id="t", locale="en", active_plugin_ids=("watcher", "guard"),
                               approved_plugin_ids=frozenset())
    result = await dispatch(table, "PreToolUse", context, {"toolCall": {"name": "x"}})
    assert not result.aborted and seen == ["second"] and [e[2] for e in result.raw_trace] == ["abort", "error"]
    replaced = await dispatch(table, "PreLLMCall", context, {"model": "story"})
    assert replaced.payload == {"model": "story"}
    assert table.observers() == {"PreToolUse": ["watcher"], "PreLLMCall": ["guard"]}
    with pytest.raises(RegistrationError, match="observe is True or False"):
        watcher.on("PreToolUse", lambda ctx, p: None, observe="yes")  # type: ignore[arg-type]


class FakeHooks:
    """A HookDispatcher stub that records what the bus sends."""

    def __init__(self, subscriptions) -> None:
        self.subscriptions, self.dispatched, self.observed = subscriptions, [], []

    async def GetSubscriptions(self, request, timeout=None):
        return hooks_pb2.GetSubscriptionsResponse(subscriptions=self.subscriptions)

    async def Dispatch(self, request, timeout=None):
        self.dispatched.append(request.event)
        return hooks_pb2.DispatchResponse(outcome=hooks_pb2.OUTCOME_CONTINUE, payload=request.payload)

    async def DispatchObserved(self, request, timeout=None):
        self.observed.append([event.event for event in request.events])
        return hooks_pb2.DispatchObservedResponse(trace=[common_pb2.HookTraceEntry(event=e.event, handler_plugin_id="cost") for e in request.events])


async def test_events_only_observers_take_are_sent_together_before_the_turn_stops() -> None:
    from services.scheduler.hooks.bus import HookBus
    from services.scheduler.hooks.payloads import PostLLMResponse, PreLLMCall, TurnStop
    hooks = FakeHooks([hooks_pb2.Subscription(event="PostLLMResponse", plugin_ids=["cost"], observers=["cost"]),
                       hooks_pb2.Subscription(event="PreLLMCall", plugin_ids=["cost", "guard"], observers=["cost"]),
                       hooks_pb2.Subscription(event="TurnStop", plugin_ids=["cost"], observers=["cost"])])
    bus = HookBus(hooks)  # type: ignore[arg-type]
    turn = scope("cost", "guard")
    for _ in range(3):
        await bus.dispatch(PostLLMResponse("", "stop", [], 0, 0, []), turn)
    await bus.dispatch(PreLLMCall([], "story", [], False, []), turn)  # guard takes it too: sent at once
    await bus.dispatch(TurnStop([], 0), turn)  # not one a watcher may hear late: sent at once
    assert hooks.dispatched == ["PreLLMCall", "TurnStop"] and hooks.observed == []
    trace = await bus.flush_observed(turn)
    assert hooks.observed == [["PostLLMResponse"] * 3] and len(trace) == 3
    assert await bus.flush_observed(turn) == [] and hooks.observed == [["PostLLMResponse"] * 3]


async def test_turn_stop_goes_with_the_held_events_in_one_call() -> None:
    from services.scheduler.hooks.bus import HookBus
    from services.scheduler.hooks.payloads import PostLLMResponse, TurnStop
    hooks = FakeHooks([hooks_pb2.Subscription(event="PostLLMResponse", plugin_ids=["cost"], observers=["cost"]),
                       hooks_pb2.Subscription(event="TurnStop", plugin_ids=["cost", "audit"], observers=["cost"])])
    bus = HookBus(hooks)  # type: ignore[arg-type]
    turn = scope("cost", "audit")
    await bus.dispatch(PostLLMResponse("", "stop", [], 0, 0, []), turn)
    trace = await bus.stop(TurnStop([], 0), turn)
    # TurnStop changes nothing whoever handles it (parallel, no guard, no replace): it needs no call of its own.
    assert hooks.dispatched == [] and hooks.observed == [["PostLLMResponse", "TurnStop"]]
    assert [entry.event for entry in trace] == ["PostLLMResponse", "TurnStop"]
    assert await bus.stop(TurnStop([], 0), scope("nobody")) == [] and len(hooks.observed) == 1, "no taker: no call"


class SlowObserved(FakeHooks):
    """DispatchObserved answers only when `release` is set: a background send still in flight."""

    def __init__(self, subscriptions) -> None:
        super().__init__(subscriptions)
        self.release = asyncio.Event()

    async def DispatchObserved(self, request, timeout=None):
        if all(event.event == "PostStateCommit" and event.context.plugin_id == "watched" for event in request.events):
            await self.release.wait()
        return await super().DispatchObserved(request, timeout)


async def test_post_state_commit_events_go_in_one_call_and_watchers_hear_them_after_the_turn() -> None:
    from services.scheduler.hooks.bus import HookBus
    from services.scheduler.hooks.payloads import PostStateCommit, TurnStart
    hooks = SlowObserved([
        hooks_pb2.Subscription(event="PostStateCommit", plugin_ids=["audit", "ledger"], observers=["ledger"],
                               matched=[hooks_pb2.PluginMatches(plugin_id="ledger", matches=[
                                   match_to_proto(DeclarativeMatch.parse({"ctx.plugin_id": "watched"}))])]),
        hooks_pb2.Subscription(event="TurnStart", plugin_ids=["audit"])])
    bus = HookBus(hooks)  # type: ignore[arg-type]
    turn = scope("audit", "ledger")

    def committed(plugin_id: str) -> tuple[PostStateCommit, str, str]:
        return PostStateCommit(store_pb2.Proposal(id=plugin_id, type="narrative.append", plugin_id=plugin_id)), plugin_id, plugin_id

    # audit takes every proposal's event: both now, in one call; ledger watches only "watched"'s, so that one waits.
    trace = await bus.committed([committed("narrator"), committed("other")], turn)
    assert hooks.observed == [["PostStateCommit", "PostStateCommit"]] and len(trace) == 2
    assert await bus.committed([committed("watched")], scope("ledger")) == [], "watchers only: nothing to wait for"
    assert hooks.observed == [["PostStateCommit", "PostStateCommit"]]
    # The session's next event waits for the watchers' call: they hear the session's events in order.
    next_turn = asyncio.create_task(bus.dispatch(TurnStart("", [], []), turn))
    await asyncio.sleep(0.05)
    assert not next_turn.done() and hooks.dispatched == []
    hooks.release.set()
    await next_turn
    assert hooks.observed[-1] == ["PostStateCommit"] and hooks.dispatched == ["TurnStart"]
