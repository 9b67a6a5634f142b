"""ctx.world: the committed world plus finished upstream world proposals, frozen all the way down."""

from __future__ import annotations

import pytest

from covel.store.v1 import store_pb2
from services.scheduler.execution.world_view import WorldView
from shared.plugin_sdk import thaw
from shared.structs import to_struct, to_value


def proposal(kind: str, payload: dict) -> store_pb2.Proposal:
    return store_pb2.Proposal(id=kind, type=kind, plugin_id="p", runtime_id="p/r", payload=to_struct(payload))


WORLD = store_pb2.GetWorldResponse(
    character_schema_version=1,
    character_schema=to_struct({"types": ["npc"], "attributes": {}}),
    characters=[store_pb2.Character(id="npc-a", version=2, data=to_struct({"name": "Ada", "tags": ["x"]}))],
    dimensions=[store_pb2.Dimension(id="weather", name="Weather", schema=to_struct({"type": "string"}), value=to_value("rain"), version=1)],
)


def test_upstream_world_proposals_show_on_top_of_the_committed_world() -> None:
    world = WorldView(WORLD, [
        proposal("character.upsert", {"characterId": "npc-b", "expectedVersion": 0, "character": {"name": "Bo"}}),
        proposal("character.upsert", {"characterId": "npc-a", "expectedVersion": 2, "character": {"name": "Ada the Bold"}}),
        proposal("dimension.update", {"updates": [{"id": "weather", "value": "sun", "expectedVersion": 1}]}),
        proposal("character.schema.set", {"types": ["npc", "player"], "attributes": {}}),
    ])
    assert [(c["id"], c["name"], c["version"]) for c in world.characters] == [("npc-a", "Ada the Bold", 3), ("npc-b", "Bo", 1)]
    assert (world.dimensions["weather"]["value"], world.dimensions["weather"]["version"]) == ("sun", 2)
    assert list(world.characterSchema["types"]) == ["npc", "player"]


def test_the_world_view_is_frozen_and_thaw_gives_a_copy() -> None:
    world = WorldView(WORLD)
    with pytest.raises(TypeError):
        world.characters[0]["name"] = "Eve"
    with pytest.raises(TypeError):
        world.dimensions["weather"] = {}
    with pytest.raises(AttributeError):
        world.characters[0]["tags"].append("y")
    with pytest.raises(TypeError):
        world.characters = ()
    copy = thaw(world.characters)
    copy[0]["name"] = "Eve"
    assert world.characters[0]["name"] == "Ada"


def test_seats_are_the_sessions_frozen_with_the_character_each_plays() -> None:
    seats = [store_pb2.Seat(id="main", role="player", character_id="aya", character_ids=["aya", "bram"]),
             store_pb2.Seat(id="gm", role="director")]
    view = WorldView(store_pb2.GetWorldResponse(), seats=seats)
    assert thaw(view.seats) == [{"id": "main", "role": "player", "currentCharacterId": "aya", "characterIds": ["aya", "bram"]},
                                {"id": "gm", "role": "director", "currentCharacterId": None, "characterIds": []}]
    with pytest.raises(TypeError):
        view.seats[0]["currentCharacterId"] = "bram"  # type: ignore[index]


def test_the_runs_own_world_proposals_show_in_later_reads() -> None:
    """ctx.propose of an in-process handler (function/runtime.py) buffers into its view: the next read sees it."""
    world = WorldView(WORLD)
    first = world.characters
    assert world.characters is first, "the same object until the run buffers a world proposal"
    world.buffer("plugin.data", {"namespace": "n", "key": "k", "value": 1})
    assert world.characters is first, "plugin data changes nothing of the world"
    world.buffer("character.upsert", {"characterId": "npc-c", "expectedVersion": 0, "character": {"name": "Cy"}})
    world.buffer("dimension.update", {"updates": [{"id": "weather", "value": "fog", "expectedVersion": 1}]})
    assert [c["name"] for c in world.characters] == ["Ada", "Cy"] and world.dimensions["weather"]["value"] == "fog"
    assert [c["name"] for c in first] == ["Ada"], "what was read before stays as it was"


def test_views_of_one_turn_share_the_world_built_once_and_a_runs_own_proposals_stay_its_own() -> None:
    """The turn's cache (TurnShared.world_states): views of the same world and upstream share one frozen state;
    a run buffering its proposal gets its own state, the others' reads and sent values stay as they were."""
    cache: dict = {}
    upstream = [proposal("character.upsert", {"characterId": "npc-b", "expectedVersion": 0, "character": {"name": "Bo"}})]
    first, second = WorldView(WORLD, upstream, cache=cache), WorldView(WORLD, upstream, cache=cache)
    assert first.characters is second.characters and first.wire_data()["characters"] is second.wire_data()["characters"]
    assert WorldView(WORLD, cache=cache).characters is not first.characters, "another upstream, another state"
    sent = first.wire_data()
    first.buffer("dimension.update", {"updates": [{"id": "weather", "value": "fog", "expectedVersion": 1}]})
    assert first.dimensions["weather"]["value"] == "fog" and second.dimensions["weather"]["value"] == "rain"
    assert sent["dimensions"]["weather"]["value"] == "rain" and second.wire_data()["dimensions"]["weather"]["value"] == "rain"
    copy = first.as_data()
    copy["characters"][0]["name"] = "Eve"
    assert second.characters[0]["name"] == "Ada" and second.wire_data()["characters"][0]["name"] == "Ada"


async def test_gateway_evaluate_asks_for_a_verdict_at_temperature_zero_and_checks_it() -> None:
    import time

    from services.scheduler.function.services import EVALUATION, GatewayView, ModelCallFailed
    from tests.scheduler.agent_harness import FakeGateway, reply, runtime, scope

    gateway = FakeGateway([reply('{"verdict": true, "reason": "It names the tide."}'), reply('{"reason": "no verdict"}')])
    view = GatewayView(gateway, runtime(), scope(), "plugin", lambda: time.monotonic() + 60)
    assert await view.evaluate("The tide is in.", criteria="It says where the tide is.") == {"verdict": True, "reason": "It names the tide."}
    [sent] = gateway.requests
    assert sent.temperature == 0 and sent.response_format.name == "evaluation"
    assert "It says where the tide is." in sent.messages[0].content and sent.messages[-1].content == "The tide is in."
    assert EVALUATION["required"] == ["verdict", "reason"]
    with pytest.raises(ModelCallFailed, match="no boolean verdict"):
        await view.evaluate("x", criteria="y")
    with pytest.raises(ValueError, match="criteria"):
        await view.evaluate("x", criteria=" ")
