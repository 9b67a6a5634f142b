"""Sessions: create, read, not found, malformed requests."""

from __future__ import annotations

import grpc

from covel.store.v1 import store_pb2
from shared.structs import from_struct, to_struct
from tests.store.helpers import expect_error, new_session, play_turn, violated_fields


async def test_create_assigns_id_status_phase_times_and_defaults(stub):
    session = await new_session(
        stub,
        title="The lighthouse",
        world_id="coast",
        active_plugins=["narrator", "memory"],
        requested_plugins=["memory"],
        runtime_model_overrides={"narrator": "scripted"},
        plugin_settings={"memory": to_struct({"depth": 3})},
    )
    assert len(session.id) == 36
    assert session.status == store_pb2.SESSION_STATUS_ACTIVE
    assert session.phase == "playing"
    assert session.locale == "en"
    assert session.completed_player_turns == 0
    assert session.created_at.seconds > 0 and session.updated_at == session.created_at

    fetched = (await stub.GetSession(store_pb2.GetSessionRequest(session_id=session.id))).session
    assert fetched == session
    assert list(fetched.active_plugins) == ["narrator", "memory"]
    assert dict(fetched.runtime_model_overrides) == {"narrator": "scripted"}
    assert from_struct(fetched.plugin_settings["memory"]) == {"depth": 3}


async def test_create_keeps_a_given_locale_and_setup_phase(stub):
    session = await new_session(stub, locale="zh-CN", phase="setup")
    assert (session.locale, session.phase) == ("zh-CN", "setup")


async def test_unknown_session_is_not_found_and_names_the_id(stub):
    missing = "00000000-0000-0000-0000-000000000000"
    for call in (
        stub.GetSession(store_pb2.GetSessionRequest(session_id=missing)),
        stub.ListMessages(store_pb2.ListMessagesRequest(session_id=missing)),
        stub.ListTurns(store_pb2.ListTurnsRequest(session_id=missing)),
        stub.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(session_id=missing)),
    ):
        error = await expect_error(grpc.StatusCode.NOT_FOUND, call)
        assert missing in error.details()


async def test_unknown_turn_is_not_found(stub):
    session = await new_session(stub)
    error = await expect_error(
        grpc.StatusCode.NOT_FOUND, stub.GetTurn(store_pb2.GetTurnRequest(session_id=session.id, turn_id="nope"))
    )
    assert "nope" in error.details()


async def test_malformed_requests_name_the_field(stub):
    cases = [
        (store_pb2.CreateSessionRequest(session=store_pb2.Session(id="mine")), "session.id"),
        (store_pb2.CreateSessionRequest(session=store_pb2.Session(locale="not a locale")), "session.locale"),
        (store_pb2.CreateSessionRequest(session=store_pb2.Session(phase="finale")), "session.phase"),
        (store_pb2.CreateSessionRequest(session=store_pb2.Session(active_plugins=["a", "a"])), "session.active_plugins[1]"),
        (store_pb2.CreateSessionRequest(session=store_pb2.Session(status=store_pb2.SESSION_STATUS_ENDED)), "session.status"),
    ]
    for request, field in cases:
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.CreateSession(request))
        assert violated_fields(error) == [field]
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.GetSession(store_pb2.GetSessionRequest()))
    assert violated_fields(error) == ["session_id"]
    session = await new_session(stub)
    error = await expect_error(
        grpc.StatusCode.INVALID_ARGUMENT, stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id, limit=-1))
    )
    assert violated_fields(error) == ["limit"]


async def test_list_messages_limit_returns_the_newest_oldest_first(stub):
    session = await new_session(stub)
    for number in range(3):
        await play_turn(stub, session.id, f"story {number}", player_message=f"action {number}")
    everything = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))).messages
    assert [message.seq for message in everything] == [1, 2, 3, 4, 5, 6]
    assert [message.text for message in everything][:2] == ["action 0", "story 0"]
    newest = (await stub.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id, limit=3))).messages
    assert [message.seq for message in newest] == [4, 5, 6]
    assert [message.text for message in newest] == ["story 1", "action 2", "story 2"]


async def test_update_approvals_approves_active_plugins_once_and_revokes(stub):
    session = await new_session(stub, active_plugins=["narrator", "memory", "dice"], approved_plugins=["dice"])
    reply = await stub.UpdateSessionApprovals(
        store_pb2.UpdateSessionApprovalsRequest(session_id=session.id, approve=["memory", "dice"])
    )
    assert list(reply.session.approved_plugins) == ["dice", "memory"]
    reply = await stub.UpdateSessionApprovals(
        store_pb2.UpdateSessionApprovalsRequest(session_id=session.id, approve=["narrator"], revoke=["dice", "unknown"])
    )
    assert list(reply.session.approved_plugins) == ["memory", "narrator"]
    fetched = (await stub.GetSession(store_pb2.GetSessionRequest(session_id=session.id))).session
    assert list(fetched.approved_plugins) == ["memory", "narrator"]
    assert fetched.updated_at.ToDatetime() >= session.updated_at.ToDatetime()


