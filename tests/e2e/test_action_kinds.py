"""Action kinds and seats through the five services: the session's catalogue (the six base kinds and
its plugins' kinds, labelled in its language), each submitted action checked against its kind and its
seat (INVALID_ARGUMENT naming the action and field, no turn recorded), the player message rendered with
the kinds' labels and the characters' names, fields kept as given, and a seat's character switched
from the next turn."""

from __future__ import annotations

from typing import Any, cast

import grpc
import pytest
import pytest_asyncio

from covel.common.v1 import common_pb2
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.errors import field_violations
from shared.grpc_client import open_channel
from shared.structs import from_struct, to_struct
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, TEST_PLUGIN_DIR, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")

HARBOR = """\
name: Harbor
opening: Fog on the quay.
characters:
  - {id: aya, name: Aya, type: player}
  - {id: bram, name: Bram, type: player}
  - {id: gull, name: The Gull, type: npc}
"""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    worlds = tmp_path_factory.mktemp("worlds")
    (worlds / "harbor").mkdir()
    (worlds / "harbor" / "world.yaml").write_text(HARBOR, encoding="utf-8")
    env = {"COVEL_WORLD_DIRS": str(worlds)}
    async with running_services(tmp_path_factory.mktemp("covel-data"), plugin_dirs=(TEST_PLUGIN_DIR,), extra_env=env) as group:
        yield group


async def new_session(stub, locale="en", seats=()) -> store_pb2.Session:
    return (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
        world_id="harbor", locale=locale, excluded_plugins=NON_STORY_CORE_PLUGINS, requested_plugins=["whisper-pack"],
        seats=list(seats)))).session


def action(kind, text="", **fields) -> common_pb2.PlayerAction:
    extra = {key: value for key, value in fields.items() if key in ("seat_id", "actor_id")}
    payload = {key: value for key, value in fields.items() if key not in extra}
    return resources_pb2.PlayerAction(kind=kind, text=text, fields=to_struct(payload) if payload else None, **extra)


async def play(stub, session_id, *actions) -> store_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=list(actions))
    events = [event async for event in stub.SubmitActions(request)]
    return events[-1].turn_completed


async def test_a_world_session_seats_its_first_player_and_lists_its_kinds(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, locale="zh")
        catalogue = await stub.ListActionKinds(scheduler_pb2.ListActionKindsRequest(session_id=session.id))
    [seat] = session.seats
    assert (seat.id, seat.role, seat.character_id, list(seat.character_ids)) == ("main", resources_pb2.SEAT_ROLE_PLAYER, "aya", ["aya", "bram"])
    kinds = {kind.kind: kind for kind in catalogue.kinds}
    assert list(kinds)[:6] == ["say", "act", "narrate", "direct", "advance", "command"]
    assert (kinds["say"].label, list(kinds["narrate"].roles)) == ("说", [resources_pb2.SEAT_ROLE_DIRECTOR])
    whisper = kinds["whisper-pack/whisper"]
    assert (whisper.plugin_id, whisper.label, whisper.placeholder, whisper.icon, whisper.text, whisper.actor) == (
        "whisper-pack", "耳语", "对某人耳语", "ear", resources_pb2.TEXT_RULE_REQUIRED, True)
    assert from_struct(whisper.fields_schema)["required"] == ["target"] and whisper.composer
    assert list(catalogue.seats) == list(session.seats)


async def test_a_plugin_kind_is_rendered_with_the_characters_name_and_keeps_its_fields(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub)
        plain = await play(stub, session.id, action("do", "I walk the quay."))
        whispered = await play(stub, session.id, action("whisper-pack/whisper", "Over here.", target="the guard"))
    assert plain.player_message == "I walk the quay."
    assert plain.actions[0].kind == "act" and plain.actions[0].actor_id == "aya"
    assert whispered.player_message == '【Aya·whispers】Over here. {"target": "the guard"}'
    assert from_struct(whispered.actions[0].fields) == {"target": "the guard"}


@pytest.mark.parametrize(("bad", "field", "wording"), [
    (action("sing", "La la."), "actions[0].kind", "is no action kind"),
    (action("nobody/sing", "La la."), "actions[0].kind", "not an action kind of this session"),
    (action("narrate", "The fog lifts."), "actions[0].kind", "a player seat cannot narrate"),
    (action("say", ""), "actions[0].text", "is empty"),
    (action("whisper-pack/whisper", "Psst."), "actions[0].fields", "'target' is a required property"),
    (action("whisper-pack/whisper", "Psst.", target=""), "actions[0].fields.target", "does not fit"),
    (action("whisper-pack/signal", "Now!", flag="red"), "actions[0].text", "takes no text"),
    (action("whisper-pack/signal", flag="red", actor_id="aya"), "actions[0].actor_id", "not taken as a character"),
    (action("act", "I wave.", actor_id="gull"), "actions[0].actor_id", "not one of seat main's characters"),
    (action("act", "I wave.", seat_id="left"), "actions[0].seat_id", "no seat 'left'"),
    (action("act", "I wave.", mood="calm"), "actions[0].fields", "takes no fields"),
])
async def test_a_bad_action_is_refused_naming_its_field_and_records_no_turn(services, bad, field, wording) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await play(stub, session.id, bad)
        turns = await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    [violation] = field_violations(caught.value)
    assert violation.field == field and wording in violation.description, violation
    assert not turns.turns


async def test_a_director_seat_narrates_and_a_switched_character_acts_next_turn(services) -> None:
    seats = [resources_pb2.Seat(id="main", role=resources_pb2.SEAT_ROLE_PLAYER, character_id="aya", character_ids=["aya", "bram"]),
             resources_pb2.Seat(id="gm", role=resources_pb2.SEAT_ROLE_DIRECTOR)]
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await new_session(stub, seats=seats)
        directed = await play(stub, session.id, action("narrate", "The fog lifts.", seat_id="gm"),
                              action("say", "Who's there?"))
        switched = await stub.SwitchCharacter(scheduler_pb2.SwitchCharacterRequest(session_id=session.id, character_id="bram"))
        turn = await play(stub, session.id, action("say", "It's me."), action("whisper-pack/signal", seat_id="gm", flag="green"))
        with pytest.raises(grpc.aio.AioRpcError) as npc:
            await stub.SwitchCharacter(scheduler_pb2.SwitchCharacterRequest(session_id=session.id, character_id="gull"))
        with pytest.raises(grpc.aio.AioRpcError) as bad_seats:
            await new_session(stub, seats=[resources_pb2.Seat(id="main", role=cast(Any, 7))])
    assert directed.player_message == "【narrate】The fog lifts.\n【Aya·say】Who's there?"
    assert switched.session.seats[0].character_id == "bram"
    assert turn.actions[0].actor_id == "bram" and turn.player_message == '【Bram·say】It\'s me.\n【signal】 {"flag": "green"}'
    assert npc.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(npc.value)[0].field == "character_id"
    assert bad_seats.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(bad_seats.value)[0].field == "seats[0].role"
