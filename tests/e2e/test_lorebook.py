"""The lorebook through the five services: a session in a world starts with the world's entries; the player
reads them all and writes only its own; an entry whose key the player mentions reaches the story's prompt
(memory-search over the lorebook: tests/scheduler/test_world_prompts.py)."""

from __future__ import annotations

import json

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.errors import field_violations
from shared.grpc_client import open_channel
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, TEST_PLUGIN_DIR, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")

HARBOR = """\
name: Harbor
lorebook:
  - {id: lighthouse, title: The lighthouse, keys: [lighthouse], content: Its lens was stolen three nights ago.}
  - {id: gulls, keys: [gull], content: The gulls of Gull Point are never fed.}
"""
PROBE = "event-key-probe"  # its PreLLMCall guard reports the system prompt (and stops the call)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    worlds = tmp_path_factory.mktemp("worlds")
    (worlds / "harbor").mkdir()
    (worlds / "harbor" / "world.yaml").write_text(HARBOR, encoding="utf-8")
    async with running_services(tmp_path_factory.mktemp("covel-data"), plugin_dirs=(TEST_PLUGIN_DIR,),
                                extra_env={"COVEL_WORLD_DIRS": str(worlds)}) as group:
        yield group


async def system_prompt(stub, session_id: str, text: str) -> str:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="act", text=text)])
    events = [event async for event in stub.SubmitActions(request)]
    reports = [e.hook for e in events if e.WhichOneof("event") == "hook" and e.hook.event == "PreLLMCall"]
    return json.loads(reports[0].message)["system"]


async def test_the_lorebook_is_the_worlds_and_the_players(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="harbor",
                                                                               excluded_plugins=NON_STORY_CORE_PLUGINS))).session
        put = await stub.PutLorebookEntry(scheduler_pb2.PutLorebookEntryRequest(
            session_id=session.id, id="my-notes", keys=["Mira"], content="Mira hides something."))
        listed = (await stub.ListLorebook(scheduler_pb2.ListLorebookRequest(session_id=session.id))).entries
        world_owned = await stub.DeleteLorebookEntry(scheduler_pb2.DeleteLorebookEntryRequest(session_id=session.id, id="lighthouse"))
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await stub.PutLorebookEntry(scheduler_pb2.PutLorebookEntryRequest(session_id=session.id, id="x", content="No keys."))
        mine = await stub.DeleteLorebookEntry(scheduler_pb2.DeleteLorebookEntryRequest(session_id=session.id, id="my-notes"))
    assert (put.entry.owner, put.entry.version) == ("player", 1)
    assert [(e.owner, e.id) for e in listed] == [("player", "my-notes"), ("world", "gulls"), ("world", "lighthouse")]
    assert world_owned.deleted is False and mine.deleted is True  # a player's delete reaches its own entries only
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(bad.value)[0].field == "keys"


async def test_an_entry_the_player_mentions_reaches_the_story(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        request = scheduler_pb2.CreateSessionRequest(world_id="harbor", excluded_plugins=NON_STORY_CORE_PLUGINS, requested_plugins=[PROBE],
                                                     approved_plugins=[PROBE])
        mentioned = await system_prompt(stub, (await stub.CreateSession(request)).session.id, "I climb to the lighthouse.")
        quiet = await system_prompt(stub, (await stub.CreateSession(request)).session.id, "I sit down.")
    assert "- The lighthouse: Its lens was stolen three nights ago." in mentioned and "gulls" not in mentioned
    assert "Lorebook" not in quiet


async def test_a_players_entry_carries_its_activation_rules(services) -> None:
    """PutLorebookEntry takes the rules a world's entries have: kept as written, evaluated (a NOT filter keeps the
    entry out when its exclude word is there too), and refused by field when out of bounds."""
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        request = scheduler_pb2.CreateSessionRequest(world_id="harbor", excluded_plugins=NON_STORY_CORE_PLUGINS, requested_plugins=[PROBE],
                                                     approved_plugins=[PROBE])
        rules = resources_pb2.LorebookActivation(secondary_keys=["storm"], selective_logic="notAny", probability=100, has_probability=True,
                                                 position="afterChar", order=5, has_order=True, sticky=2)
        sessions = []
        for _ in range(2):
            session = (await stub.CreateSession(request)).session
            put = await stub.PutLorebookEntry(scheduler_pb2.PutLorebookEntryRequest(
                session_id=session.id, id="mira", keys=["Mira"], content="Mira keeps the spare lens.", activation=rules))
            sessions.append(session.id)
        listed = (await stub.ListLorebook(scheduler_pb2.ListLorebookRequest(session_id=sessions[0]))).entries
        calm = await system_prompt(stub, sessions[0], "I ask Mira about the lens.")
        stormy = await system_prompt(stub, sessions[1], "I ask Mira about the storm.")
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await stub.PutLorebookEntry(scheduler_pb2.PutLorebookEntryRequest(
                session_id=sessions[0], id="odds", keys=["x"], content="x",
                activation=resources_pb2.LorebookActivation(probability=250, has_probability=True)))
        with pytest.raises(grpc.aio.AioRpcError) as choice:
            await stub.PutLorebookEntry(scheduler_pb2.PutLorebookEntryRequest(
                session_id=sessions[0], id="odds", keys=["x"], content="x", activation=resources_pb2.LorebookActivation(position="middle")))
    [mine] = [entry for entry in listed if entry.owner == "player"]
    assert put.entry.activation == rules and mine.activation == rules, "kept as written"
    assert "Mira keeps the spare lens." in calm and "Mira keeps the spare lens." not in stormy, "notAny: the storm keeps it out"
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(bad.value)[0].field == "activation.probability", field_violations(bad.value)
    assert field_violations(choice.value)[0].field == "activation.position"
