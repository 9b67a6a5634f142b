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


def _system_with_inputs(inputs: dict) -> str:
    import json

    return f"You tell the story.\n<runtime-inputs>\n{json.dumps(inputs)}\n</runtime-inputs>"


def test_a_fired_story_event_is_staged_by_its_plan_else_its_cue() -> None:
    cue = {"turn": 2, "events": [{"id": "light", "cue": "A small light climbs the cliff path."},
                                 {"id": "bell", "cue": "A ship's bell rings three times."}]}
    plan = {"events": [{"id": "light", "entrance": "Tobin lowers his voice.", "beats": ["Tobin lowers his voice.", "He saw a lantern climb."]}]}
    story = write_story("I ask Tobin about the lamp.", "seed", system=_system_with_inputs(
        {"storyEvent": {"value": cue}, "storyEventPlan": {"value": plan}}))
    texts = [segment["text"] for segment in story["segments"]]
    assert texts[1:3] == ["Tobin lowers his voice. He saw a lantern climb.", "A ship's bell rings three times."]
    quiet = write_story("I ask Tobin about the lamp.", "seed", system=_system_with_inputs({"storyEvent": {"value": {"turn": 2, "events": []}}}))
    assert not any("lantern climb" in segment["text"] for segment in quiet["segments"])
