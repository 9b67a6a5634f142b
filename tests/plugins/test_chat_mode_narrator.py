"""chat-mode-narrator in process: its settings hook, its manifest's story wiring, and the scripted model's plan."""

from __future__ import annotations

import pytest

from services.gateway.providers.scripted.plugin_writers import writer_for
from services.gateway.providers.scripted.plugin_writers.chat_mode_narrator import names_of, write_plan
from services.registry.package_loader import load_package
from tests.plugins.test_builtin_plugins import PLUGINS, hook_ctx, hooks_of

PLUGIN = "chat-mode-narrator"


def _hook():
    return next(h for h in hooks_of(PLUGIN).hooks if h.event == "PostContextAssembly")


def test_the_settings_reach_both_runtimes_prompts_in_the_sessions_language() -> None:
    hook = _hook()
    third = hook.handler(hook_ctx("PostContextAssembly", PLUGIN, f"{PLUGIN}/narrate", {"person": "third", "maxSpeakers": 2}), {"systemPrompt": "P"})
    assert third["replace"]["systemPrompt"] == ("P\n\nNarrative person: third. Refer to the player's character by name or as he, she or they; "
                                                "never address them as \"you\".\nAt most 2 characters besides the player's speak this turn.")
    zh = hook.handler(hook_ctx("PostContextAssembly", PLUGIN, f"{PLUGIN}/plan", {}, locale="zh"), {"systemPrompt": "P"})
    assert zh["replace"]["systemPrompt"] == "P\n\n叙事人称：第二人称。用“你”称呼玩家的角色。\n这一回合除玩家的角色外，最多 3 个角色开口。"
    assert hook.handler(hook_ctx("PostContextAssembly", "narrator", "narrator"), {"systemPrompt": "P"}) is None
    with pytest.raises(ValueError, match="person must be one of second, third, not 'first'"):
        hook.handler(hook_ctx("PostContextAssembly", PLUGIN, f"{PLUGIN}/narrate", {"person": "first"}), {"systemPrompt": "P"})
    with pytest.raises(ValueError, match="maxSpeakers must be an integer from 1 to 6"):
        hook.handler(hook_ctx("PostContextAssembly", PLUGIN, f"{PLUGIN}/narrate", {"maxSpeakers": 0}), {"systemPrompt": "P"})


def test_plan_then_narrate_with_committed_and_optional_inputs() -> None:
    runtimes = {r.runtime_id: r.compiled for r in load_package(PLUGINS / PLUGIN, source="builtin").runtimes}
    plan, narrate = runtimes[f"{PLUGIN}/plan"], runtimes[f"{PLUGIN}/narrate"]
    assert plan.schedule.stage == "pre-turn" and narrate.schedule.stage == "narrative"
    assert narrate.io.visibility == "story" and narrate.io.output.contract == "narrative-engine@2" and narrate.io.output.record_as == "latest-story"
    previous = plan.io.inputs["previous"]
    assert (previous.scope, previous.record_as, previous.from_.runtime, previous.required) == ("committed", "latest-story", f"{PLUGIN}/narrate", False)
    assert narrate.io.inputs["plan"].from_.runtime == f"{PLUGIN}/plan"
    for runtime in (plan, narrate):
        assert runtime.io.inputs["cast"].from_.contract == "scene-cast@1"
        assert all(not spec.required for spec in runtime.io.inputs.values()), "works without any other plugin"


def test_the_scripted_plan_follows_the_stage_then_the_last_story() -> None:
    assert writer_for("plan", {"title": "chat-mode-narrator.plan@1"}) is not None
    cast = {"scene": {"name": "The inn"}, "present": [{"name": "Mira"}, {"name": "Old Tobin"}, {"name": "Sela"}]}
    check = {"checks": [{"outcome": "failure"}]}
    plan = write_plan("I climb the wall.", "At most 3 characters besides", {"cast": {"value": cast}, "check": {"value": check}}, "seed")
    assert [s["name"] for s in plan["speakers"]] == ["Mira", "Old Tobin"] and plan["scene"] == "The inn"
    assert plan["beats"][0] == {"beat": "The player's action: I climb the wall (it does not work)"}
    assert [b.get("speaker") for b in plan["beats"]] == [None, "Mira", "Old Tobin", "Mira"]
    assert write_plan("I climb the wall.", "", {"cast": {"value": cast}}, "seed") == write_plan("I climb the wall.", "", {"cast": {"value": cast}}, "seed")
    one = write_plan("I wave.", "At most 1 characters besides", {"cast": {"value": cast}}, "s")
    assert [s["name"] for s in one["speakers"]] == ["Mira"]
    story = {"segments": [{"kind": "narration", "text": "Rain."}, {"kind": "dialogue", "speaker": "Sela", "text": "Hm."}], "cues": {"scene": "Pier"}}
    later = write_plan("我问她灯塔的事。", "", {"previous": {"value": story}}, "s")
    assert [s["name"] for s in later["speakers"]] == ["Sela"] and later["scene"] == "Pier" and later["beats"][0]["beat"].startswith("玩家的行动")
    empty_stage = write_plan("I wait.", "", {"cast": {"value": {"scene": None, "present": []}}, "previous": {"value": story}}, "s")
    assert [s["name"] for s in empty_stage["speakers"]] == ["Sela"], "nobody placed on stage yet: the story's own speakers"
    nobody = write_plan("I wait.", "", {"cast": {"value": {"scene": None, "present": []}}}, "s")
    assert nobody["speakers"] == [] and nobody["beats"][-1] == {"beat": "the scene settles, waiting for the player's next move"}
    assert names_of(["Mira", {"name": "Tobin"}, "Mira"]) == ["Mira", "Tobin"]
