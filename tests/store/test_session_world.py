"""CreateSession with a world (store_pb2.SessionWorld): the character schema, characters, dimensions
and opening are written with the session in one transaction; bad ones are refused naming the field."""

from __future__ import annotations

import grpc
import pytest

from covel.store.v1 import store_pb2
from shared.structs import from_struct, from_value, to_struct, to_value
from tests.store.helpers import expect_error, play_turn, violated_fields

WRITER = "world:tidefall"


def tidefall(**changes) -> store_pb2.SessionWorld:
    world = store_pb2.SessionWorld(
        character_schema=to_struct({"types": ["player", "npc"], "attributes": {"courage": {"type": "integer", "min": 0, "max": 10}}}),
        characters=[store_pb2.Character(id="ossa", data=to_struct({"name": "Ossa", "type": "npc", "attributes": {"courage": 2}})),
                    store_pb2.Character(id="wren", data=to_struct({"name": "Wren", "type": "player"}))],
        dimensions=[store_pb2.Dimension(id="dread", name="Dread", schema=to_struct({"type": "integer", "maximum": 5}), value=to_value(1))],
        opening="The tide goes out.",
        writer=WRITER,
    )
    for name, value in changes.items():
        if isinstance(value, list):
            del getattr(world, name)[:]
            getattr(world, name).extend(value)
        else:
            setattr(world, name, value)
    return world


async def create(stub, world: store_pb2.SessionWorld) -> store_pb2.Session:
    request = store_pb2.CreateSessionRequest(session=store_pb2.Session(world_id="tidefall", title="t"), world=world)
    return (await stub.CreateSession(request)).session


async def test_the_world_is_written_with_the_session(stub) -> None:
    session = await create(stub, tidefall())
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    assert world.character_schema_version == 1 and from_struct(world.character_schema)["types"] == ["player", "npc"]
    assert [(c.id, c.version, c.plugin_id, from_struct(c.data)["name"]) for c in world.characters] == [
        ("ossa", 1, WRITER, "Ossa"), ("wren", 1, WRITER, "Wren")]
    [dread] = world.dimensions
    assert (dread.id, dread.owner_plugin_id, dread.version, from_value(dread.value)) == ("dread", WRITER, 1, 1)
    [opening] = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages
    assert (opening.seq, opening.role, opening.text, opening.turn_id) == (1, "story", "The tide goes out.", "")
    assert from_struct(opening.metadata) == {"opening": True, "worldId": "tidefall"}
    # The first turn's messages follow the opening.
    await play_turn(stub, session.id, "The bells ring.")
    messages = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages
    assert [(m.seq, m.role) for m in messages] == [(1, "story"), (2, "player"), (3, "story")]


async def test_a_world_without_an_opening_or_schema(stub) -> None:
    session = await create(stub, store_pb2.SessionWorld(writer=WRITER, characters=[store_pb2.Character(id="a", data=to_struct({"name": "A"}))]))
    world = await stub.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
    assert world.character_schema_version == 0 and [c.id for c in world.characters] == ["a"]
    assert not (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages


def entry(namespace: str, key: str, value, plugin_id: str = "lore-keeper") -> store_pb2.PluginDataEntry:
    return store_pb2.PluginDataEntry(plugin_id=plugin_id, namespace=namespace, key=key, value=to_value(value))


FACTS_DATASET = store_pb2.DatasetPolicy(plugin_id="lore-keeper", namespace="facts", ops=["set"],
                                        schema=to_struct({"type": "object", "required": ["text"]}))


async def test_the_worlds_data_is_written_with_the_session(stub) -> None:
    world = tidefall(plugin_data=[entry("facts", "bells", {"text": "The bells ring."}), entry("_hidden.rules", "flood", {"then": "Water."})],
                     datasets=[FACTS_DATASET])
    session = await create(stub, world)
    entries = (await stub.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session.id))).entries
    assert [(e.plugin_id, e.namespace, e.key, from_value(e.value), e.turn_id) for e in entries] == [
        ("lore-keeper", "_hidden.rules", "flood", {"then": "Water."}, ""), ("lore-keeper", "facts", "bells", {"text": "The bells ring."}, "")]


@pytest.mark.parametrize(("world", "field"), [
    (tidefall(plugin_data=[entry("facts", "bells", {"note": "no text"})], datasets=[FACTS_DATASET]), "world.plugin_data[0]"),
    (tidefall(plugin_data=[entry("facts", "bells", {"text": "t"})],
              datasets=[store_pb2.DatasetPolicy(plugin_id="lore-keeper", namespace="facts", ops=["merge"], schema=to_struct({}))]),
     "world.plugin_data[0]"),
    (tidefall(plugin_data=[entry("_memory", "x", 1)]), "world.plugin_data[0]"),
    (tidefall(plugin_data=[entry("facts", "", 1)]), "world.plugin_data[0]"),
    (tidefall(plugin_data=[entry("facts", "a", 1, plugin_id="")]), "world.plugin_data[0].plugin_id"),
    (tidefall(plugin_data=[entry("facts", "a", 1), entry("facts", "a", 2)]), "world.plugin_data[1]"),
    (tidefall(plugin_data=[entry("facts", "big", "x" * (256 * 1024 + 1))]), "world.plugin_data[0]"),
])
async def test_world_data_goes_through_the_rules_of_every_plugin_data_write(stub, world, field) -> None:
    """The dataset (set allowed, the record fits), reserved namespaces, keys, sizes; checked before any row is written."""
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, create(stub, world))
    assert violated_fields(error) == [field]


@pytest.mark.parametrize(("world", "field"), [
    (tidefall(writer="tidefall"), "world.writer"),
    (tidefall(dimensions=[store_pb2.Dimension(id="dread", schema=to_struct({"type": "integer", "maximum": 5}), value=to_value(9))]),
     "world.dimensions[0].value"),
    (tidefall(dimensions=[store_pb2.Dimension(id="dread", schema=to_struct({"type": "nope"}), value=to_value(1))]),
     "world.dimensions[0].schema"),
    (tidefall(characters=[store_pb2.Character(id="a", data=to_struct({"name": "A"})), store_pb2.Character(id="a")]),
     "world.characters[1].id"),
    (tidefall(characters=[store_pb2.Character(id="a", data=to_struct({"name": "A", "type": "ghost"}))]), "world.characters[0].data.type"),
    (tidefall(opening="x" * 20_001), "world.opening"),
])
async def test_a_bad_world_is_refused_naming_the_field(stub, world, field) -> None:
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, create(stub, world))
    assert violated_fields(error) == [field]
