"""A card imported through the registry's ImportWorld (as the operator) is a world a session plays, end to end
through the five services: the opening a player picks from the card's greetings, the card's lore brought up by
its activation rules each turn (a sticky entry held across turns, an excluded one kept out) with each turn's
activations in its trace, and the refusals (a hostile card, a taken id, a caller that is not the operator)."""

from __future__ import annotations

import json

import grpc
import pytest
import pytest_asyncio

from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.errors import field_violations
from shared.grpc_client import open_channel
from tests.e2e.conftest import NON_STORY_CORE_PLUGINS, TEST_PLUGIN_DIR, running_services
from tests.importing import cards

pytestmark = pytest.mark.asyncio(loop_scope="session")


def coast_card() -> dict:
    book = {"scan_depth": 1, "entries": [
        cards.book_entry(1, ["lighthouse"], "Its lens was stolen.", comment="Lighthouse", extensions={"sticky": 1}),
        cards.book_entry(2, ["harbor"], "@@exclude_keys storm\nBoats are missing.", comment="Harbor"),
        cards.book_entry(3, [], "Everything tastes of salt.", constant=True),
    ]}
    # (a description naming the lighthouse would bring entry 1 up every turn by recursion from card.character)
    return cards.v3_card(character_book=book, system_prompt="", post_history_instructions="", description="A keeper's daughter.")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    worlds = tmp_path_factory.mktemp("worlds")
    async with running_services(tmp_path_factory.mktemp("covel-data"), plugin_dirs=(TEST_PLUGIN_DIR,),
                                extra_env={"COVEL_WORLD_DIRS": str(worlds), "COVEL_RANDOM_SEED": "42"}) as group:
        yield group


async def activations(stub, session_id: str, text: str) -> dict:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    events = [event async for event in stub.SubmitActions(request)]
    turn = events[-1].turn_completed
    [entry] = [e for e in turn.hook_trace if e.event == "lorebook.activated"]
    return {item["id"]: item["why"] for item in json.loads(entry.message)["entries"]}


async def test_an_imported_card_plays(services) -> None:
    async with services.channel_as("registry", "operator") as registry_channel, open_channel(services.addrs["scheduler"]) as channel:
        registry = registry_pb2_grpc.PluginRegistryStub(registry_channel)
        imported = await registry.ImportWorld(registry_pb2.ImportWorldRequest(file=cards.card_png(coast_card()), world_id="coast"))
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        world = (await stub.GetWorld(scheduler_pb2.GetWorldRequest(world_id="coast"))).world
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id="coast", opening_id="greeting-2", excluded_plugins=NON_STORY_CORE_PLUGINS))).session
        opening = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages[0]
        turns = [await activations(stub, session.id, text) for text in
                 ("I climb to the lighthouse.", "I walk down to the harbor.", "A storm hits the harbor.", "I rest.")]
        with pytest.raises(grpc.aio.AioRpcError) as unknown_opening:
            await stub.CreateSession(scheduler_pb2.CreateSessionRequest(world_id="coast", opening_id="greeting-9"))
    assert imported.world.id == "coast" and imported.world.state == registry_pb2.WORLD_STATE_LOADED
    assert [(o.id, o.group_only) for o in world.openings] == [("greeting-1", False), ("greeting-2", False), ("group-1", True)]
    assert opening.text == "The lamp is out, you." and world.opening == "*She looks up.* You came back."  # {{user}} expanded
    always = {"card.character": "constant", "entry-3": "constant"}  # the card's character, and its constant lore
    assert turns[0] == {**always, "entry-1": "key:lighthouse"}
    assert turns[1] == {**always, "entry-1": "sticky", "entry-2": "key:harbor"}  # held one more turn
    assert turns[2] == always  # the storm keeps the harbor out; the lighthouse's sticky turn is over
    assert turns[3] == always
    assert unknown_opening.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field_violations(unknown_opening.value)[0].field == "opening_id"


async def test_import_refusals(services) -> None:
    # The scheduler passes an operator's ImportWorld on (its public ImportWorld); another service may not call it.
    async with services.channel_as("registry", "operator") as operator, services.channel_as("registry", "hooks") as scheduler:
        registry = registry_pb2_grpc.PluginRegistryStub(operator)
        with pytest.raises(grpc.aio.AioRpcError) as hostile:
            await registry.ImportWorld(registry_pb2.ImportWorldRequest(file=cards.png(texts={"ccv3": b"%%%"})))
        await registry.ImportWorld(registry_pb2.ImportWorldRequest(file=cards.card_png(cards.v2_card()), world_id="taken"))
        with pytest.raises(grpc.aio.AioRpcError) as taken:
            await registry.ImportWorld(registry_pb2.ImportWorldRequest(file=cards.card_png(cards.v2_card()), world_id="taken"))
        replaced = await registry.ImportWorld(registry_pb2.ImportWorldRequest(file=cards.card_png(cards.v1_card() | {}), world_id="taken",
                                                                              replace=True))
        with pytest.raises(grpc.aio.AioRpcError) as not_operator:
            await registry_pb2_grpc.PluginRegistryStub(scheduler).ImportWorld(
                registry_pb2.ImportWorldRequest(file=cards.card_png(cards.v2_card())))
    assert hostile.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field_violations(hostile.value)[0].field == "tEXt.ccv3"
    assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert replaced.world.name == "Old Tobin"
    assert not_operator.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_covel_play_starts_on_a_picked_opening_and_lists_the_others(services) -> None:
    import io

    from covel_cli.play import play, scripted_reader

    async with services.channel_as("registry", "operator") as registry_channel:
        await registry_pb2_grpc.PluginRegistryStub(registry_channel).ImportWorld(
            registry_pb2.ImportWorldRequest(file=cards.card_png(coast_card()), world_id="coast-cli", replace=True))
    out = io.StringIO()
    assert await play(services.addrs["scheduler"], scripted_reader([]), out, world_id="coast-cli", opening_id="greeting-1") == 0
    shown = out.getvalue()
    assert "Another night." in shown and "You came back." not in shown
    assert "other openings: greeting-2, group-1" in shown


async def test_covel_operator_import_world(services, tmp_path) -> None:
    import argparse
    import io

    from covel_cli import operator

    card = tmp_path / "tobin.json"
    card.write_text(json.dumps(cards.v1_card()), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COVEL_DATA_DIR", str(services.data_dir))
        patch.setenv("COVEL_REGISTRY_ADDR", services.addrs["registry"])
        for name in ("COVEL_TLS_CERT_FILE", "COVEL_TLS_KEY_FILE", "COVEL_TLS_CA_FILE"):
            patch.delenv(name, raising=False)
        imported = await operator.import_world(argparse.Namespace(file=str(card), world="", replace=False, merge=False, addr=None), out, err)
        again = await operator.import_world(argparse.Namespace(file=str(card), world="", replace=False, merge=False, addr=None), out, err)
    assert imported == 0 and "imported old-tobin (Old Tobin) into " in out.getvalue()
    assert again == 1 and "ALREADY_EXISTS" in err.getvalue()
