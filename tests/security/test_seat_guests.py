"""Several players in one story (docs/api.md "Seats"), through the five services as real processes with principals
from a users file: the owner invites a player to a seat with a one-time grant, the guest joins, plays its own seat
and nothing else, both follow every turn with WatchSession, the story says who acted, and a revoked guest is a
stranger again."""

from __future__ import annotations

import asyncio

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.errors import error_info
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from tests.e2e.conftest import minimal_session
from tests.security.warm_up import until_sessions_open

pytestmark = pytest.mark.asyncio(loop_scope="session")

USERS = """
users:
  - principal: alice
    token: alice-token
  - principal: bob
    token: bob-token
  - principal: carol
    token: carol-token
  - principal: ops
    token: ops-token
    roles: [operator]
"""
SEATS = [resources_pb2.Seat(id="main", role=resources_pb2.SEAT_ROLE_PLAYER),
         resources_pb2.Seat(id="second", role=resources_pb2.SEAT_ROLE_PLAYER)]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stubs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("seats")
    (folder / "users.yaml").write_text(USERS)
    env = {"COVEL_PLUGIN_DIRS": str(REPO_ROOT / "plugins"), "COVEL_API_USERS_FILE": str(folder / "users.yaml")}
    group = ServiceGroup(free_port_addrs(), folder / "data", extra_env=env)
    channels = []
    try:
        await group.start()
        await until_sessions_open(group.addrs["scheduler"], "ops-token")
        found = {}
        for name in ("alice", "bob", "carol", "ops"):
            channels.append(open_channel(group.addrs["scheduler"], bearer_token=f"{name}-token"))
            found[name] = scheduler_pb2_grpc.SchedulerStub(channels[-1])
        yield found
    finally:
        for channel in channels:
            await channel.close()
        await group.stop()


async def refused(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    return raised.value


async def play(stub, session_id: str, text: str, seat_id: str = "") -> resources_pb2.Turn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="act", text=text,
                                                                                                             seat_id=seat_id)])
    events = [event async for event in stub.SubmitActions(request, timeout=60)]
    return events[-1].turn_completed


async def invited(alice, session_id: str, **fields) -> str:
    return (await alice.InviteToSeat(scheduler_pb2.InviteToSeatRequest(session_id=session_id, seat_id="second", **fields), timeout=10)).grant


async def test_a_guest_joins_with_a_one_time_grant_and_plays_its_own_seat_only(stubs):
    alice, bob, carol = stubs["alice"], stubs["bob"], stubs["carol"]
    session = (await alice.CreateSession(minimal_session(seats=SEATS), timeout=15)).session
    # Only the owner invites: a stranger learns nothing of the session, a guest may not, main is the owner's own.
    stranger = await refused(carol.InviteToSeat(scheduler_pb2.InviteToSeatRequest(session_id=session.id, seat_id="second"), timeout=10))
    assert stranger.code() == grpc.StatusCode.NOT_FOUND and error_info(stranger).reason == "SESSION_NOT_FOUND"
    main = await refused(alice.InviteToSeat(scheduler_pb2.InviteToSeatRequest(session_id=session.id, seat_id="main"), timeout=10))
    assert main.code() == grpc.StatusCode.INVALID_ARGUMENT
    own = await refused(alice.JoinSeat(scheduler_pb2.JoinSeatRequest(grant=await invited(alice, session.id)), timeout=10))
    assert error_info(own).reason == "SEAT_GRANT_OWN_SESSION"

    grant = await invited(alice, session.id)
    joined = await bob.JoinSeat(scheduler_pb2.JoinSeatRequest(grant=grant), timeout=10)
    assert joined.seat_id == "second" and [seat.occupant for seat in joined.session.seats] == ["", "bob"]
    again = await refused(carol.JoinSeat(scheduler_pb2.JoinSeatRequest(grant=grant), timeout=10))
    assert again.code() == grpc.StatusCode.PERMISSION_DENIED and error_info(again).reason == "SEAT_GRANT_INVALID"
    forged = await refused(carol.JoinSeat(scheduler_pb2.JoinSeatRequest(grant=f"{session.id}.{'x' * 32}"), timeout=10))
    assert error_info(forged).reason == "SEAT_GRANT_INVALID"
    bad = await refused(carol.JoinSeat(scheduler_pb2.JoinSeatRequest(grant="nonsense"), timeout=10))
    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT

    # The guest reads and plays its seat; it may not act for the owner's seat nor run the owner's moves.
    assert (await bob.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id), timeout=10)).session.owner == "alice"
    ended = await refused(bob.EndSession(scheduler_pb2.EndSessionRequest(session_id=session.id), timeout=10))
    assert ended.code() == grpc.StatusCode.PERMISSION_DENIED and error_info(ended).reason == "SEAT_GUEST_NOT_ALLOWED"
    for_owner = await refused(play(bob, session.id, "I sit in the host's chair.", seat_id="main"))
    assert error_info(for_owner).reason == "SEAT_NOT_YOURS"
    taken = await refused(play(alice, session.id, "I speak for Bob.", seat_id="second"))
    assert taken.code() == grpc.StatusCode.INVALID_ARGUMENT and "played by another player (bob)" in taken.details()

    turn = await play(bob, session.id, "I wave from the doorway.")
    assert [action.seat_id for action in turn.actions] == ["second"]
    assert "bob" in turn.player_message and "I wave from the doorway." in turn.player_message, turn.player_message
    mine = await play(alice, session.id, "I wave back.")
    assert "alice" in mine.player_message and [action.seat_id for action in mine.actions] == ["main"]

    # Revoked: the guest is a stranger again; its seat is free for the owner.
    await alice.RevokeSeat(scheduler_pb2.RevokeSeatRequest(session_id=session.id, seat_id="second"), timeout=10)
    gone = await refused(bob.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id), timeout=10))
    assert gone.code() == grpc.StatusCode.NOT_FOUND
    assert (await play(alice, session.id, "I take the second chair.", seat_id="second")).player_message


