"""What the Deployments' terminationGracePeriodSeconds relies on: a scheduler sent SIGTERM in the
middle of a turn finishes that turn (the stream ends with turn_completed, the turn commits),
then exits 0."""

from __future__ import annotations

import asyncio
import os
import signal

import grpc

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.settings import REPO_ROOT

# Slow story chunks, so the turn is still streaming when SIGTERM arrives.
CHUNK_DELAY_MS = 40


async def test_sigterm_mid_turn_drains_the_turn_then_exits(tmp_path):
    env = {
        "COVEL_PLUGIN_DIRS": str(REPO_ROOT / "plugins"),
        "COVEL_GATEWAY_SCRIPTED_CHUNK_DELAY_MS": str(CHUNK_DELAY_MS),
        "COVEL_SCHEDULER_DRAIN_S": "20",
    }
    group = ServiceGroup(free_port_addrs(), tmp_path, extra_env=env)
    try:
        await group.start()
        scheduler = group.processes["scheduler"]
        async with grpc.aio.insecure_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=20)).session
            stream = stub.SubmitActions(
                scheduler_pb2.SubmitActionsRequest(
                    session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text="I open the door")]
                ),
                timeout=60,
            )
            kinds: list[str] = []
            completed = None
            async for event in stream:
                kind = event.WhichOneof("event")
                kinds.append(kind)
                if kind == "narrative_delta" and kinds.count("narrative_delta") == 1:
                    os.kill(scheduler.pid, signal.SIGTERM)
                if kind == "turn_completed":
                    completed = event.turn_completed
            assert "narrative_delta" in kinds and kinds[-1] == "turn_completed", kinds
            assert completed.status == store_pb2.TURN_STATUS_COMMITTED, completed
            assert completed.narrative
            # The turn was still streaming when the signal came, and went on to the end.
            assert kinds.count("narrative_delta") > 1, kinds
        assert await asyncio.wait_for(scheduler.wait(), 30) == 0
    finally:
        await group.stop()
