"""The fault breaker kept with the session: faults from any hooks replica count together; the pause shows on
the session (so on every turn's lease) until reset."""

from __future__ import annotations

import asyncio

import grpc

from covel.store.v1 import store_pb2
from tests.store.helpers import acquire, expect_error, new_session


def faults(session_id: str, turn_id: str, *entries: tuple[str, str], threshold: int = 3, window_ms: int = 60_000):
    return store_pb2.RecordPluginFaultsRequest(
        session_id=session_id, turn_id=turn_id, threshold=threshold, window_ms=window_ms,
        faults=[store_pb2.PluginFault(plugin_id=plugin, status=status, message=f"{status} in {plugin}") for plugin, status in entries])


async def test_faults_reported_by_two_replicas_pause_the_plugin_for_the_next_turn(stub, hooks):
    session = await new_session(stub)
    # Replica A saw two faults; replica B one (and a veto, which is the plugin doing its job).
    first = await hooks.RecordPluginFaults(faults(session.id, "t1", ("flaky", "error"), ("flaky", "timeout")))
    assert list(first.paused) == []
    second = await hooks.RecordPluginFaults(faults(session.id, "t2", ("flaky", "abort"), ("flaky", "invalid-result"), ("calm", "error")))
    [pause] = second.paused
    assert (pause.plugin_id, pause.faults, pause.turn_id) == ("flaky", 3, "t2") and "3 hook faults" in pause.reason
    assert "invalid-result" in pause.reason
    # Every turn's lease reads the pause with the session.
    reply = await acquire(stub, session.id)
    assert [p.plugin_id for p in reply.session.paused_plugins] == ["flaky"]
    # Faults of a paused plugin change nothing; another plugin counts on its own.
    again = await hooks.RecordPluginFaults(faults(session.id, "t3", ("flaky", "error"), ("calm", "error")))
    assert list(again.paused) == []
    assert (await stub.ResetPluginFaults(store_pb2.ResetPluginFaultsRequest(session_id=session.id, plugin_id="flaky"))).was_paused
    assert not (await stub.ResetPluginFaults(store_pb2.ResetPluginFaultsRequest(session_id=session.id, plugin_id="flaky"))).was_paused
    after = (await stub.GetSession(store_pb2.GetSessionRequest(session_id=session.id))).session
    assert list(after.paused_plugins) == []


async def test_old_faults_fall_out_of_the_window(stub, hooks):
    session = await new_session(stub)
    await hooks.RecordPluginFaults(faults(session.id, "t1", ("slow", "timeout"), threshold=2, window_ms=1))
    await asyncio.sleep(0.01)
    reply = await hooks.RecordPluginFaults(faults(session.id, "t2", ("slow", "timeout"), threshold=2, window_ms=1))
    assert list(reply.paused) == []


async def test_bad_reports_are_refused_by_field(stub, hooks):
    session = await new_session(stub)
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, hooks.RecordPluginFaults(faults(session.id, "t", ("p", "error"), threshold=0)))
    assert "threshold" in error.details()
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, hooks.RecordPluginFaults(faults(session.id, "t", ("", "error"))))
    assert "faults[0].plugin_id" in error.details()
    await expect_error(grpc.StatusCode.NOT_FOUND, hooks.RecordPluginFaults(faults("no-such-session", "t", ("p", "error"))))


async def test_a_missing_or_ended_session_says_so_in_the_error_details(stub):
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    from shared.errors import error_info

    missing = await expect_error(grpc.StatusCode.NOT_FOUND, stub.GetSession(store_pb2.GetSessionRequest(session_id="no-such-session")))
    assert error_info(missing).reason == "SESSION_NOT_FOUND"
    [resource] = [d for d in rpc_status.from_call(missing).details if d.Is(error_details_pb2.ResourceInfo.DESCRIPTOR)]
    info = error_details_pb2.ResourceInfo()
    resource.Unpack(info)
    assert (info.resource_type, info.resource_name) == ("covel.scheduler.v1.Session", "no-such-session")
    session = await new_session(stub)
    await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id))
    ended = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, acquire(stub, session.id))
    assert error_info(ended).reason == "SESSION_ENDED"
    [failure] = [d for d in rpc_status.from_call(ended).details if d.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR)]
    violations = error_details_pb2.PreconditionFailure()
    failure.Unpack(violations)
    assert violations.violations[0].subject == f"sessions/{session.id}"
