"""core-quest in the demo world on the scripted model, through the five services: a task the player takes
on becomes a quest, later turns advance and complete it, the quest log and its vocabulary commit, and
the panel shows it."""

from __future__ import annotations

import uuid

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from covel_cli.play import DEFAULT_WORLD
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value
from tests.support.builtin_plugins import SETUP_PLUGINS

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")

ACTIONS = (
    "I ask Mira about the missing boats.",
    "I promise Mira I will find the missing boats.",
    "I search the harbor for the missing boats.",
    "I find the missing boats and bring them home.",
    "I agree to help Old Tobin.",
)


async def _turn(stub, session_id: str, text: str):
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    return [event async for event in stub.SubmitActions(request)][-1].turn_completed


async def _data(store, session_id: str, plugin_id: str, namespace: str) -> dict:
    reply = await store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=session_id, plugin_id=plugin_id, namespace=namespace))
    return {entry.key: from_value(entry.value) for entry in reply.entries}


async def test_a_task_taken_on_becomes_a_quest_that_advances_and_completes(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub, store = scheduler_pb2_grpc.SchedulerStub(channel), store_pb2_grpc.TransactionalStoreStub(store_channel)
        request = scheduler_pb2.CreateSessionRequest(world_id=DEFAULT_WORLD, excluded_plugins=SETUP_PLUGINS, requested_plugins=["core-quest"])
        session = (await stub.CreateSession(request)).session
        assert "core-quest" in session.active_plugins
        outputs, snapshots = [], []
        for action in ACTIONS:
            turn = await _turn(stub, session.id, action)
            assert turn.status == store_pb2.TURN_STATUS_COMMITTED, (action, turn.abort_reason)
            results = {r.runtime_id: r for r in turn.runtime_results}
            for runtime_id in ("core-quest/log", "core-quest/vocabulary", "inventory/vocabulary"):
                assert results[runtime_id].status == resources_pb2.RUNTIME_STATUS_SUCCESS, (action, runtime_id, results[runtime_id].reason)
            outputs.append({runtime_id: from_struct(result.output) for runtime_id, result in results.items()})
            snapshots.append(await _data(store, session.id, "core-quest", "quests"))

        changes = [output["core-quest/log"]["changes"] for output in outputs]
        assert changes[0] == [] and snapshots[0] == {}, "asking about a task does not take it on"
        assert [(c["id"], c["change"]) for c in changes[1]] == [("find-the-missing-boats", "started")]
        assert changes[1][0]["giver"] == "Mira"
        assert [(c["id"], c["change"]) for c in changes[2]] == [("find-the-missing-boats", "advanced")]
        assert [(c["id"], c["change"]) for c in changes[3]] == [("find-the-missing-boats", "completed")]
        assert [(c["id"], c["change"]) for c in changes[4]] == [("help-old-tobin", "started")]

        started_turn = snapshots[1]["find-the-missing-boats"]["started"]
        boats = snapshots[3]["find-the-missing-boats"]
        assert boats["status"] == "completed" and boats["title"] == "Find the missing boats" and boats["giver"] == "Mira"
        assert [(h["turn"] - started_turn, h["change"]) for h in boats["history"]] == [(0, "started"), (1, "advanced"), (2, "completed")]
        assert all(objective["done"] for objective in boats["objectives"])
        assert snapshots[2]["find-the-missing-boats"]["status"] == "active"
        final = snapshots[-1]
        assert set(final) == {"find-the-missing-boats", "help-old-tobin"} and final["help-old-tobin"]["status"] == "active"

        # The vocabulary follows the log of the same turn; inventory publishes its items the same way.
        assert outputs[0]["core-quest/vocabulary"] == {"source": "core-quest", "kind": "quest", "terms": []}
        assert outputs[1]["core-quest/vocabulary"]["terms"] == [{"id": "find-the-missing-boats", "name": "Find the missing boats", "note": "active"}]
        assert {t["id"]: t["note"] for t in outputs[4]["core-quest/vocabulary"]["terms"]} == {
            "find-the-missing-boats": "completed", "help-old-tobin": "active"}
        items = outputs[0]["inventory/vocabulary"]
        assert items["source"] == "inventory" and items["kind"] == "item"
        assert {t["id"] for t in items["terms"]} == {"brass-lantern", "worn-map", "copper-coin"}

        # The right panel draws the quest log.
        panels = (await stub.ListPanels(scheduler_pb2.ListPanelsRequest(session_id=session.id))).panels
        panel = next(p for p in panels if p.plugin_id == "core-quest")
        state = from_struct(panel.state)
        assert set(state["data"]["quests"]) == {"find-the-missing-boats", "help-old-tobin"}
        assert from_struct(panel.spec)["view"]["title"] == "Quests"
