"""The payloads of PreSchedule, PreRuntime, PostContextAssembly and TurnStop as a plugin's hooks receive them,
through the five services: the runtimes' compiled manifests, the turn's input, the bound inputs and the session's
characters, and each runtime's output with its time (payload-probe records them); and, in the story's assembled
prompt, the framework's default dimension segment."""

from __future__ import annotations

import json

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import to_struct
from tests.e2e.conftest import minimal_session

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "payload-probe"
TEXT = "I count the boats."


async def add_mira(store, session_id: str) -> None:
    """A character and a dimension in the session's world, committed as a setup runtime would."""
    lease = (await store.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(session_id=session_id, holder="test", ttl_ms=10000,
                                                                            origin="manual"))).lease
    await store.CommitTurn(store_pb2.CommitTurnRequest(
        session_id=session_id, lease_id=lease.lease_id, release_lease=True, dimension_owners=["world"],
        turn=store_pb2.Turn(id=lease.turn_id, status=store_pb2.TURN_STATUS_COMMITTED, origin="manual"),
        proposals=[
            store_pb2.Proposal(id="s", type="character.schema.set", plugin_id="world", runtime_id="world/setup",
                               payload=to_struct({"types": ["npc"], "attributes": {}})),
            store_pb2.Proposal(id="c", type="character.upsert", plugin_id="world", runtime_id="world/setup",
                               payload=to_struct({"characterId": "npc-mira", "expectedVersion": 0,
                                                  "character": {"name": "Mira", "type": "npc", "description": "The harbour master.",
                                                                "aliases": ["the master"]}})),
            store_pb2.Proposal(id="d", type="dimension.initialize", plugin_id="world", runtime_id="world/setup",
                               payload=to_struct({"dimensions": [{"id": "tide", "name": "The tide", "schema": {"type": "string"},
                                                                  "value": "low"}]})),
        ]))


async def test_the_hooks_see_manifests_inputs_characters_and_outputs(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        await add_mira(store_pb2_grpc.TransactionalStoreStub(store_channel), session.id)
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text=TEXT)]))]
    turn = events[-1].turn_completed
    assert turn.status == resources_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    lines = [json.loads(line) for line in (services.data_dir / "payload-probe.jsonl").read_text(encoding="utf-8").splitlines()]
    seen = {(line["event"], line["runtimeId"] or ""): line["payload"] for line in lines}

    [triggered] = [entry for entry in seen[("PreSchedule", "")]["triggered"] if entry["name"] == f"{PROBE}/count"]
    assert (triggered["id"], triggered["pluginId"], triggered["stage"], triggered["type"]) == (f"{PROBE}/count", PROBE, "pre-turn", "function")
    assert triggered["io"]["inputs"]["digest"] == {"from": {"kernel": "turn-digest@1"}}, "the runtime's compiled manifest"

    pre = seen[("PreRuntime", f"{PROBE}/count")]
    assert pre["manifest"]["runtimeId"] == f"{PROBE}/count" and pre["manifest"]["schedule"]["stage"] == "pre-turn"
    assert (pre["input"]["playerMessage"], pre["input"]["origin"], pre["input"]["activation"]) == (TEXT, "player", {})
    assert [action["text"] for action in pre["input"]["playerActions"]] == [TEXT]

    assembled = seen[("PostContextAssembly", "narrator")]
    assert assembled["characters"] == [{"id": "npc-mira", "name": "Mira", "type": "npc", "description": "The harbour master."}]
    assert isinstance(assembled["inputSlots"], dict) and assembled["outputKind"] == "story"
    # The framework's default dimension segment: the narrator reads each dimension's name and current value.
    assert "- The tide: low" in assembled["systemPrompt"] and {"pluginId": "framework", "id": "dimensions"} in assembled["promptSegments"]

    stopped = {result["runtimeId"]: result for result in seen[("TurnStop", "")]["runtimeResults"]}
    count = stopped[f"{PROBE}/count"]
    assert (count["pluginId"], count["status"], count["output"]) == (PROBE, "success", {"player": TEXT})
    assert isinstance(count["durationMs"], int) and "reason" not in count
    assert stopped["narrator"]["status"] == "success" and stopped["narrator"]["output"], "the story runtime's output too"
    assert isinstance(seen[("TurnStop", "")]["durationMs"], int)
