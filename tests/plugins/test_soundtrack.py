"""soundtrack in process: the scene's track (from scene-stage's stage or the story's scene cue), a change
on a mood cue, an override, what is committed and shown, and a world without tracks."""

from __future__ import annotations

import json

import jsonschema

from shared.settings import REPO_ROOT
from tests.plugins.stage_world import WORLD_ID, records, world_ctx, writes_of
from tests.plugins.test_builtin_plugins import run

PLUGIN = REPO_ROOT / "plugins" / "soundtrack"
TRACKS = {("tracks", key): value for key, value in records("music/tracks.yaml").items()}


def schema(name: str) -> dict:
    return json.loads((PLUGIN / "schemas" / name).read_text())


def test_the_fixture_worlds_tracks_fit_the_schema() -> None:
    for track in records("music/tracks.yaml").values():
        jsonschema.validate(track, schema("track.schema.json"))
    jsonschema.validate({"id": "x", "title": "X"}, {"type": "object"})
    try:
        jsonschema.validate({"id": "x", "title": "No source"}, schema("track.schema.json"))
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("a track needs a file or a url")


async def test_the_first_scene_starts_its_track_and_the_change_is_shown() -> None:
    stage = {"scene": {"id": "inn", "name": "The Drowned Lantern", "kind": "inn", "tags": ["inn", "tavern"]}, "actors": [], "since": 1, "turn": 1}
    done = await run("soundtrack", "scene", world_ctx("soundtrack", "soundtrack/scene", data=TRACKS, inputs={"stage": {"value": stage}}))
    assert done.status == "success", done.reason
    playing = writes_of(done)[("playing", "current")]
    jsonschema.validate(playing, schema("playing.schema.json"))
    assert playing["track"] == {"id": "hearth", "title": "By the Hearth", "src": "music/hearth.ogg", "source": "world", "loop": True}
    assert (playing["why"], playing["since"], playing["scene"], playing["worldId"]) == ("scene", 1, "inn", WORLD_ID)
    assert done.canonical_value == {"changed": True, "track": "hearth", "why": "scene", "reason": "scene: inn", "scene": "inn"}
    # cue runs next: no mood to follow, so it announces the scene's change (the turn's last).
    assert not done.shown
    cue = await run("soundtrack", "cue", world_ctx("soundtrack", "soundtrack/cue", data={**TRACKS, ("playing", "current"): playing},
                                                   inputs={"scene": {"value": done.canonical_value}}))
    assert cue.canonical_value["changed"] is False and not cue.writes
    assert cue.shown["notifications"] == [{"level": "info", "title": "Music", "text": "Now playing: By the Hearth"}]
    assert cue.shown["ui"] == [{"id": "soundtrack-now-playing", "slot": "message", "title": "Music", "parts": [
        {"type": "text", "text": "♪ By the Hearth"}, {"type": "kv", "label": "because of", "value": "scene: inn"}]}]
    # The same scene the next turn: the music goes on, nothing is written.
    again = await run("soundtrack", "scene", world_ctx("soundtrack", "soundtrack/scene", data={**TRACKS, ("playing", "current"): playing},
                                                       inputs={"stage": {"value": stage}}, turn=2))
    assert again.canonical_value["changed"] is False and not again.writes and not again.shown


async def test_without_scene_stage_the_story_scene_cue_picks_the_track() -> None:
    playing = {"track": {"id": "hearth", "title": "By the Hearth", "src": "music/hearth.ogg", "source": "world", "loop": True},
               "why": "scene", "since": 1, "scene": "inn"}
    done = await run("soundtrack", "scene", world_ctx("soundtrack", "soundtrack/scene", data={**TRACKS, ("playing", "current"): playing},
                                                      inputs={"cues": {"value": {"scene": "The rainy quay", "mood": "tense"}}}, turn=4))
    written = writes_of(done)[("playing", "current")]
    assert written["track"]["id"] == "tide" and written["previous"] == "hearth" and written["since"] == 4
    # A scene no track fits keeps the music (and notes the scene).
    other = await run("soundtrack", "scene", world_ctx("soundtrack", "soundtrack/scene", data={**TRACKS, ("playing", "current"): playing},
                                                       inputs={"cues": {"value": {"scene": "A bakery"}}}, turn=4))
    assert other.canonical_value["changed"] is False and not other.shown
    # Nothing plays and nothing fits: the world's default track.
    first = await run("soundtrack", "scene", world_ctx("soundtrack", "soundtrack/scene", data=TRACKS, inputs={"cues": {"value": {"scene": "A bakery"}}}))
    assert writes_of(first)[("playing", "current")]["why"] == "default"


