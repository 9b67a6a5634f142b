"""The scripted story keeps its scene across a session and recalls the previous action."""

from services.gateway.providers.scripted.story_replies import write_story


def test_scene_stays_and_previous_action_is_recalled() -> None:
    first = write_story("I light the lantern.", "seed-1")
    second = write_story("I open the chest.", "seed-2", ("I light the lantern.",))
    third = write_story("I read the letter.", "seed-3", ("I light the lantern.", "I open the chest."))
    assert second["cues"]["scene"] == third["cues"]["scene"]
    assert second["cues"]["present"] == third["cues"]["present"]
    assert any("light the lantern" in segment["text"] for segment in second["segments"])
    assert any("open the chest" in segment["text"] for segment in third["segments"])
    recalls = ("Not long ago", "Ever since", "You have not forgotten")
    assert not any(segment["text"].startswith(recalls) for segment in first["segments"])
