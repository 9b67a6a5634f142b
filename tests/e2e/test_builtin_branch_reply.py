"""branch-reply through the five services on the scripted model: variants are offered under the
story, the player switches with /variant, and the next turn's story reads the picked version."""

from __future__ import annotations

import json

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value
from tests.e2e.conftest import minimal_session
from tests.e2e.test_history_transform import PROBE, story_prompts

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
PLUGIN = "branch-reply"


async def turn(stub, session_id: str, text: str):
    events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
        session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)]))]
    return events, events[-1].turn_completed


async def stored(services, session_id: str) -> dict:
    async with services.channel_as("store", "scheduler") as channel:
        reply = await store_pb2_grpc.TransactionalStoreStub(channel).ListPluginData(
            store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=PLUGIN))
    return {(entry.namespace, entry.key): from_value(entry.value) for entry in reply.entries}


async def test_variants_are_offered_picked_and_followed_by_the_next_turn(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        # transform-probe (mode off) only writes down what each story prompt sends.
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PLUGIN, PROBE], approved_plugins=[PROBE]))).session
        events, first = await turn(stub, session.id, "I knock on the lighthouse door.")
        [result] = [r for r in first.runtime_results if r.runtime_id == PLUGIN]
        assert result.status == resources_pb2.RUNTIME_STATUS_SUCCESS, result.reason
        output = json.loads(result.output_json)
        assert output["turn"] == 1 and [v["number"] for v in output["variants"]] == [2, 3]
        blocks = [e.ui for e in events if e.WhichOneof("event") == "ui" and e.ui.plugin_id == PLUGIN]
        assert blocks and blocks[0].title == "Other versions of this reply"
        items = from_struct(blocks[0].parts[0])["items"]
        assert items[0].startswith("1 · ") and items[1].startswith("2 · ") and len(items) == 3
        variant_two = output["variants"][0]["text"]
        assert "Variant two" in variant_two
        assert (await stored(services, session.id))[("variants", "1")]["texts"][0] == variant_two

        picked = await stub.RunCommand(scheduler_pb2.RunCommandRequest(session_id=session.id, text="/variant 2"))
        assert json.loads(picked.result_json) == {"turn": 1, "variant": 2}
        assert picked.turn.origin == resources_pb2.TURN_ORIGIN_ACTION
        assert (await stored(services, session.id))[("choices", "1")] == {"variant": 2}

        refused = await stub.RunCommand(scheduler_pb2.RunCommandRequest(session_id=session.id, text="/variant 9"))
        [failed] = refused.turn.runtime_results
        assert failed.status == resources_pb2.RUNTIME_STATUS_FAILED and failed.reason.startswith("out-of-range: there is no variant 9")

        _, second = await turn(stub, session.id, "I step inside.")
        assert second.status == resources_pb2.TURN_STATUS_COMMITTED
        replies = [m["content"] for m in story_prompts(services, session.id)[-1] if m["role"] == "assistant"]
        assert replies == [variant_two], replies
        # The log keeps the reply as told.
        messages = (await stub.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id))).messages
        assert variant_two not in [m.text for m in messages if m.role == resources_pb2.MESSAGE_ROLE_STORY]

        back = await stub.RunCommand(scheduler_pb2.RunCommandRequest(session_id=session.id, text="/variant 1"))
        assert json.loads(back.result_json) == {"turn": 2, "variant": 1}