async def test_a_mood_cue_changes_the_music_unless_the_track_fits_it() -> None:
    playing = {"track": {"id": "hearth", "title": "By the Hearth", "src": "music/hearth.ogg", "source": "world", "loop": True},
               "why": "scene", "since": 1, "scene": "inn"}
    data = {**TRACKS, ("playing", "current"): playing}
    warm = await run("soundtrack", "cue", world_ctx("soundtrack", "soundtrack/cue", data=data, inputs={"cues": {"value": {"mood": "Warm"}}}, turn=2))
    assert warm.canonical_value["changed"] is False and not warm.writes
    tense = await run("soundtrack", "cue", world_ctx("soundtrack", "soundtrack/cue", data=data, inputs={"cues": {"value": {"mood": "tense"}}},
                                                     turn=2, locale="zh"))
    written = writes_of(tense)[("playing", "current")]
    assert written["track"] == {"id": "squall", "title": "Squall", "src": "https://example.com/music/squall.ogg", "source": "url",
                                "loop": False, "volume": 0.8, "credit": "Example Composer (CC-BY)"}
    assert (written["why"], written["mood"], written["scene"]) == ("mood", "tense", "inn")
    assert tense.shown["notifications"][0] == {"level": "info", "title": "配乐", "text": "正在播放：Squall"}
    unknown = await run("soundtrack", "cue", world_ctx("soundtrack", "soundtrack/cue", data=data, inputs={"cues": {"value": {"mood": "giddy"}}}))
    assert unknown.canonical_value["changed"] is False and not unknown.writes
    held = await run("soundtrack", "cue", world_ctx("soundtrack", "soundtrack/cue", data=data, inputs={"cues": {"value": {"mood": "tense"}}},
                                                    settings={"holdTurns": 3}, turn=2))
    assert held.canonical_value["reason"] == "the track holds" and not held.writes
    off = await run("soundtrack", "cue", world_ctx("soundtrack", "soundtrack/cue", data=data, inputs={"cues": {"value": {"mood": "tense"}}},
                                                   settings={"followMood": False}))
    assert not off.writes


async def test_an_override_wins_over_the_mood() -> None:
    playing = {"track": {"id": "hearth", "title": "By the Hearth", "src": "music/hearth.ogg", "source": "world", "loop": True},
               "why": "scene", "since": 1, "scene": "inn"}
    data = {**TRACKS, ("playing", "current"): playing}
    overrides = [{"track": "no-such-track"}, {"track": "dark-lamp", "reason": "the lamp goes out"}]
    done = await run("soundtrack", "cue", world_ctx("soundtrack", "soundtrack/cue", data=data, turn=5,
                                                    inputs={"cues": {"value": {"mood": "tense"}}, "overrides": {"value": overrides}}))
    written = writes_of(done)[("playing", "current")]
    assert (written["track"]["id"], written["why"], written["reason"]) == ("dark-lamp", "override", "the lamp goes out")


async def test_a_world_without_tracks_plays_nothing_and_a_broken_track_fails_cleanly() -> None:
    done = await run("soundtrack", "scene", world_ctx("soundtrack", "soundtrack/scene", inputs={"cues": {"value": {"scene": "The quay"}}}))
    assert done.canonical_value["changed"] is False and not done.writes
    broken = {("tracks", "bad"): {"id": "bad", "title": "Bad", "scenes": ["quay"]}}
    failed = await run("soundtrack", "scene", world_ctx("soundtrack", "soundtrack/scene", data=broken, inputs={"cues": {"value": {"scene": "The quay"}}}))
    assert failed.status == "failed" and "neither a file nor a url" in failed.reason and not failed.writes


async def test_story_cues_keep_the_scene_and_the_mood() -> None:
    story = {"segments": [{"kind": "narration", "text": "x"}], "cues": {"scene": "The quay", "mood": " tense ", "present": ["Mira"]}}
    done = await run("soundtrack", "story-cues", world_ctx("soundtrack", "soundtrack/story-cues", inputs={"story": {"value": story}}))
    assert done.canonical_value == {"scene": "The quay", "mood": "tense"}
    assert (await run("soundtrack", "story-cues", world_ctx("soundtrack", "soundtrack/story-cues"))).canonical_value == {}


def test_a_world_with_a_missing_or_broken_music_file_fails_to_load(tmp_path) -> None:
    """What `covel validate-world` (and the registry's scan) say about a world whose tracks a session could not import."""
    import shutil
    import subprocess
    import sys

    from tests.plugins.stage_world import WORLD_DIR

    def validate(edit) -> str:
        world = tmp_path / edit.__name__ / "lantern-night"
        shutil.copytree(WORLD_DIR, world)
        edit(world)
        done = subprocess.run([sys.executable, "-m", "covel_cli.main", "validate-world", str(world)], capture_output=True, text=True,
                              cwd=REPO_ROOT, env={**__import__("os").environ, "COVEL_PLUGIN_DIRS": str(REPO_ROOT / "plugins")})
        assert done.returncode == 1, done.stdout + done.stderr
        return done.stdout

    def missing_source(world):
        (world / "world.yaml").write_text((world / "world.yaml").read_text() + "data:\n  - to: contract:soundtrack.tracks@1\n"
                                          "    source: {path: music/more-tracks.yaml}\n")

    def no_file_nor_url(world):
        (world / "music" / "tracks.yaml").write_text("- {id: silent, title: Silent, scenes: [inn]}\n")

    def escaping_path(world):
        (world / "music" / "tracks.yaml").write_text("- {id: up, title: Up, file: ../../secret.ogg}\n")

    assert "music/more-tracks.yaml" in validate(missing_source)
    broken = validate(no_file_nor_url)
    assert "data-record-invalid" in broken and "soundtrack" in broken
    assert "data-record-invalid" in validate(escaping_path)
