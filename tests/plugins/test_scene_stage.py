"""scene-stage in process: the seed, the cast, the story cues, the cues-only direction, the resolver's
merge (overrides, time of day, a new place's cast), the prompt segment and the scripted direction."""

from __future__ import annotations

import json

import jsonschema
import pytest

from services.gateway.chat import Message
from services.gateway.providers.scripted.story_replies import structured_reply
from shared.settings import REPO_ROOT
from tests.plugins.stage_world import WORLD_ID, characters, records, world_ctx, writes_of
from tests.plugins.test_builtin_plugins import hook_ctx, hooks_of, run

PLUGIN = REPO_ROOT / "plugins" / "scene-stage"
SCENES = {("scenes", key): value for key, value in records("stage/scenes.yaml").items()}


def schema(name: str) -> dict:
    return json.loads((PLUGIN / "schemas" / name).read_text())


def check(value, name: str) -> None:
    jsonschema.validate(value, schema(name))


async def seeded() -> dict:
    done = await run("scene-stage", "seed", world_ctx("scene-stage", "scene-stage/seed", data=SCENES))
    return writes_of(done)[("stage", "current")]


async def test_seed_sets_the_worlds_start_scene_once() -> None:
    stage = await seeded()
    check(stage, "stage.schema.json")
    assert stage["scene"]["id"] == "inn" and stage["scene"]["backdrop"] == {"src": "backdrops/inn.png", "source": "world"}
    assert [(a["id"], a["name"]) for a in stage["actors"]] == [("tobin", "Old Tobin"), ("mira", "Mira")]
    assert stage["worldId"] == WORLD_ID and stage["since"] == 1
    again = await run("scene-stage", "seed", world_ctx("scene-stage", "scene-stage/seed", data={**SCENES, ("stage", "current"): stage}, turn=2))
    assert again.canonical_value == {"seeded": False} and not again.writes
    empty = await run("scene-stage", "seed", world_ctx("scene-stage", "scene-stage/seed"))
    assert empty.canonical_value == {"seeded": False} and not empty.writes


async def test_cast_publishes_who_is_on_stage() -> None:
    stage = await seeded()
    done = await run("scene-stage", "cast", world_ctx("scene-stage", "scene-stage/cast", data={("stage", "current"): stage}))
    check(done.canonical_value, "cast.schema.json")
    assert done.canonical_value["scene"]["name"] == "The Drowned Lantern"
    assert [p["name"] for p in done.canonical_value["present"]] == ["Old Tobin", "Mira"] and not done.writes
    nothing = await run("scene-stage", "cast", world_ctx("scene-stage", "scene-stage/cast"))
    assert nothing.canonical_value == {"scene": None, "present": []}


async def test_story_cues_read_the_scene_the_mood_and_who_speaks() -> None:
    story = {"segments": [{"kind": "narration", "text": "Rain."}, {"kind": "dialogue", "speaker": "Sela", "text": "Hm."},
                          {"kind": "action", "speaker": "Old Tobin", "text": "He pours."}],
             "cues": {"scene": "The  quay", "present": ["Sela"], "mood": "tense"}}
    done = await run("scene-stage", "story-cues", world_ctx("scene-stage", "scene-stage/story-cues", inputs={"story": {"value": story}}))
    assert done.canonical_value == {"scene": "The quay", "mood": "tense", "present": ["Sela"], "speakers": ["Sela", "Old Tobin"]}
    none = await run("scene-stage", "story-cues", world_ctx("scene-stage", "scene-stage/story-cues"))
    assert none.canonical_value == {"present": [], "speakers": []}


