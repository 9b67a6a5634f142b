"""character-blueprint in process: who is present after a turn (story cues, speakers, the stage's cast),
their media, the `present` records, and the profiles the story prompt gets."""

from __future__ import annotations

import json

import jsonschema

from shared.settings import REPO_ROOT
from tests.plugins.stage_world import WORLD_ID, blueprints, world_ctx, writes_of
from tests.plugins.test_builtin_plugins import hook_ctx, hooks_of, run

PLUGIN = REPO_ROOT / "plugins" / "character-blueprint"
PROFILES = {("profiles", key): value for key, value in blueprints().items()}


def schema(name: str) -> dict:
    return json.loads((PLUGIN / "schemas" / name).read_text())


def test_profiles_fit_the_blueprint_contract_and_bad_media_do_not() -> None:
    for profile in blueprints().values():
        jsonschema.validate(profile, schema("blueprint.schema.json"))
    for bad in ("../secret.png", "/etc/passwd", "C:\\x.png", "ftp://x/y.png"):
        try:
            jsonschema.validate({"media": {"avatar": bad}}, schema("blueprint.schema.json"))
        except jsonschema.ValidationError:
            continue
        raise AssertionError(bad)


async def test_presence_publishes_who_the_story_shows_with_their_media() -> None:
    story = {"segments": [{"kind": "narration", "text": "Rain."}, {"kind": "dialogue", "speaker": "Tobin", "text": "Friend!"}],
             "cues": {"present": ["Mira", "the dog", "Wren"]}}
    done = await run("character-blueprint", "presence", world_ctx("character-blueprint", "character-blueprint/presence", data=PROFILES,
                                                                 inputs={"story": {"value": story}}, turn=2))
    assert done.status == "success", done.reason
    out = done.canonical_value
    jsonschema.validate(out, schema("presence.schema.json"))
    assert [(c["id"], c["name"], c["since"]) for c in out["characters"]] == [("mira", "Mira", 2), ("tobin", "Old Tobin", 2)]
    assert out["characters"][0]["media"] == {"avatar": {"src": "media/mira-avatar.png", "source": "world"},
                                             "portrait": {"src": "media/mira-portrait.png", "source": "world"},
                                             "voice": {"src": "https://example.com/voices/mira.ogg", "source": "url"}}
    assert out["worldId"] == WORLD_ID and out["entered"] == ["mira", "tobin"] and out["left"] == [] and out["unresolved"] == ["the dog"]
    written = writes_of(done)
    jsonschema.validate(written[("present", "mira")], schema("present.schema.json"))
    assert written[("present", "mira")]["avatar"] == "media/mira-avatar.png" and written[("present", "tobin")]["role"] == "the innkeeper"
    assert written[("roster", "tobin")] == {"name": "Old Tobin", "aliases": ["Tobin", "老托宾"]} and ("roster", "wren") not in written


async def test_presence_keeps_who_stays_and_drops_who_left() -> None:
    earlier = {("present", "mira"): {"id": "mira", "name": "Mira", "since": 1, "lastSeen": 1, "media": {}},
               ("present", "tobin"): {"id": "tobin", "name": "Old Tobin", "since": 1, "lastSeen": 1, "media": {}}}
    # A story without cues only adds its speakers: who was there stays.
    speakers = {"segments": [{"kind": "dialogue", "speaker": "Sela", "text": "Hm."}]}
    done = await run("character-blueprint", "presence", world_ctx("character-blueprint", "character-blueprint/presence",
                                                                 data={**PROFILES, **earlier}, inputs={"story": {"value": speakers}}, turn=3))
    assert [c["id"] for c in done.canonical_value["characters"]] == ["sela", "mira", "tobin"]
    assert [c["since"] for c in done.canonical_value["characters"]] == [3, 1, 1]
    # cues.present lists the cast: who is not in it left.
    listed = {"segments": [{"kind": "narration", "text": "x"}], "cues": {"present": ["Sela"]}}
    done = await run("character-blueprint", "presence", world_ctx("character-blueprint", "character-blueprint/presence",
                                                                 data={**PROFILES, **earlier}, inputs={"story": {"value": listed}}, turn=3))
    assert done.canonical_value["left"] == ["mira", "tobin"] and writes_of(done)[("present", "mira")] is None
    # scene-stage's cast joins the story's.
    cast = {"scene": {"name": "The quay"}, "present": [{"id": "mira", "name": "Mira"}]}
    done = await run("character-blueprint", "presence", world_ctx("character-blueprint", "character-blueprint/presence", data=PROFILES,
                                                                 inputs={"story": {"value": listed}, "cast": {"value": cast}}, turn=3))
    assert [c["id"] for c in done.canonical_value["characters"]] == ["sela", "mira"]


def test_the_story_gets_the_profiles_of_who_is_present_or_named() -> None:
    [extension] = hooks_of("character-blueprint").extensions
    profiles = blueprints()
    present = {"mira": {"id": "mira", "name": "Mira", "since": 1, "media": {}}}
    segment = extension.provider(hook_ctx("PostContextAssembly", "character-blueprint"),
                                 {"visibility": "story", "playerMessage": "I ask Sela about the lens.", "locale": "en",
                                  "data": {"profiles": profiles, "present": present}})
    lines = segment["content"].splitlines()
    assert lines[0].startswith("Characters:") and segment["position"] == "system"
    assert lines[1].startswith("- Mira, the harbor-master (present): Looks: Tall, salt-grey coat")
    assert "Speech: Short sentences" in lines[1]
    assert lines[2].startswith("- Sela, a wandering scholar: Looks: Ink-stained") and len(lines) == 3
    # The roster the presence runtime keeps gives the names and aliases the player may use.
    roster = {"tobin": {"name": "Old Tobin", "aliases": ["Tobin"]}}
    segment = extension.provider(hook_ctx("PostContextAssembly", "character-blueprint"),
                                 {"visibility": "story", "playerMessage": "Tobin, a drink!", "data": {"profiles": profiles, "roster": roster}})
    assert segment["content"].splitlines()[1].startswith("- Old Tobin, the innkeeper: ")
    # Nobody known yet: the world's profiles, at most maxProfiles.
    first = extension.provider(hook_ctx("PostContextAssembly", "character-blueprint", settings={"maxProfiles": 2}),
                               {"visibility": "story", "playerMessage": "", "data": {"profiles": profiles}})
    assert len(first["content"].splitlines()) == 3
    zh = extension.provider(hook_ctx("PostContextAssembly", "character-blueprint", locale="zh"),
                            {"visibility": "story", "locale": "zh", "playerMessage": "", "data": {"profiles": profiles, "present": present}})
    assert "（在场）" in zh["content"] and "性格：" in zh["content"]
    assert extension.provider(hook_ctx("PostContextAssembly", "character-blueprint"), {"visibility": "story", "data": {}}) is None
    assert extension.provider(hook_ctx("PostContextAssembly", "character-blueprint"), {"visibility": "system", "data": {"profiles": profiles}}) is None


async def test_presence_takes_the_kernels_present_character_ids_too() -> None:
    story = {"segments": [{"kind": "narration", "text": "x"}], "presentCharacterIds": ["sela"], "cues": {"present": ["Sela"]}}
    done = await run("character-blueprint", "presence", world_ctx("character-blueprint", "character-blueprint/presence", data=PROFILES,
                                                                 inputs={"story": {"value": story}}))
    assert [c["id"] for c in done.canonical_value["characters"]] == ["sela"] and done.canonical_value["unresolved"] == []
