"""Ending and deleting sessions, on both backends."""

from __future__ import annotations

import grpc

from covel.store.v1 import store_pb2
from tests.store.helpers import acquire, expect_error, new_session, play_turn, violated_fields


async def test_end_keeps_the_record_and_stops_turns(stub):
    session = await new_session(stub)
    await play_turn(stub, session.id, "The tide comes in.")
    ended = await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id, reason="ended"))
    assert ended.changed and ended.session.status == store_pb2.SESSION_STATUS_ENDED
    again = await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id))
    assert not again.changed
    messages = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages
    assert [m.role for m in messages] == ["player", "story"]
    await expect_error(grpc.StatusCode.FAILED_PRECONDITION, stub.AcquireTurnLease(
        store_pb2.AcquireTurnLeaseRequest(session_id=session.id, holder="t", ttl_ms=1000)))


async def test_delete_removes_everything(stub):
    session = await new_session(stub)
    await play_turn(stub, session.id, "The tide goes out.")
    deleted = await stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id, reason="deleted"))
    assert deleted.changed and not deleted.HasField("session")
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.GetSession(store_pb2.GetSessionRequest(session_id=session.id)))
    await expect_error(grpc.StatusCode.NOT_FOUND, stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id)))


async def test_a_running_turn_blocks_ending_and_bad_reasons_name_the_field(stub):
    session = await new_session(stub)
    await acquire(stub, session.id, ttl_ms=60000)
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id)))
    assert "turn running" in error.details()
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT,
                               stub.EndSession(store_pb2.EndSessionRequest(session_id=session.id, reason="paused")))
    assert violated_fields(error) == ["reason"]
