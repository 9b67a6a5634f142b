"""Plain `def` hook handlers through the five real services: bounded by their timeout (a guard
fails closed, recorded as a timeout fault; elsewhere the handler is skipped) and run off the
hooks service's event loop, so one session's slow handler does not hold up another session."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.grpc_client import open_channel
from shared.structs import to_struct
from tests.e2e.conftest import minimal_session

pytestmark = pytest.mark.asyncio(loop_scope="session")
PROBE = "sync-sleeper"


async def new_session(stub, settings: dict) -> str:
    request = minimal_session(requested_plugins=[PROBE], approved_plugins=[PROBE], plugin_settings={PROBE: to_struct(settings)})
    return (await stub.CreateSession(request)).session.id


async def play(stub, session_id: str, text: str = "I wait by the well.") -> list:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)])
    return [event async for event in stub.SubmitActions(request)]


def hooks_of(events, event_name: str) -> list:
    return [e.hook for e in events if e.WhichOneof("event") == "hook" and e.hook.event == event_name]


async def test_a_sync_guard_past_its_timeout_aborts_the_turn_and_counts_as_a_timeout_fault(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session_id = await new_session(stub, {"turnStartSleepMs": 500})
        for _ in range(3):
            events = await play(stub, session_id)
            turn = events[-1].turn_completed
            assert turn.status == store_pb2.TURN_STATUS_ABORTED
            assert "sync-sleeper" in turn.abort_reason and "did not finish within 50 ms" in turn.abort_reason
            assert [entry.status for entry in hooks_of(events, "TurnStart")] == [resources_pb2.HOOK_STATUS_TIMEOUT]
        paused = await stub.ListPausedPlugins(scheduler_pb2.ListPausedPluginsRequest(session_id=session_id))
        assert [plugin.plugin_id for plugin in paused.plugins] == [PROBE]
        assert paused.plugins[0].faults == 3 and "did not finish within 50 ms" in paused.plugins[0].reason
        # Paused: the next turn runs without the plugin's hooks.
        assert (await play(stub, session_id))[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED


async def test_a_slow_sync_hook_in_one_session_does_not_hold_up_another_session(services, tmp_path: Path) -> None:
    marker = tmp_path / "session-a.marker"
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session_a = await new_session(stub, {"preScheduleSleepMs": 3000, "marker": str(marker)})
        session_b = await new_session(stub, {})
        slow_turn = asyncio.create_task(play(stub, session_a))
        deadline = time.monotonic() + 20
        while not (marker.exists() and marker.read_text() == "sleeping"):
            assert time.monotonic() < deadline and not slow_turn.done(), "session A's PreSchedule hook never started"
            await asyncio.sleep(0.02)
        started = time.monotonic()
        events_b = await play(stub, session_b)
        took = time.monotonic() - started
        assert marker.read_text() == "sleeping", f"session B's turn ({took:.2f} s) waited for session A's hook"
        assert events_b[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
        assert [entry.status for entry in hooks_of(events_b, "PreSchedule")] == [resources_pb2.HOOK_STATUS_OK]
        assert took < 2.0
        events_a = await slow_turn
        assert events_a[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
        assert [entry.status for entry in hooks_of(events_a, "PreSchedule")] == [resources_pb2.HOOK_STATUS_OK]


async def test_a_sync_hook_past_its_timeout_on_a_non_guard_event_is_skipped(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session_id = await new_session(stub, {"preLLMCallSleepMs": 500})
        events = await play(stub, session_id)
        turn = events[-1].turn_completed
        # Its late replace (a model that does not exist) is discarded: the narrator's call goes on.
        assert turn.status == store_pb2.TURN_STATUS_COMMITTED and turn.narrative
        [entry] = hooks_of(events, "PreLLMCall")
        # The sandbox replaces the worker whose thread runs on, and kills it (tests/security/test_plugin_sandbox.py).
        assert entry.status == resources_pb2.HOOK_STATUS_TIMEOUT and "its worker process is replaced and stopped" in entry.message
