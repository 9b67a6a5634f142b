"""tabletop-rules through the five services on the scripted model: point-buy creation in the demo world's setup
(after char-creator's character form; an over-budget answer is refused naming why; the answer writes the sheet and
the character's attributes), then attribute checks resolved by the rules each turn, shown to the story, and next
to dice-check (an action dice-check rolled is left to it)."""

from __future__ import annotations

import uuid

import grpc
import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.play import DEFAULT_WORLD
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value, to_struct

# Its own sessions only: the session's shared group (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGIN = "tabletop-rules"
CREATION, CHECK = f"{PLUGIN}/creation", f"{PLUGIN}/check"


async def _events(call) -> tuple[list, dict]:
    events = [event async for event in call]
    return events, {r.runtime_id: r for r in events[-1].turn_completed.runtime_results}


async def _advance(stub, session_id):
    return await _events(stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="advance")])))


async def _answer(stub, session_id, interaction_id, values):
    return await _events(stub.SubmitInteraction(scheduler_pb2.SubmitInteractionRequest(
        session_id=session_id, interaction_id=interaction_id, values=to_struct(values), idempotency_key=uuid.uuid4().hex)))


async def _do(stub, session_id, text):
    return await _events(stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
        session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)], idempotency_key=uuid.uuid4().hex)))


async def _data(store, session_id, namespace) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=PLUGIN, namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


def _interactions(events) -> list:
    return [e.interaction for e in events if e.WhichOneof("event") == "interaction"]


async def test_point_buy_at_setup_then_checks_by_the_rules(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id=DEFAULT_WORLD, requested_plugins=[PLUGIN], excluded_plugins=["dice-check"]))).session
        assert CREATION in session.setup_runtimes

        # The character form first; the point-buy waits for the character.
        events, results = await _advance(stub, session.id)
        assert [i.id for i in _interactions(events)] == ["protagonist"]
        assert results[CREATION].status == resources_pb2.RUNTIME_STATUS_SUCCESS and from_struct(results[CREATION].output) == {"created": False, "waiting": True}

        events, results = await _answer(stub, session.id, "protagonist", {"name": "Wren", "courage": 4, "role": "a lamp-maker"})
        [asked] = _interactions(events)
        assert asked.id == "point-buy" and asked.plugin_id == PLUGIN and asked.kind == resources_pb2.INTERACTION_KIND_FORM
        assert "narrator" not in results, "the setup goes on"

        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _answer(stub, session.id, "point-buy", {"might": 5, "agility": 5})
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "the scores cost 14 points; the budget is 8" in refused.value.details()

        events, results = await _answer(stub, session.id, "point-buy", {"might": 1, "agility": 4, "wits": 2, "presence": 0})
        assert results[CREATION].status == resources_pb2.RUNTIME_STATUS_SUCCESS and results["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        sheet = (await _data(store, session.id, "sheet"))["player"]
        assert sheet == {"id": "player", "characterId": "traveller", "scores": {"might": 1, "agility": 4, "wits": 2, "presence": 0}, "spent": 8, "budget": 8}
        world = await store.GetWorld(store_pb2.GetWorldRequest(session_id=session.id))
        wren = next(from_struct(c.data) for c in world.characters if c.id == "traveller")
        assert wren["name"] == "Wren" and wren["attributes"]["agility"] == 4 and wren["attributes"]["courage"] == 4

        # The story is told the checks by the plugin's prompt segment; a hard climb tests agility: score 4 is +2 on a d20 against 16.
        events, results = await _do(stub, session.id, "I climb the steep wall behind the inn.")
        [check] = from_struct(results[CHECK].output)["checks"]
        assert {k: check[k] for k in ("attribute", "score", "modifier", "difficulty", "target", "dice")} == \
            {"attribute": "agility", "score": 4, "modifier": 2, "difficulty": "hard", "target": 16, "dice": "d20"}
        assert check["total"] == check["rolls"][0] + 2
        records = await _data(store, session.id, "checks")
        assert list(records.values())[0]["outcome"] == check["outcome"]

        _, results = await _do(stub, session.id, "I rest by the fire.")
        assert from_struct(results[CHECK].output) == {"checks": []}


async def test_next_to_dice_check_an_action_is_rolled_once(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        request = scheduler_pb2.CreateSessionRequest(world_id=DEFAULT_WORLD, requested_plugins=[PLUGIN, "dice-check"],
                                                     excluded_plugins=["world-init", "char-creator"])
        request.plugin_settings[PLUGIN].CopyFrom(to_struct({"dice": "2d6", "budget": 4}))
        session = (await stub.CreateSession(request)).session
        events, _ = await _advance(stub, session.id)
        [asked] = _interactions(events)
        assert asked.id == "point-buy", "no character form: the point-buy is asked at once"
        await _answer(stub, session.id, "point-buy", {"wits": 3})

        _, results = await _do(stub, session.id, "I climb onto the roof. I search the chimney for the key.")
        rolled = from_struct(results["dice-check/roller"].output)["checks"]
        receipt = from_struct(results[CHECK].output)
        assert [c["skill"] for c in rolled] == ["athletics"] and receipt["deferred"] == ["I climb onto the roof."]
        [check] = receipt["checks"]
        assert (check["attribute"], check["score"], check["modifier"], check["dice"], len(check["rolls"]), check["target"]) == \
            ("wits", 3, 1, "2d6", 2, 8)