async def test_update_approvals_rejects_inactive_plugins_and_missing_sessions(stub):
    session = await new_session(stub, active_plugins=["narrator"])
    error = await expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.UpdateSessionApprovals(store_pb2.UpdateSessionApprovalsRequest(session_id=session.id, approve=["narrator", "ghost"])),
    )
    assert violated_fields(error) == ["approve[1]"]
    fetched = (await stub.GetSession(store_pb2.GetSessionRequest(session_id=session.id))).session
    assert list(fetched.approved_plugins) == []
    error = await expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.UpdateSessionApprovals(store_pb2.UpdateSessionApprovalsRequest(session_id=session.id, approve=["narrator"], revoke=["narrator"])),
    )
    assert violated_fields(error) == ["revoke[0]"]
    missing = "00000000-0000-0000-0000-000000000000"
    error = await expect_error(
        grpc.StatusCode.NOT_FOUND,
        stub.UpdateSessionApprovals(store_pb2.UpdateSessionApprovalsRequest(session_id=missing, approve=["narrator"])),
    )
    assert missing in error.details()


async def test_setup_progress_and_the_end_of_the_setup_phase(stub):
    from tests.store.helpers import commit_turn

    pending = {"intro": to_struct({"state": "pending"})}
    session = await new_session(stub, phase="setup", setup_runtimes=pending)
    assert from_struct(session.setup_runtimes["intro"]) == {"state": "pending"}
    reply = await commit_turn(stub, session.id, setup_progress={"intro": to_struct({"state": "pending", "lastError": "no name yet"})})
    assert reply.session.phase == "setup" and reply.session.completed_player_turns == 0  # setup turns do not count
    assert from_struct(reply.session.setup_runtimes["intro"]) == {"state": "pending", "lastError": "no name yet"}
    reply = await commit_turn(
        stub, session.id, phase="playing",
        setup_progress={"intro": to_struct({"state": "done", "resolution": "completed"}), "map": to_struct({"state": "done", "resolution": "waived"})},
    )
    assert reply.session.phase == "playing"
    assert {key: from_struct(value)["state"] for key, value in reply.session.setup_runtimes.items()} == {"intro": "done", "map": "done"}
    reply = await commit_turn(stub, session.id)
    assert reply.session.completed_player_turns == 1
    fetched = (await stub.GetSession(store_pb2.GetSessionRequest(session_id=session.id))).session
    assert fetched.phase == "playing" and len(fetched.setup_runtimes) == 2


async def test_malformed_setup_progress_names_the_field(stub):
    from tests.store.helpers import commit_turn

    for progress, field in (
        ({"intro": {"state": "finished"}}, "setup_progress[intro].state"),
        ({"intro": {"state": "done"}}, "setup_progress[intro].resolution"),
        ({"intro": {"state": "blocked"}}, "setup_progress[intro].reason"),
    ):
        session = await new_session(stub, phase="setup")
        error = await expect_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            commit_turn(stub, session.id, setup_progress={key: to_struct(value) for key, value in progress.items()}),
        )
        assert violated_fields(error) == [field]
    error = await expect_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        stub.CreateSession(store_pb2.CreateSessionRequest(session=store_pb2.Session(setup_runtimes={"x": to_struct({"state": "?"})}))),
    )
    assert violated_fields(error) == ["session.setup_runtimes[x].state"]


async def test_setup_done_is_not_recorded_when_the_store_rolls_the_turn_back(stub):
    from tests.store.helpers import commit_turn

    session = await new_session(stub, phase="setup", setup_runtimes={"intro": to_struct({"state": "pending"})})
    # The story is empty, so its unit is rejected and the whole turn rolls back.
    reply = await commit_turn(stub, session.id, story="   ", phase="playing",
                              setup_progress={"intro": to_struct({"state": "done", "resolution": "completed", "version": "1.0.0"})})
    assert reply.turn.status == store_pb2.TURN_STATUS_FAILED
    progress = from_struct(reply.session.setup_runtimes["intro"])
    assert progress["state"] == "pending" and progress["version"] == "1.0.0" and "did not commit" in progress["lastError"]
    assert reply.session.phase == "setup"


async def test_a_session_keeps_the_owner_it_was_created_with(stub):
    owned = await new_session(stub, owner="alice@example.com")
    assert owned.owner == "alice@example.com"
    assert (await stub.GetSession(store_pb2.GetSessionRequest(session_id=owned.id))).session.owner == "alice@example.com"
    # Ending and approving keep it: the owner is set once, at create.
    ended = (await stub.EndSession(store_pb2.EndSessionRequest(session_id=owned.id))).session
    assert ended.owner == "alice@example.com"
    assert (await new_session(stub)).owner == ""
    error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, stub.CreateSession(
        store_pb2.CreateSessionRequest(session=store_pb2.Session(owner="x" * 201))))
    assert violated_fields(error) == ["session.owner"]


async def test_get_by_owner_answers_another_owners_session_as_a_missing_one(stub):
    """The scheduler's ownership check: the same query and the same NOT_FOUND for a session of another owner, of no
    owner, and for one that does not exist (ids cannot be told apart, by answer or by cost)."""
    mine = await new_session(stub, owner="alice")
    theirs = await new_session(stub, owner="bob")
    ownerless = await new_session(stub)
    asked = (await stub.GetSession(store_pb2.GetSessionRequest(session_id=mine.id, owner="alice"))).session
    assert asked == mine
    missing = "00000000-0000-4000-8000-000000000000"
    answers = {}
    for session_id in (theirs.id, ownerless.id, missing):
        error = await expect_error(grpc.StatusCode.NOT_FOUND,
                                   stub.GetSession(store_pb2.GetSessionRequest(session_id=session_id, owner="alice")))
        answers[session_id] = error.details().replace(session_id, "<id>")
    assert len(set(answers.values())) == 1, answers