async def test_an_expired_grant_is_refused(stubs):
    alice, bob = stubs["alice"], stubs["bob"]
    session = (await alice.CreateSession(minimal_session(seats=SEATS), timeout=15)).session
    grant = await invited(alice, session.id, ttl_s=1)
    await asyncio.sleep(2.5)
    expired = await refused(bob.JoinSeat(scheduler_pb2.JoinSeatRequest(grant=grant), timeout=10))
    assert expired.code() == grpc.StatusCode.PERMISSION_DENIED and error_info(expired).reason == "SEAT_GRANT_EXPIRED"
    too_long = await refused(alice.InviteToSeat(scheduler_pb2.InviteToSeatRequest(session_id=session.id, seat_id="second", ttl_s=10**7),
                                                timeout=10))
    assert too_long.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_both_players_watch_every_turn_whoever_submitted_it(stubs):
    alice, bob = stubs["alice"], stubs["bob"]
    session = (await alice.CreateSession(minimal_session(seats=SEATS), timeout=15)).session
    await bob.JoinSeat(scheduler_pb2.JoinSeatRequest(grant=await invited(alice, session.id)), timeout=10)
    seen: dict[str, list[scheduler_pb2.TurnEvent]] = {"alice": [], "bob": []}

    async def watch(name: str, stub) -> None:
        async for event in stub.WatchSession(scheduler_pb2.WatchSessionRequest(session_id=session.id)):
            seen[name].append(event)

    watchers = [asyncio.create_task(watch("alice", alice)), asyncio.create_task(watch("bob", bob))]
    await asyncio.sleep(0.5)
    try:
        await play(bob, session.id, "I knock twice.")
        await play(alice, session.id, "I open the door.")

        def completed(name: str) -> list[resources_pb2.Turn]:
            return [event.turn_completed for event in seen[name] if event.WhichOneof("event") == "turn_completed"]

        for _ in range(200):
            if len(completed("alice")) == 2 and len(completed("bob")) == 2:
                break
            await asyncio.sleep(0.1)
        for name in ("alice", "bob"):
            started = [event.turn_started for event in seen[name] if event.WhichOneof("event") == "turn_started"]
            assert [[action.seat_id for action in one.actions] for one in started] == [["second"], ["main"]], name
            assert [turn.actions[0].text for turn in completed(name)] == ["I knock twice.", "I open the door."], name
            assert any(event.WhichOneof("event") == "narrative_delta" for event in seen[name]), name
    finally:
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
