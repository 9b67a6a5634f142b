"""RenameSession and a turn's token usage, on both backends: a rename is idempotent and refused by field; a turn's
usage is its runtimes' added up (the largest context of any), the same in CommitTurn's reply and when read."""

from __future__ import annotations

import grpc

from covel.store.v1 import store_pb2
from tests.store.helpers import acquire, commit_turn, expect_error, new_session, story_result, violated_fields


async def test_a_rename_is_idempotent_allowed_during_a_turn_and_refused_by_field(stub):
    session = await new_session(stub)
    renamed = await stub.RenameSession(store_pb2.RenameSessionRequest(session_id=session.id, title="  The harbour  "))
    assert renamed.changed and renamed.session.title == "The harbour"
    assert renamed.session.updated_at.ToDatetime() >= session.updated_at.ToDatetime()
    again = await stub.RenameSession(store_pb2.RenameSessionRequest(session_id=session.id, title="The harbour"))
    assert not again.changed and again.session.updated_at == renamed.session.updated_at
    await acquire(stub, session.id, ttl_ms=60000)  # a running turn does not stop a rename: the title is not its state
    during = await stub.RenameSession(store_pb2.RenameSessionRequest(session_id=session.id, title="Mid-turn"))
    assert during.changed and during.session.title == "Mid-turn"
    for title in ("", "   ", "x" * 501, "a\tb"):
        error = await expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            stub.RenameSession(store_pb2.RenameSessionRequest(session_id=session.id, title=title)),
        )
        assert violated_fields(error) == ["title"], title
    await expect_error(
        grpc.StatusCode.NOT_FOUND, stub.RenameSession(store_pb2.RenameSessionRequest(session_id="no-such", title="x"))
    )


async def test_a_turns_usage_adds_its_runtimes_up(stub):
    session = await new_session(stub)
    story = story_result()
    story.usage.CopyFrom(
        store_pb2.TokenUsage(prompt_tokens=900, completion_tokens=120, calls=2, context_tokens=600, context_window=8192)
    )
    memory = store_pb2.RuntimeResult(
        runtime_id="memory/extract",
        plugin_id="memory",
        status="success",
        usage=store_pb2.TokenUsage(prompt_tokens=1500, completion_tokens=30, calls=1, context_tokens=1500, context_window=32000),
    )
    quiet = store_pb2.RuntimeResult(runtime_id="dice", plugin_id="dice-check", status="success")
    committed = await commit_turn(stub, session.id, runtime_results=[story, memory, quiet])
    expected = store_pb2.TokenUsage(prompt_tokens=2400, completion_tokens=150, calls=3, context_tokens=1500, context_window=32000)
    assert committed.turn.usage == expected
    read = (await stub.GetTurn(store_pb2.GetTurnRequest(session_id=session.id, turn_id=committed.turn.id))).turn
    assert read.usage == expected and [r.usage.calls for r in read.runtime_results] == [2, 1, 0]
    none = await commit_turn(stub, session.id, runtime_results=[quiet])
    assert not none.turn.HasField("usage"), "no model was called: no usage"
