"""chat-mode-narrator in process: its settings hook, its manifest's story wiring, and the scripted model's plan."""

from __future__ import annotations

import importlib.util

import pytest

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


def _plan_module():
    spec = importlib.util.spec_from_file_location("chat_mode_plan", PLUGINS / PLUGIN / "runtimes" / "plan" / "handler.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Ctx:
    """What the plan function reads of its ctx; `policy` answers ctx.services.call (None: no provider)."""

    def __init__(self, inputs, settings=None, policy=None):
        self.inputs, self.user_settings, self.player_message, self.calls = inputs, settings or {}, "I wave.", []
        self.services = self
        self._policy = policy

    async def call(self, contract, args):
        self.calls.append((contract, args))
        return self._policy if self._policy is not None else {"ok": False, "error": {"code": "not-found"}}


CAST = {"scene": {"id": "inn", "name": "The inn"}, "present": [{"id": "mira", "name": "Mira"}, {"id": "tobin", "name": "Old  Tobin"},
                                                             {"id": "x", "name": "<b>Sela</b>"}, {"id": "sela", "name": "Sela"}]}
STORY = {"segments": [{"kind": "narration", "text": "Rain."}, {"kind": "dialogue", "speaker": "Sela", "text": "Hm."}], "cues": {"scene": "Pier"}}


async def test_the_plan_is_a_function_choosing_safe_names_and_calling_the_policy_once() -> None:
    """Divergence 12 of issue 40: a pre-turn function (no model call), safe names from the stage, else the last story."""
    plan = _plan_module()
    runtimes = {r.runtime_id: r.compiled for r in load_package(PLUGINS / PLUGIN, source="builtin").runtimes}
    assert runtimes[f"{PLUGIN}/plan"].type == "function" and runtimes[f"{PLUGIN}/narrate"].io.visibility == "story"
    check = {"checks": [{"outcome": "failure"}]}
    ctx = _Ctx({"cast": {"value": CAST}, "check": {"value": check}}, {"maxSpeakers": 2})
    answer = await plan.handler(ctx)
    assert answer == {"source": "cast", "scene": "The inn", "outcome": "failure",
                      "speakers": [{"name": "Mira", "characterId": "mira"}, {"name": "Old Tobin", "characterId": "tobin"}]}
    assert ctx.calls == [(plan.POLICY, {"candidates": ["Mira", "Old Tobin", "Sela"], "playerMessage": "I wave.", "maxSpeakers": 2})]
    # The policy orders and drops; a name it adds is not taken.
    ordered = await plan.handler(_Ctx({"cast": {"value": CAST}}, policy={"ok": True, "data": {"speakers": ["Sela", "Nobody", "Mira"]}}))
    assert ordered["source"] == "policy" and [s["name"] for s in ordered["speakers"]] == ["Sela", "Mira"]
    later = await plan.handler(_Ctx({"cast": {"value": {"scene": None, "present": []}}, "previous": {"value": STORY}}))
    assert later == {"source": "story", "scene": "Pier", "speakers": [{"name": "Sela"}]}
    nobody = _Ctx({})
    assert await plan.handler(nobody) == {"source": "none", "speakers": []} and nobody.calls == [], "no candidate: no policy call"
