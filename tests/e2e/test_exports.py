"""recordAs exports read by scope: committed inputs, and inputs whose values fail `accepts`, through all five services."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, from_value

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_committed_inputs_read_the_export_an_earlier_turn_recorded(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["export-probe"], approved_plugins=["export-probe"]))).session

        async def turn(text: str) -> tuple[store_pb2.Turn, dict]:
            request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text=text)])
            completed = [event async for event in stub.SubmitActions(request)][-1].turn_completed
            return completed, {r.runtime_id: r for r in completed.runtime_results}

        first, results = await turn("I knock.")
        assert first.status == store_pb2.TURN_STATUS_COMMITTED
        assert from_struct(results["export-probe/reader"].output) == {"previous": None}, "nothing recorded before turn one"
        strict = results["export-probe/strict"]
        assert strict.status == resources_pb2.RUNTIME_STATUS_SKIPPED and "nothing recorded under latest-note" in strict.reason
        [export] = (await store.ListExports(store_pb2.ListExportsRequest(session_id=session.id))).exports
        assert (export.runtime_id, export.record_as, export.turn_id) == ("export-probe/producer", "latest-note", first.id)
        assert from_value(export.value) == {"turn": 1, "note": "heard: I knock."}

        # Optional inputs whose value fails `accepts` are left out; a required one gates its runtime.
        assert from_struct(results["export-probe/picky"].output) == {"bound": ["note"]}
        gated = results["export-probe/picky-required"]
        assert gated.status == resources_pb2.RUNTIME_STATUS_SKIPPED and gated.reason.startswith("input turn: input-schema-invalid")

        second, results = await turn("I knock again.")
        assert from_struct(results["export-probe/reader"].output) == {"previous": {"turn": 1, "note": "heard: I knock."}}
        assert from_struct(results["export-probe/strict"].output) == {"turn": 1}, "the contract's provider's export binds"
        [export] = (await store.ListExports(store_pb2.ListExportsRequest(session_id=session.id))).exports
        assert from_value(export.value)["turn"] == 2 and export.turn_id == second.id, "the latest value replaces the export"
