"""A batch of read-only calls runs as one concurrent pool; a non-read-only call is a barrier."""

from __future__ import annotations

import os

import pytest
import pytest_asyncio
import yaml

from covel.common.v1 import common_pb2
from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from shared.structs import to_struct

pytestmark = pytest.mark.asyncio(loop_scope="session")
SLOW = {"name": "lookup", "arguments": {"word": "slow"}}
BATCH = [SLOW, SLOW, SLOW, {"name": "save-note", "arguments": {"note": "after the pool"}}, SLOW]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scripted_services(tmp_path_factory):
    data = tmp_path_factory.mktemp("pool")
    script = data / "script.yaml"
    script.write_text(yaml.safe_dump({"rules": [{"match": "pool test", "slots": ["plugin"], "reply": {"tool_calls": BATCH}}]}))
    group = ServiceGroup(free_port_addrs(), data, extra_env={
        "COVEL_PLUGIN_DIRS": os.pathsep.join([str(REPO_ROOT / "plugins"), str(REPO_ROOT / "tests" / "fixtures" / "plugins")]),
        "COVEL_GATEWAY_SCRIPT": str(script),
    })
    try:
        await group.start()
        yield group
    finally:
        await group.stop()


async def test_pool_then_barrier(scripted_services) -> None:
    async with open_channel(scripted_services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            requested_plugins=["tool-probe"], approved_plugins=["tool-probe"],
            plugin_settings={"tool-probe": to_struct({"runtime": "tool-probe/looper", "terminate": True})}))).session
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[common_pb2.PlayerAction(text="pool test")])
        events = [event async for event in stub.SubmitActions(request)]
        turn = events[-1].turn_completed
    looper = next(r for r in turn.runtime_results if r.runtime_id == "tool-probe/looper")
    assert looper.status == "success", looper.reason
    probe = [e.event for e in turn.hook_trace
             if e.event in ("PreToolUse", "PostToolUse") and e.runtime_id == "tool-probe/looper"]
    # Pool of three: three PreToolUse, then three PostToolUse; terminate skips the barrier and the rest.
    assert probe[:6] == ["PreToolUse"] * 3 + ["PostToolUse"] * 3
    assert len(probe) == 6
    [looper_ms] = [e.runtime_finished.duration_ms for e in events
                   if e.WhichOneof("event") == "runtime_finished" and e.runtime_finished.runtime_id == "tool-probe/looper"]
    assert 300 <= looper_ms < 600, f"three 0.3 s lookups ran together ({looper_ms} ms), not one after another"
