"""The builtin plugins in process: their rules, their handlers through the kernel's function
runner (real plugin-data views), their hooks through the hooks service's entry loader, and the
scripted model's replies for them. Fast: no services start here (tests/e2e plays them)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from types import MappingProxyType, SimpleNamespace

import pytest
import yaml

from services.gateway.chat import Message, Tool
from services.gateway.providers.scripted.story_replies import planned_tool_call, structured_reply
from services.hooks.in_process import load_entries
from services.hooks.plugin_entries import PluginEntry
from services.registry.package_loader import load_package
from services.scheduler.execution.plugin_data_view import PluginDataView
from services.scheduler.function.runtime import FunctionContext, run_function
from shared.plugin_code import PluginFile
from shared.plugin_sdk import CancellationSignal, ExecutionView, HookContext
from shared.plugin_sdk.seeded_random import SeededRandom
from shared.plugin_sdk.session_state import STATE_BACKEND
from shared.settings import REPO_ROOT

PLUGINS = REPO_ROOT / "plugins"


def ctx(plugin_id: str, runtime_id: str, *, message: str = "", inputs: dict | None = None, data: dict | None = None,
        settings: dict | None = None, activation: dict | None = None, turn: int = 1) -> FunctionContext:
    committed = {(ns, key): value for (ns, key), value in (data or {}).items()}

    async def load(namespace):
        return {k: v for k, v in committed.items() if namespace is None or k[0] == namespace}

    return FunctionContext(
        runtime_id=runtime_id, plugin_id=plugin_id, inputs=MappingProxyType(inputs or {}), player_message=message, player_actions=(),
        logical_turn=turn, execution=MappingProxyType({"origin": "player"}), recursion_depth=0, random=SeededRandom("test"),
        plugin_data=PluginDataView(plugin_id, load), signal=CancellationSignal(), user_settings=MappingProxyType(settings or {}),
        activation=MappingProxyType(activation or {}),
    )


async def run(plugin: str, runtime: str, context: FunctionContext):
    """The handler of runtime `plugin/runtime` (`runtime == plugin`: the inline one), under the time limit the registry compiled for it."""
    wanted = plugin if runtime == plugin else f"{plugin}/{runtime}"
    [compiled] = [r.compiled for r in load_package(PLUGINS / plugin, source="builtin").runtimes if r.runtime_id == wanted]
    assert compiled is not None
    return await run_function(context, PluginFile(plugin, PLUGINS / plugin, compiled.function_part.handler), compiled.function_part.timeout_ms)


def hooks_of(plugin_id: str):
    """The plugin's registrar, loaded by the hooks service's own entry loader (declarations checked)."""
    manifest = yaml.safe_load((PLUGINS / plugin_id / "PLUGIN.md").read_text().split("---")[1])
    contributes = manifest.get("contributes") or {}
    hooks = tuple((h, "normal") if isinstance(h, str) else (h["event"], h.get("enforce", "normal")) for h in contributes.get("hooks") or [])
    entry = PluginEntry(plugin_id, PLUGINS / plugin_id, "server/index.py", hooks, "builtin",
                        declared_extensions=tuple(contributes.get("extensions") or ()))
    result = load_entries([entry], generation=1)
    assert not result.errors, result.errors
    return result.loaded[0].registrar


def hook_ctx(event: str, plugin_id: str, runtime_id: str = "", settings: dict | None = None, locale: str = "en", handler: str = "") -> HookContext:
    view = ExecutionView(event, "s1", "t1", locale, (plugin_id,), plugin_id=plugin_id, runtime_id=runtime_id,
                         plugin_settings={handler or plugin_id: settings or {}})
    return HookContext(view, handler or plugin_id)


def test_every_builtin_package_validates_without_warnings() -> None:
    packages = sorted(str(p) for p in PLUGINS.iterdir() if (p / "PLUGIN.md").is_file() and not p.name.startswith("example-"))
    done = subprocess.run([sys.executable, "-m", "covel_cli.main", "validate-plugin", *packages], capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stdout.lower(), done.stdout


# ---- dice-check ---------------------------------------------------------------------------------

async def test_roller_rolls_risky_actions_and_emits_the_receipt() -> None:
    done = await run("dice-check", "roller", ctx("dice-check", "dice-check/roller", message="I climb the wall. I smile.", settings={"dc": 11}))
    assert done.status == "success"
    [check] = done.canonical_value["checks"]
    assert check["skill"] == "athletics" and 1 <= check["roll"] <= 20 and check["dc"] == 11
    assert done.events == [{"topic": "dice-check.rolled", "payload": {"checks": [check], "turn": 1}}]
    calm = await run("dice-check", "roller", ctx("dice-check", "dice-check/roller", message="I look around."))
    assert calm.canonical_value == {"checks": []} and calm.events == []


async def test_recorder_refuses_a_receipt_that_does_not_follow_its_dice_and_writes_nothing() -> None:
    lie = {"action": "climb", "skill": "athletics", "roll": 3, "modifier": 0, "dc": 12, "total": 3, "outcome": "success"}
    events = [{"topic": "dice-check.rolled", "source": "dice-check/roller", "payload": {"checks": [lie], "turn": 2}}]
    done = await run("dice-check", "recorder", ctx("dice-check", "dice-check/recorder", activation={"events": events}))
    assert done.status == "failed" and "a failure, not success" in done.reason and done.writes == []
    honest = {**lie, "outcome": "failure"}
    ok = await run("dice-check", "recorder", ctx("dice-check", "dice-check/recorder",
                                                  activation={"events": [{**events[0], "payload": {"checks": [honest], "turn": 2}}]}))
    assert ok.status == "success" and [w["payload"]["key"] for w in ok.writes] == ["t2-1", "all"]


async def test_manual_roll_parses_the_expression_and_rejects_a_bad_one() -> None:
    done = await run("dice-check", "roll", ctx("dice-check", "dice-check/roll", activation={"expression": "3d6+2"}))
    assert done.status == "success" and len(done.canonical_value["dice"]) == 3
    assert done.canonical_value["total"] == sum(done.canonical_value["dice"]) + 2
    bad = await run("dice-check", "roll", ctx("dice-check", "dice-check/roll", activation={"expression": "three dice"}))
    assert bad.status == "failed" and "not a dice expression" in bad.reason and bad.writes == []


async def test_recorder_counts_only_the_rollers_events() -> None:
    check = {"action": "climb", "skill": "athletics", "roll": 14, "modifier": 0, "dc": 12, "total": 14, "outcome": "success"}
    events = [{"topic": "dice-check.rolled", "source": "dice-check/roller", "payload": {"checks": [check], "turn": 3}},
              {"topic": "dice-check.rolled", "source": "narrator", "payload": {"checks": [check], "turn": 3}}]
    done = await run("dice-check", "recorder", ctx("dice-check", "dice-check/recorder", activation={"events": events}))
    assert done.status == "success" and done.canonical_value == {"recorded": ["t3-1"], "ignored": ["narrator"]}
    assert done.writes[-1]["payload"]["value"]["checks"] == 1, "a model's repeat of the roll is not counted twice"


def _emit(check: dict) -> dict:
    return {"toolCall": {"id": "1", "name": "emit-event", "arguments": json.dumps({"topic": "dice-check.rolled", "payload": {"checks": [check]}})}}


def _in_turn(event: str, turn_id: str = "t1", session_id: str = "s1") -> HookContext:
    return HookContext(ExecutionView(event, session_id, turn_id, "en", ("dice-check",), plugin_id="narrator", runtime_id="narrator"),
                       "dice-check")


class MemoryState:
    """ctx.state in memory, for calling hook handlers directly (the store's is tested in tests/store, tests/e2e)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str, str], object] = {}

    async def access(self, session_id: str, plugin_id: str, op: str, key: str, value=None):
        slot = (session_id, plugin_id, key)
        if op == "set":
            self.values[slot] = value
        elif op == "add":
            self.values[slot] = self.values.get(slot, 0) + value
        elif op == "delete":
            self.values.pop(slot, None)
        return slot in self.values, self.values.get(slot)


@pytest.fixture
def memory_state():
    token = STATE_BACKEND.set(MemoryState())
    yield
    STATE_BACKEND.reset(token)


@pytest.mark.usefixtures("memory_state")
async def test_pre_tool_use_refuses_a_check_the_roller_did_not_roll_this_turn() -> None:
    registrar = hooks_of("dice-check")
    [remember] = [h for h in registrar.hooks if h.event == "PostRuntime"]
    refuse, forget = _hook("dice-check", "PreToolUse"), _hook("dice-check", "SessionEnd")
    rolled = {"action": "I climb the wall.", "skill": "athletics", "roll": 3, "modifier": 0, "dc": 12, "total": 3, "outcome": "failure"}
    result = {"result": {"runtimeId": "dice-check/roller", "status": "success", "canonicalValue": {"checks": [rolled]}}}
    assert remember.match.accepts(result, {}) and not remember.match.accepts({"result": {"runtimeId": "narrator"}}, {})

    # Before the roller ran this turn, no emitted check is a rolled one.
    assert (await refuse.handler(_in_turn("PreToolUse"), _emit(rolled)))["action"] == "abort"
    await remember.handler(_in_turn("PostRuntime"), result)
    assert await refuse.handler(_in_turn("PreToolUse"), _emit(rolled)) == {"action": "continue"}, "the roller's own dice pass"
    lie = await refuse.handler(_in_turn("PreToolUse"), _emit({**rolled, "outcome": "success"}))
    assert lie["action"] == "abort" and "is a failure, not success" in lie["reason"]
    invented = await refuse.handler(_in_turn("PreToolUse"), _emit({**rolled, "roll": 17, "total": 17, "outcome": "success"}))
    assert invented["action"] == "abort" and "rolled no athletics check of 17+0 against DC 12" in invented["reason"]
    assert "This turn's rolls: athletics 3+0 vs DC 12 → failure" in invented["reason"]
    later = await refuse.handler(_in_turn("PreToolUse", turn_id="t2"), _emit(rolled))
    assert later["action"] == "abort" and "no dice were rolled" in later["reason"], "last turn's roll is not this turn's"
    other = await refuse.handler(_in_turn("PreToolUse", session_id="s2"), _emit(rolled))
    assert other["action"] == "abort", "another session's roll does not count"
    assert await refuse.handler(_in_turn("PreToolUse"), {"toolCall": {"id": "2", "name": "emit-event", "arguments": json.dumps(
        {"topic": "weather.changed", "payload": {}})}}) is None, "other topics are not dice-check's business"
    await forget.handler(_in_turn("SessionEnd"), {"sessionId": "s1"})
    assert (await refuse.handler(_in_turn("PreToolUse"), _emit(rolled)))["action"] == "abort"


# ---- inventory ----------------------------------------------------------------------------------

LANTERN = {"id": "brass-lantern", "name": "brass lantern", "quantity": 1, "equipped": False}


async def test_inventory_apply_uses_operation_writes() -> None:
    changes = [{"item": "brass lantern", "delta": 0, "equip": True, "reason": "lit"}, {"item": "Rusty Key", "delta": 1, "reason": "found"}]
    done = await run("inventory", "apply", ctx("inventory", "inventory/apply", inputs={"changes": {"value": changes}},
                                              data={("items", "brass-lantern"): LANTERN}))
    assert done.status == "success"
    assert [(w["type"], w["payload"]["key"]) for w in done.writes] == [("plugin.data.update", "brass-lantern"), ("plugin.data", "rusty-key")]


async def test_inventory_apply_takes_nothing_when_one_change_is_impossible() -> None:
    changes = [{"item": "rusty key", "delta": 1, "reason": "found"}, {"item": "brass lantern", "delta": -2, "reason": "lost two"}]
    done = await run("inventory", "apply", ctx("inventory", "inventory/apply", inputs={"changes": {"value": changes}},
                                              data={("items", "brass-lantern"): LANTERN}))
    assert done.status == "failed" and "carries 1" in done.reason and done.writes == [], "a failed run proposes no partial writes"


async def test_inventory_stock_reads_the_starting_items_once() -> None:
    done = await run("inventory", "stock", ctx("inventory", "inventory/stock", settings={"startingItems": "brass lantern\n3 x copper coin"}))
    assert [w["payload"]["value"]["quantity"] for w in done.writes] == [1, 3]
    again = await run("inventory", "stock", ctx("inventory", "inventory/stock", settings={"startingItems": "map"},
                                                data={("items", "brass-lantern"): LANTERN}))
    assert again.writes == [], "an inventory that holds something is not restocked"
    bad = await run("inventory", "stock", ctx("inventory", "inventory/stock", settings={"startingItems": "0 x coin"}))
    assert bad.status == "failed" and "outside 1..999" in bad.reason


# ---- affinity, world-time -----------------------------------------------------------------------

async def test_affinity_scores_stay_within_bounds() -> None:
    record = {"id": "mira", "name": "Mira", "score": 97, "lastChange": 1, "reason": "x"}
    done = await run("affinity", "apply", ctx("affinity", "affinity/apply", data={("scores", "mira"): record},
                                             inputs={"changes": {"value": [{"character": "Mira", "delta": 10, "reason": "saved her"}]}}))
    assert done.canonical_value["applied"] == [{"character": "mira", "name": "Mira", "delta": 10, "score": 100}]
    assert done.writes[0]["payload"]["operations"][0] == {"op": "inc", "path": "/score", "by": 3}


def test_affinity_projection_is_read_only_and_tiered() -> None:
    [extension] = hooks_of("affinity").extensions
    segment = extension.provider(hook_ctx("PostContextAssembly", "affinity"), {"data": {"scores": {"mira": {"name": "Mira", "score": 70}}}})
    assert segment["content"].endswith("Mira: 70 (devoted)") and segment["position"] == "post-history"


async def test_world_time_moves_by_the_turn_and_sleeping_dogs_are_not_sleep() -> None:
    start = await run("world-time", "context", ctx("world-time", "world-time/context", settings={"start": "Day 1, 19:30"}))
    assert start.canonical_value == {"day": 1, "time": "19:30", "period": "dusk", "minutes": 1170}
    sneak = await run("world-time", "advance", ctx("world-time", "world-time/advance", message="I sneak past the sleeping dog.",
                                                   inputs={"now": {"value": 1170}}))
    assert sneak.canonical_value["elapsedMinutes"] == 20
    sleep = await run("world-time", "advance", ctx("world-time", "world-time/advance", message="I go to bed.", inputs={"now": {"value": 1170}}))
    assert sleep.canonical_value["after"] == {"day": 2, "time": "07:00", "period": "morning"}
    bad = await run("world-time", "context", ctx("world-time", "world-time/context", settings={"start": "noonish"}))
    assert bad.status == "failed" and "not a time" in bad.reason


async def test_world_time_at_dusk_is_this_evening_and_chinese_words_do_not_fire_inside_others() -> None:
    def advance(message: str, now: int):
        return run("world-time", "advance", ctx("world-time", "world-time/advance", message=message, inputs={"now": {"value": now}}))

    late = await advance("At dusk I climb the cliff path to the lighthouse.", 20 * 60 + 30)
    assert late.canonical_value["after"] == {"day": 1, "time": "21:15", "period": "evening"}, "no jump to tomorrow's dusk"
    early = await advance("At dusk I climb the cliff path.", 14 * 60)
    assert early.canonical_value["after"]["time"] == "18:00" and early.canonical_value["reason"] == "waiting for dusk"
    waited = await advance("I wait until dusk.", 20 * 60)
    assert waited.canonical_value["after"] == {"day": 2, "time": "18:00", "period": "dusk"}, "until dusk means the next one"
    dog = await advance("我悄悄绕过睡着的狗。", 20 * 60)
    assert dog.canonical_value["elapsedMinutes"] == 20, "睡着的狗 is a sleeping dog, not sleep"
    bed = await advance("我去睡觉。", 20 * 60)
    assert bed.canonical_value["after"] == {"day": 2, "time": "07:00", "period": "morning"}
    bad = await run("world-time", "advance", ctx("world-time", "world-time/advance", inputs={"now": {"value": 0}}, settings={"minutesPerTurn": 0}))
    assert bad.status == "failed" and "outside 1..720" in bad.reason and bad.writes == []


async def test_dice_chinese_words_are_whole_words() -> None:
    for calm in ("我向米拉打听灯塔的事。", "我问游学者塞拉透镜的事。", "我忍不住笑了。"):
        done = await run("dice-check", "roller", ctx("dice-check", "dice-check/roller", message=calm))
        assert done.canonical_value == {"checks": []}, calm
    fight = await run("dice-check", "roller", ctx("dice-check", "dice-check/roller", message="我和强盗搏斗。"))
    assert [c["skill"] for c in fight.canonical_value["checks"]] == ["combat"]


async def test_chinese_item_names_get_distinct_stable_keys() -> None:
    done = await run("inventory", "apply", ctx("inventory", "inventory/apply", inputs={"changes": {"value": [
        {"item": "铜钥匙", "delta": 1, "reason": "捡到"}, {"item": "提灯", "delta": 1, "reason": "买了"}]}}))
    keys = [w["payload"]["key"] for w in done.writes]
    assert len(set(keys)) == 2 and all(re.fullmatch(r"item-[0-9a-f]{10}", key) for key in keys), keys
    assert [a["name"] for a in done.canonical_value["applied"]] == ["铜钥匙", "提灯"]
    again = await run("inventory", "apply", ctx("inventory", "inventory/apply", inputs={"changes": {"value": [
        {"item": "铜钥匙", "delta": -1, "reason": "用掉了"}]}}, data={("items", keys[0]): {"id": keys[0], "name": "铜钥匙", "quantity": 1,
                                                                                     "equipped": False}}))
    assert [w["type"] for w in again.writes] == ["plugin.data.delete"], "the same name finds the same record"


async def test_affinity_keys_characters_by_their_world_model_id() -> None:
    world = SimpleNamespace(characters=(
        {"id": "tobin", "name": "Old Tobin", "aliases": ["Tobin", "老托宾"]}, {"id": "mira", "name": "Mira", "aliases": ["米拉"]}))
    changes = [{"character": "Old Tobin", "delta": 2, "reason": "thanked"}, {"character": "老托宾", "delta": 1, "reason": "谢谢"},
               {"character": "MIRA", "delta": -1, "reason": "ignored"}, {"character": "the dog", "delta": 3, "reason": "fed"},
               {"character": "渔夫", "delta": 1, "reason": "帮忙"}]
    context = ctx("affinity", "affinity/apply", inputs={"changes": {"value": changes}})
    context.world = world
    done = await run("affinity", "apply", context)
    applied = [(a["character"], a["name"], a["score"]) for a in done.canonical_value["applied"]]
    assert applied[:4] == [("tobin", "Old Tobin", 2), ("tobin", "Old Tobin", 3), ("mira", "Mira", -1), ("the-dog", "the dog", 3)]
    assert re.fullmatch(r"character-[0-9a-f]{10}", applied[4][0]) and applied[4][1] == "渔夫"


# ---- narrator, cost-gate, history-compaction ----------------------------------------------------

def _hook(plugin_id: str, event: str):
    return next(h for h in hooks_of(plugin_id).hooks if h.event == event)


def test_narrator_person_setting_reaches_only_its_own_prompt() -> None:
    hook = _hook("narrator", "PostContextAssembly")
    third = hook.handler(hook_ctx("PostContextAssembly", "narrator", "narrator", {"person": "third"}), {"systemPrompt": "P"})
    assert third["replace"]["systemPrompt"].startswith("P\n\nNarrative person: third.")
    zh = hook.handler(hook_ctx("PostContextAssembly", "narrator", "narrator", locale="zh"), {"systemPrompt": "P"})
    assert "第二人称" in zh["replace"]["systemPrompt"]
    assert hook.handler(hook_ctx("PostContextAssembly", "guide", "guide", handler="narrator"), {"systemPrompt": "P"}) is None
    with pytest.raises(ValueError, match="person must be one of second, third, not 'first'"):
        hook.handler(hook_ctx("PostContextAssembly", "narrator", "narrator", {"person": "first"}), {"systemPrompt": "P"})


@pytest.mark.usefixtures("memory_state")
async def test_cost_gate_caps() -> None:
    count, schedule, start = _hook("cost-gate", "PostLLMResponse"), _hook("cost-gate", "PreSchedule"), _hook("cost-gate", "TurnStart")
    settings = {"softCapTokens": 5, "hardCapTokens": 12}
    context = hook_ctx("PostLLMResponse", "cost-gate", settings=settings)
    await count.handler(context, {"response": {"content": "one two three", "toolCalls": []}, "messages": [{"content": "four five"}]})
    triggered = {"triggered": [{"name": "guide", "stage": "post-turn"}, {"name": "narrator", "stage": "narrative"}]}
    assert (await schedule.handler(hook_ctx("PreSchedule", "cost-gate", settings=settings), triggered))["replace"] == {"triggered": [triggered["triggered"][1]]}
    assert await start.handler(hook_ctx("TurnStart", "cost-gate", settings=settings), {}) == {"action": "continue"}
    await count.handler(context, {"response": {"content": "a b c d e f g h"}, "messages": []})
    stopped = await start.handler(hook_ctx("TurnStart", "cost-gate", settings=settings), {})
    assert stopped["action"] == "abort" and "hard cap of 12" in stopped["reason"]


@pytest.mark.usefixtures("memory_state")
async def test_cost_gate_counts_the_providers_usage_and_keeps_story_runtimes_by_visibility() -> None:
    count, schedule, start = _hook("cost-gate", "PostLLMResponse"), _hook("cost-gate", "PreSchedule"), _hook("cost-gate", "TurnStart")
    settings = {"softCapTokens": 1000, "hardCapTokens": 1500}
    context = HookContext(ExecutionView("PostLLMResponse", "usage-session", "t1", "en", ("cost-gate",),
                                        plugin_settings={"cost-gate": settings}), "cost-gate")
    # The kernel's payload carries the provider's usage: that, not the words, is what counts.
    payload = {"response": {"content": "a b c", "toolCalls": [], "usage": {"promptTokens": 700, "completionTokens": 300,
                                                                               "totalTokens": 1000}},
               "messages": [{"role": "user", "content": "many words " * 50}]}
    await count.handler(context, payload)
    in_session = HookContext(ExecutionView("PreSchedule", "usage-session", "t2", "en", ("cost-gate",),
                                           plugin_settings={"cost-gate": settings}), "cost-gate")
    triggered = {"triggered": [{"name": "world-time/context", "stage": "pre-turn", "visibility": "internal"},
                               {"name": "narrator", "stage": "narrative", "visibility": "story"},
                               {"name": "chat-mode/narrate", "stage": "narrative-late", "visibility": "story"},
                               {"name": "helper", "stage": "narrative", "visibility": "internal"}]}
    kept = (await schedule.handler(in_session, triggered))["replace"]["triggered"]
    assert [entry["name"] for entry in kept] == ["narrator", "chat-mode/narrate"], "visibility decides, not the stage name"
    assert await start.handler(in_session, {}) == {"action": "continue"}, "1000 tokens: past the soft cap, under the hard one"
    await count.handler(context, {"response": {"usage": {"totalTokens": 500}}, "messages": []})
    stopped = await start.handler(in_session, {})
    assert stopped["action"] == "abort" and "used 1500 tokens, past its hard cap of 1500" in stopped["reason"]
    await _hook("cost-gate", "SessionEnd").handler(in_session, {"sessionId": "usage-session"})
    assert await start.handler(in_session, {}) == {"action": "continue"}, "SessionEnd forgets the count"


async def test_cost_gate_reads_the_count_once_a_turn() -> None:
    """TurnStart's read serves the same turn's PreSchedule; a PreSchedule whose TurnStart it did not see reads itself."""
    state = MemoryState()
    reads: list[str] = []
    access = state.access

    async def counted(session_id, plugin_id, op, key, value=None):
        reads.extend([op] if op == "get" else [])
        return await access(session_id, plugin_id, op, key, value)

    state.access = counted  # type: ignore[method-assign]
    token = STATE_BACKEND.set(state)
    try:
        schedule, start = _hook("cost-gate", "PreSchedule"), _hook("cost-gate", "TurnStart")
        settings = {"softCapTokens": 5, "hardCapTokens": 100}
        state.values[("s1", "cost-gate", "usedTokens")] = 7

        def ctx(event: str, turn: str) -> HookContext:
            return HookContext(ExecutionView(event, "s1", turn, "en", ("cost-gate",), plugin_settings={"cost-gate": settings}), "cost-gate")

        triggered = {"triggered": [{"name": "guide", "stage": "post-turn"}, {"name": "narrator", "stage": "narrative"}]}
        assert await start.handler(ctx("TurnStart", "turn-a"), {}) == {"action": "continue"}
        assert (await schedule.handler(ctx("PreSchedule", "turn-a"), triggered))["replace"] == {"triggered": [triggered["triggered"][1]]}
        assert reads == ["get"], "one read for the turn's two events"
        assert (await schedule.handler(ctx("PreSchedule", "turn-b"), triggered))["replace"]
        assert reads == ["get", "get"], "a turn whose TurnStart went elsewhere reads the count itself"
    finally:
        STATE_BACKEND.reset(token)


@pytest.mark.usefixtures("memory_state")
async def test_cost_gate_refuses_caps_that_are_not_token_counts() -> None:
    start = _hook("cost-gate", "TurnStart")
    for bad in ({"hardCapTokens": "lots"}, {"softCapTokens": -1}, {"hardCapTokens": 2.5}, {"softCapTokens": True}):
        with pytest.raises(ValueError, match="must be a whole number of tokens >= 0"):
            await start.handler(hook_ctx("TurnStart", "cost-gate", settings=bad), {})


def test_history_compaction_summarises_the_folded_turns_within_the_target() -> None:
    [extension] = hooks_of("history-compaction").extensions
    messages = []
    for n in range(1, 6):
        messages += [{"seq": 2 * n, "role": "player", "text": f"I do thing {n}."},
                     {"seq": 2 * n + 1, "role": "story", "text": f"Thing {n} happens. More text follows."}]
    answer = extension.provider(hook_ctx("PreCompaction", "history-compaction"), {"messages": messages, "targetChars": 4000, "locale": "en"})
    assert answer["summary"].splitlines()[0] == "The player: I do thing 1. → Thing 1 happens."
    assert len(answer["summary"].splitlines()) == 5
    short = extension.provider(hook_ctx("PreCompaction", "history-compaction"),
                               {"messages": messages, "previousSummary": "Long ago.", "targetChars": 100, "locale": "en"})
    assert len(short["summary"]) <= 100 and short["summary"].endswith("Thing 5 happens."), "the oldest lines go first"


def test_history_compaction_refuses_a_request_that_is_not_its_input() -> None:
    [extension] = hooks_of("history-compaction").extensions
    context = hook_ctx("PreCompaction", "history-compaction")
    for bad, why in (({"messages": "I do a thing.", "targetChars": 100}, "messages must be a list"),
                     ({"messages": [{"seq": 1, "role": "player", "text": 5}]}, "messages must be a list"),
                     ({"messages": [], "targetChars": 0}, "targetChars must be a positive whole number, not 0"),
                     ({"messages": [], "targetChars": "short"}, "targetChars must be a positive whole number"),
                     ({"messages": [], "previousSummary": {"text": "x"}}, "previousSummary must be text")):
        with pytest.raises(ValueError, match=why):
            extension.provider(context, bad)
    zh = extension.provider(context, {"messages": [{"seq": 1, "role": "player", "text": "我推开门。"},
                                                   {"seq": 2, "role": "story", "text": "门吱呀一声开了。屋里很暗。"}], "locale": "zh"})
    assert zh == {"summary": "玩家：我推开门。 → 门吱呀一声开了。"}


# ---- the scripted model's replies for them ------------------------------------------------------

def test_scripted_model_fills_the_plugins_schemas_with_valid_on_topic_data() -> None:
    import jsonschema

    system = 'x\n<inventory>\n- brass-lantern | {"name":"brass lantern","quantity":1,"equipped":false}\n</inventory>'
    changes = structured_reply("inventory.changes-1", None, [Message("system", system)], "I pick up the old rope and light the lantern.", "s")
    assert changes == {"changes": [{"item": "old rope", "delta": 1, "reason": "the player took the old rope"},
                                   {"item": "brass lantern", "delta": 0, "equip": True, "reason": "the player took the brass lantern in hand"}]}
    schema = json.loads((PLUGINS / "inventory/schemas/changes.schema.json").read_text())
    jsonschema.validate(changes, schema)
    guide_schema = json.loads((PLUGINS / "guide/schemas/scene-prompts.schema.json").read_text())
    jsonschema.validate(structured_reply("scene-prompts-1", guide_schema, [Message("system", "")], "I wait.", "s"), guide_schema)
    digest = {"digest": {"value": {"playerMessage": "I hide the key under the stone.", "narrativeText": "..."}}}
    system = f"<runtime-inputs>\n{json.dumps(digest)}\n</runtime-inputs>"
    name, args = planned_tool_call([Message("system", system)], [Tool("memories-upsert", "", {})], "auto", "")
    record_schema = json.loads((PLUGINS / "memory/schemas/memory.schema.json").read_text())
    jsonschema.validate(args["value"], record_schema)
    assert name == "memories-upsert" and args["value"]["text"] == "The player chose to hide the key under the stone."