async def test_direction_from_the_cues_alone_when_the_setting_says_so() -> None:
    from services.registry.package_loader import load_package
    from services.scheduler.function.runtime import run_function
    from shared.plugin_code import PluginFile

    stage = await seeded()
    [compiled] = [r.compiled for r in load_package(PLUGIN, source="builtin").runtimes if r.runtime_id == "scene-stage/direction"]
    cues = {"scene": "The lighthouse on Gull Point", "present": ["Sela"], "speakers": ["Sela"], "mood": "tense"}
    for setting, skipped in (("cues", True), ("agent", False)):
        context = world_ctx("scene-stage", "scene-stage/direction", data={**SCENES, ("stage", "current"): stage},
                            inputs={"cues": {"value": cues}}, settings={"direction": setting})
        done = await run_function(context, PluginFile("scene-stage", PLUGIN, compiled.guard), compiled.guard_timeout_ms, entry="guard")
        verdict = done.canonical_value if done.has_value else None
        assert bool(verdict and verdict.get("skip")) is skipped
        if skipped:
            direction = {k: v for k, v in verdict.items() if k != "skip"}
    check(direction, "stage-direction.schema.json")
    assert direction["scene"] == {"name": "The lighthouse", "id": "lighthouse"} and direction["enter"] == ["Sela"]


async def test_resolver_moves_the_scene_and_applies_performances() -> None:
    stage = await seeded()
    direction = {"scene": {"name": "the docks"}, "enter": ["Mira"], "exit": [], "reason": "you walk to the quay",
                 "performances": [{"character": "Mira", "pose": "holding a lantern", "expression": "worried", "position": "by the bollards"}]}
    done = await run("scene-stage", "resolver", world_ctx("scene-stage", "scene-stage/resolver", data={**SCENES, ("stage", "current"): stage},
                                                          inputs={"directions": {"value": [direction]}, "time": {"value": "night"}}, turn=3))
    assert done.status == "success", done.reason
    out = done.canonical_value
    check(out, "stage.schema.json")
    assert out["scene"]["id"] == "quay" and out["scene"]["backdrop"]["source"] == "url" and out["scene"]["timeOfDay"] == "night"
    assert [(a["name"], a.get("pose"), a.get("since")) for a in out["actors"]] == [("Mira", "holding a lantern", 3)]
    assert out["left"] == ["Old Tobin"] and out["entered"] == ["Mira"]
    assert set(out["changed"]) >= {"scene", "cast", "performance", "timeOfDay"} and out["since"] == 3
    assert writes_of(done)[("stage", "current")] == out
    assert done.shown["notifications"][0]["text"] == "The scene moves to The quay."


async def test_an_override_wins_over_the_agents_direction() -> None:
    stage = await seeded()
    agent = {"scene": {"id": "lighthouse", "name": "The lighthouse"}, "timeOfDay": "dusk", "enter": [], "exit": [],
             "performances": [{"character": "Old Tobin", "expression": "cheerful"}], "reason": "the agent"}
    event = {"timeOfDay": "midnight", "enter": [], "exit": [], "override": True, "reason": "the storm breaks",
             "performances": [{"character": "Tobin", "expression": "terrified", "pose": "under the table"}]}
    # The event comes first in the input (providers are sorted by runtime id): overrides still apply last.
    done = await run("scene-stage", "resolver", world_ctx("scene-stage", "scene-stage/resolver", data={**SCENES, ("stage", "current"): stage},
                                                          inputs={"directions": {"value": [event, {**agent, "scene": None}]}}, turn=2))
    out = done.canonical_value
    assert out["scene"]["id"] == "inn" and out["scene"]["timeOfDay"] == "midnight"
    tobin = next(a for a in out["actors"] if a["id"] == "tobin")
    assert (tobin["expression"], tobin["pose"]) == ("terrified", "under the table")
    assert out["reason"].endswith("the storm breaks")


async def test_resolver_without_directions_follows_the_cues_and_keeps_players_off_stage() -> None:
    stage = await seeded()
    cues = {"present": ["Old Tobin", "Wren"], "speakers": ["Old Tobin"], "scene": "The Drowned Lantern inn on the harbor"}
    done = await run("scene-stage", "resolver", world_ctx("scene-stage", "scene-stage/resolver", data={**SCENES, ("stage", "current"): stage},
                                                          inputs={"cues": {"value": cues}}, turn=2))
    out = done.canonical_value
    assert out["scene"]["id"] == "inn" and [a["name"] for a in out["actors"]] == ["Old Tobin"] and out["left"] == ["Mira"]
    assert not done.shown.get("notifications")


