"""The demo world as a world package, through the five services: its cast with a player character, its
lorebook, its plugin action kind, and hidden data the demo-world plugin reveals in the same turn the
player asks about it."""

from __future__ import annotations

import json

import pytest

from covel.common.v1 import common_pb2
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, to_struct
from tests.support.builtin_plugins import SETUP_PLUGINS

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

PROBE = "event-key-probe"  # its PreLLMCall guard reports each model call's system prompt (and stops the call)


async def narrator_prompt(stub, session_id: str, action: common_pb2.PlayerAction) -> tuple[str, dict]:
    events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[action]))]
    reports = [e.hook for e in events if e.WhichOneof("event") == "hook" and e.hook.event == "PreLLMCall" and e.hook.runtime_id == "narrator"]
    turn = events[-1].turn_completed
    results = {r.runtime_id: r for r in turn.runtime_results}
    return json.loads(reports[0].message)["system"], from_struct(results["demo-world/reveal"].output)


@pytest.mark.asyncio(loop_scope="session")
async def test_the_demo_world_reveals_a_secret_the_player_asks_about(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
            world_id="demo-world", requested_plugins=[PROBE], approved_plugins=[PROBE], excluded_plugins=SETUP_PLUGINS))).session
        lorebook = (await stub.ListLorebook(scheduler_pb2.ListLorebookRequest(session_id=session.id))).entries
        kinds = (await stub.ListActionKinds(scheduler_pb2.ListActionKindsRequest(session_id=session.id))).kinds
        quiet, nothing = await narrator_prompt(stub, session.id, resources_pb2.PlayerAction(kind="act", text="I sit by the fire."))
        ask = resources_pb2.PlayerAction(kind="demo-world/ask", text="What happened?", fields=to_struct({"topic": "the lens", "whom": "Sela"}))
        asked, revealed = await narrator_prompt(stub, session.id, ask)
        again, second = await narrator_prompt(stub, session.id, resources_pb2.PlayerAction(kind="act", text="I look at the lighthouse."))
    assert session.seats[0].character_id == "traveller"
    assert {e.id for e in lorebook} == {"lighthouse", "drowned-lantern", "the-teeth", "saltmere"}
    assert "demo-world/ask" in {k.kind for k in kinds}
    secret = "Sela took the lighthouse's old lens"
    assert nothing == {"revealed": []} and secret not in quiet
    # Revealed by the pre-turn runtime, in this very turn's story prompt; once only, and it stays.
    assert revealed == {"revealed": ["sela-lens"]} and secret in asked
    assert second == {"revealed": []} and secret in again
    # The lorebook: the constant entry always, the lighthouse when it comes up (the opening names it too).
    assert "Saltmere is a cold northern fishing town" in quiet and "The Gull Point lighthouse" in again
