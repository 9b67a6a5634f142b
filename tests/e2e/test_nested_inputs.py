"""A nested run (ctx.recursive_call) sees only its own upstream: not the parent turn's results, not
its parent's upstream plugin data (spec: 嵌套执行里看不到父执行的上游), through all five services."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "nest-view-probe"


async def test_a_nested_run_binds_only_its_own_upstream(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=[PROBE], approved_plugins=[PROBE]))).session
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text="I look.")]))]
    turn = events[-1].turn_completed
    results = {r.runtime_id: r for r in turn.runtime_results}
    caller = results["nest-view-probe/caller"]
    assert caller.status == resources_pb2.RUNTIME_STATUS_SUCCESS, caller.reason
    seen = from_struct(caller.output)
    # The parent itself sees its upstream: source's value and its data.
    assert seen["up"] == {"value": {"from": "source"}} and seen["data"] == "from source"

    child = seen["child"]
    assert child["status"] == "success", child
    assert child["output"] == {
        "up": None,  # source is the parent's upstream, not the nested execution's
        "runtimeResults": [],
        "playerMessage": "A nested message.",
        "actions": [],
        "operations": [],
        "data": None,
        "parentData": None,
    }
    strict = seen["strict"]
    assert strict["status"] == "skipped" and strict["output"] is None, strict
    assert strict["reason"] == ("input up: no value from nest-view-probe/source in this nested execution "
                                "(a nested run sees only its own upstream, not its parent's)")