async def test_a_world_without_scenes_gets_its_stage_from_the_story() -> None:
    cues = {"scene": "A windy cliff", "present": ["Mira"], "speakers": []}
    done = await run("scene-stage", "resolver", world_ctx("scene-stage", "scene-stage/resolver", inputs={"cues": {"value": cues}}))
    assert done.canonical_value["scene"] == {"name": "A windy cliff"} and done.canonical_value["actors"][0]["id"] == "mira"
    nothing = await run("scene-stage", "resolver", world_ctx("scene-stage", "scene-stage/resolver"))
    assert nothing.canonical_value["scene"] is None and not nothing.writes


async def test_a_malformed_direction_fails_the_resolver_and_writes_nothing() -> None:
    stage = await seeded()
    bad = {"enter": [], "exit": [], "performances": [{"pose": "sitting"}]}
    done = await run("scene-stage", "resolver", world_ctx("scene-stage", "scene-stage/resolver", data={**SCENES, ("stage", "current"): stage},
                                                          inputs={"directions": {"value": [bad]}}, turn=2))
    assert done.status == "failed" and not done.writes


def test_the_stage_segment_tells_the_story_where_it_is() -> None:
    [extension] = hooks_of("scene-stage").extensions
    stage = {"scene": {"name": "The quay", "location": "the harbor", "timeOfDay": "night"}, "actors": [{"name": "Mira", "pose": "waiting"}],
             "since": 1, "turn": 1}
    segment = extension.provider(hook_ctx("PostContextAssembly", "scene-stage"), {"visibility": "story", "data": {"stage": {"current": stage}}})
    assert segment["content"].splitlines()[:2] == ["Scene: The quay (the harbor); night", "On stage: Mira (waiting)"]
    zh = extension.provider(hook_ctx("PostContextAssembly", "scene-stage", locale="zh"), {"visibility": "story", "locale": "zh",
                                                                                          "data": {"stage": {"current": stage}}})
    assert zh["content"].startswith("当前场景：The quay")
    assert extension.provider(hook_ctx("PostContextAssembly", "scene-stage"), {"visibility": "story", "data": {}}) is None


def rows(tag: str, values: dict) -> str:
    lines = [f"- {key} | {json.dumps(value)}" for key, value in values.items()] or ["(none yet)"]
    return f"<{tag}>\n" + "\n".join(lines) + f"\n</{tag}>"


@pytest.mark.parametrize("words, scene", [("I walk down to the docks.", "quay"), ("I ask Tobin about the lens.", None)])
async def test_scripted_direction_follows_the_players_move_and_the_story(words, scene) -> None:
    stage = await seeded()
    inputs = {"story": {"value": [{"kind": "narration", "text": "Rain."}, {"kind": "dialogue", "speaker": "Sela", "text": "You again."}]},
              "cues": {"value": {"present": ["Sela"], "speakers": ["Sela"], "mood": "tense", "scene": "The Drowned Lantern"}}}
    system = ("You are the stage manager.\n<runtime-inputs>\n" + json.dumps(inputs) + "\n</runtime-inputs>\n"
              + rows("stage", {"current": stage}) + "\n" + rows("scenes", records("stage/scenes.yaml")))
    contract = schema("stage-direction.schema.json")
    answer = structured_reply("stage-direction-1", contract, [Message(role="system", content=system), Message(role="user", content=words)],
                              words, "seed")
    jsonschema.validate(answer, contract)
    assert (answer["scene"] or {}).get("id") == scene
    assert answer["enter"] == ["Sela"] and answer["performances"][0] == {"character": "Sela", "pose": "facing you",
                                                                         "expression": "wary", "position": "near you"}
    assert characters()[0]["type"] == "player"
