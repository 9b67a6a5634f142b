"""Setup runtimes: the setup phase until they complete, completion per plugin version, late setup."""

from __future__ import annotations

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel
from shared.structs import from_struct, to_struct

# Only sessions of its own: the session's default group will do (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")
INTRO = "setup-probe/intro"


async def submit(stub, session_id: str, text: str) -> tuple[store_pb2.Turn, dict]:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text=text)])
    turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
    return turn, {r.runtime_id: r for r in turn.runtime_results}


async def test_a_session_stays_in_setup_until_its_setup_runtimes_complete(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(requested_plugins=["setup-probe"], approved_plugins=["setup-probe"]))).session
        assert session.phase == resources_pb2.SESSION_PHASE_SETUP and from_struct(session.setup_runtimes[INTRO]) == {"state": "pending"}

        turn, results = await submit(stub, session.id, "fail, please")
        assert all(r.setup for r in results.values()) and results[INTRO].status == resources_pb2.RUNTIME_STATUS_FAILED, \
            "while the setup is pending a turn runs only its setup stage"
        after = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session
        assert after.phase == resources_pb2.SESSION_PHASE_SETUP and after.completed_player_turns == 0
        assert from_struct(after.setup_runtimes[INTRO]) == {
            "state": "pending", "lastError": "handler raised RuntimeError: not ready yet", "attempts": 1, "version": "0.2.0"}

        turn, results = await submit(stub, session.id, "Hello")
        assert results[INTRO].status == resources_pb2.RUNTIME_STATUS_SUCCESS and results["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, \
            "the setup finished in this turn's setup stage: the turn goes on to the story (the opening)"
        assert from_struct(results["setup-probe/pre"].output) == {"phase": "setup"}, "the phase turns at this turn's commit"
        after = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session
        assert after.phase == resources_pb2.SESSION_PHASE_PLAYING and after.completed_player_turns == 1, \
            "the turn that ends the setup also answered the player's own words: it is the first player turn"
        assert from_struct(after.setup_runtimes[INTRO]) == {"state": "done", "resolution": "completed", "version": "0.2.0"}

        turn, results = await submit(stub, session.id, "I look around.")
        assert INTRO not in results, "a completed setup runtime does not run again"
        assert from_struct(results["setup-probe/pre"].output) == {"phase": "playing"} and results["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS


async def test_late_setup_reruns_a_setup_runtime_of_a_new_version_before_pre_turn(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel, services.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        # A session already playing, whose setup ran with an older version of the plugin.
        session = (await store.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(
            locale="en", active_plugins=["narrator", "setup-probe"], approved_plugins=["setup-probe"], phase="playing",
            setup_runtimes={INTRO: to_struct({"state": "done", "resolution": "completed", "version": "0.1.0"})})))).session
        events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
            session_id=session.id, actions=[resources_pb2.PlayerAction(text="I carry on.")]))]
        started = [e.runtime_started.runtime_id for e in events if e.WhichOneof("event") == "runtime_started"]
        turn = events[-1].turn_completed
        results = {r.runtime_id: r for r in turn.runtime_results}
        assert results[INTRO].status == resources_pb2.RUNTIME_STATUS_SUCCESS and results["narrator"].status == resources_pb2.RUNTIME_STATUS_SUCCESS
        assert started.index(INTRO) < started.index("setup-probe/pre") < started.index("narrator"), "late setup runs before pre-turn"
        after = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id))).session
        assert from_struct(after.setup_runtimes[INTRO])["version"] == "0.2.0" and after.completed_player_turns == 1
