"""The model-hidden bookkeeping fields, per the spec's table and reference rules."""

from shared.plugin_sdk.model_view import model_facing

A = "0b6c3e8e-1f1d-4a61-9a0e-3b2f8f0c1a11"
B = "7d3f2c9a-5b4e-4c3d-8e2f-1a0b9c8d7e66"


def test_the_table() -> None:
    value = {
        "id": A, "ownerId": B, "tagIds": [A, B], "createdAt": "2026-12-02T10:00:00Z", "timestamp": "2026-12-02T10:00:00.5+01:00",
        "sessionId": "anything", "name": "Lin", "date": "1943-06-01T08:00:00Z", "bornAt": "spring of 1943",
    }
    assert model_facing(value) == {"name": "Lin", "date": "1943-06-01T08:00:00Z", "bornAt": "spring of 1943"}
    assert model_facing({"id": "npc-lin-yao"}) == {"id": "npc-lin-yao"}


def test_a_uuid_another_record_points_to_is_kept_everywhere() -> None:
    value = {"entities": [{"id": A, "name": "Lin"}, {"id": B, "name": "Chen"}],
             "relations": [{"from": A, "to": B, "kind": "ally"}], "events": [{"participantIds": [A], "what": "met"}]}
    assert model_facing(value) == value


def test_a_record_repeating_its_own_uuid_is_not_a_reference() -> None:
    value = {"id": A, "name": "Lin", "self": {"ownerId": A, "note": "x"}, "history": [A]}
    assert model_facing(value) == {"name": "Lin", "self": {"note": "x"}, "history": [A]}
    child = {"id": A, "children": [{"id": "chapter-1", "parentId": A}]}
    assert model_facing(child) == child, "a sub-record with its own id pointing to the parent is a reference"


def test_input_is_not_changed() -> None:
    value = {"id": A, "n": 1}
    model_facing(value)
    assert value == {"id": A, "n": 1}


def test_runtime_inputs_block_projects_values() -> None:
    from services.scheduler.agent.context import runtime_inputs_block

    block = runtime_inputs_block({"facts": {"value": {"id": A, "text": "the door is red", "updatedAt": "2026-01-01T00:00:00Z"}}})
    assert block.startswith("<runtime-inputs>") and "the door is red" in block
    assert A not in block and "updatedAt" not in block
    assert runtime_inputs_block({}) == ""


def test_self_data_rows() -> None:
    from services.scheduler.execution.self_data import self_data_block
    from tests.scheduler.compiled import compiled_manifest

    def declared(**written):
        return compiled_manifest({"io": {"selfData": [written]}}).io.self_data[0]

    entries = {"lantern": {"id": "lantern", "lit": True, "updatedAt": "2026-01-01T00:00:00Z"}, "note": {"text": "x" * 300}}
    block = self_data_block(declared(namespace="facts", **{"as": "<known-facts>"}, format="summary", maxEntries=50), entries)
    lines = block.splitlines()
    assert lines[0] == "<known-facts>" and lines[-1] == "</known-facts>"
    assert lines[1] == '- lantern | {"lit":true}'
    assert lines[2].startswith("- note | ") and len(lines[2]) == len("- note | ") + 200 and lines[2].endswith("…")
    assert self_data_block(declared(namespace="facts", maxEntries=1), entries).count("\n- ") == 1


def test_story_problems_for_the_repair_request() -> None:
    from services.scheduler.execution.story_output import story_problems

    assert story_problems('{"segments": [{"kind": "narration", "text": "Rain."}]}') == []
    assert story_problems("Just prose.") == ["the reply is plain text, not the JSON object with segments"]
    assert story_problems('{"segments": []}') == ["segments is missing or empty"]
    assert story_problems('{"segments": [{"kind": "song", "text": "la"}, {"kind": "dialogue", "text": "hi"}]}') == [
        "segments[0].kind 'song' is not narration, dialogue or action", "segments[1] is dialogue without a speaker"]
