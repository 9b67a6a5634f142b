"""Sessions belong to their creator (issue 18): the five services as real processes, principals from
a users file, an OIDC issuer (a real local one) and COVEL_API_TOKEN; one user cannot touch another's
session by id, an operator can."""

from __future__ import annotations

import hashlib
from typing import Any, cast

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.errors import error_info
from shared.grpc_client import open_channel
from shared.security.principals import API_TOKEN_PRINCIPAL, INVALID_TOKEN, MISSING_TOKEN
from shared.settings import REPO_ROOT
from tests.e2e.conftest import minimal_session
from tests.security.oidc_issuer import AUDIENCE, Issuer, new_key
from tests.security.warm_up import until_sessions_open

OPERATOR_TOKEN = "operator-token-for-tests"
USERS = f"""
users:
  - principal: alice
    token: alice-token
  - principal: bob
    token_sha256: {hashlib.sha256(b"bob-token").hexdigest()}
  - principal: ops
    token: ops-token
    roles: [operator]
"""
MISSING_ID = "00000000-0000-0000-0000-000000000000"
SAY = [resources_pb2.PlayerAction(kind="do", text="I open the door.")]


def session_calls(session_id: str) -> dict[str, tuple[str, object]]:
    """Every Scheduler method that acts on a session by id: its request ("stream" for server streams)."""
    return {
        "GetSession": ("unary", scheduler_pb2.GetSessionRequest(session_id=session_id)),
        "SubmitActions": ("stream", scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=SAY)),
        "RunManual": ("stream", scheduler_pb2.RunManualRequest(session_id=session_id, runtime_id="narrator/narrator")),
        "ListMessages": ("unary", scheduler_pb2.ListMessagesRequest(session_id=session_id)),
        "GetTurn": ("unary", scheduler_pb2.GetTurnRequest(session_id=session_id, turn_id=MISSING_ID)),
        "ListTurns": ("unary", scheduler_pb2.ListTurnsRequest(session_id=session_id)),
        "ListPausedPlugins": ("unary", scheduler_pb2.ListPausedPluginsRequest(session_id=session_id)),
        "ResetPluginFaults": ("unary", scheduler_pb2.ResetPluginFaultsRequest(session_id=session_id, plugin_id="narrator")),
        "SetPluginApprovals": ("unary", scheduler_pb2.SetPluginApprovalsRequest(session_id=session_id, approve=["narrator"])),
        "Cancel": ("unary", scheduler_pb2.CancelRequest(session_id=session_id)),
        "Interject": ("unary", scheduler_pb2.InterjectRequest(session_id=session_id, text="psst")),
        "GetSessionPlugins": ("unary", scheduler_pb2.GetSessionPluginsRequest(session_id=session_id)),
        "ListActionKinds": ("unary", scheduler_pb2.ListActionKindsRequest(session_id=session_id)),
        "ListLorebook": ("unary", scheduler_pb2.ListLorebookRequest(session_id=session_id)),
        "SyncWorldData": ("unary", scheduler_pb2.SyncWorldDataRequest(session_id=session_id, dry_run=True)),
        "PutLorebookEntry": ("unary", scheduler_pb2.PutLorebookEntryRequest(session_id=session_id, id="x", keys=["x"], content="x")),
        "DeleteLorebookEntry": ("unary", scheduler_pb2.DeleteLorebookEntryRequest(session_id=session_id, id="x")),
        "ListSettlements": ("unary", scheduler_pb2.ListSettlementsRequest(session_id=session_id)),
        "ListInteractions": ("unary", scheduler_pb2.ListInteractionsRequest(session_id=session_id)),
        "InvokeAction": ("unary", scheduler_pb2.InvokeActionRequest(session_id=session_id, plugin_id="narrator", action="x")),
        "ListCommands": ("unary", scheduler_pb2.ListCommandsRequest(session_id=session_id)),
        "ListPanels": ("unary", scheduler_pb2.ListPanelsRequest(session_id=session_id)),
        "ListDetachedJobs": ("unary", scheduler_pb2.ListDetachedJobsRequest(session_id=session_id)),
        "WatchTurn": ("stream", scheduler_pb2.WatchTurnRequest(session_id=session_id)),
        "RunCommand": ("unary", scheduler_pb2.RunCommandRequest(session_id=session_id, text="/x")),
        "SubmitInteraction": ("stream", scheduler_pb2.SubmitInteractionRequest(session_id=session_id, interaction_id="i")),
        "ResolveSettlement": ("unary", scheduler_pb2.ResolveSettlementRequest(session_id=session_id, source_turn_id="t", runtime_id="r",
                                                                             resolution=resources_pb2.SETTLEMENT_RESOLUTION_SKIPPED)),
        "SetSessionPlugins": ("unary", scheduler_pb2.SetSessionPluginsRequest(session_id=session_id, enable=["guide"])),
        "SwitchCharacter": ("unary", scheduler_pb2.SwitchCharacterRequest(session_id=session_id, character_id="nobody")),
        "ResetSession": ("unary", scheduler_pb2.ResetSessionRequest(session_id=session_id)),
        "RetryTurn": ("stream", scheduler_pb2.RetryTurnRequest(session_id=session_id)),
        "ListTurnVersions": ("unary", scheduler_pb2.ListTurnVersionsRequest(session_id=session_id)),
        "SelectTurnVersion": ("unary", scheduler_pb2.SelectTurnVersionRequest(session_id=session_id, turn_id="t")),
        "RewindSession": ("unary", scheduler_pb2.RewindSessionRequest(session_id=session_id, turn_id="t")),
        "BranchSession": ("unary", scheduler_pb2.BranchSessionRequest(session_id=session_id, turn_id="t")),
        "InviteToSeat": ("unary", scheduler_pb2.InviteToSeatRequest(session_id=session_id, seat_id="second")),
        "RevokeSeat": ("unary", scheduler_pb2.RevokeSeatRequest(session_id=session_id, seat_id="second")),
        "WatchSession": ("stream", scheduler_pb2.WatchSessionRequest(session_id=session_id)),
        "GetMedia": ("unary", scheduler_pb2.GetMediaRequest(session_id=session_id, path="media/x.png")),
        "RenameSession": ("unary", scheduler_pb2.RenameSessionRequest(session_id=session_id, title="Mine now")),
        "SelectOpening": ("unary", scheduler_pb2.SelectOpeningRequest(session_id=session_id)),
        "EndSession": ("unary", scheduler_pb2.EndSessionRequest(session_id=session_id)),
    }


async def call(stub: scheduler_pb2_grpc.SchedulerStub, method: str, kind: str, request) -> object:
    if kind == "stream":
        return [event async for event in getattr(stub, method)(request, timeout=30)]
    return await getattr(stub, method)(request, timeout=15)


async def refusal(stub, method: str, kind: str, request) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call(stub, method, kind, request)
    return refused.value


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def services(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ownership")
    (folder / "users.yaml").write_text(USERS)
    issuer = Issuer()
    env = {
        "COVEL_PLUGIN_DIRS": str(REPO_ROOT / "plugins"),
        "COVEL_API_USERS_FILE": str(folder / "users.yaml"),
        "COVEL_API_TOKEN": OPERATOR_TOKEN,
        "COVEL_OIDC_ISSUER": issuer.url,
        "COVEL_OIDC_AUDIENCE": AUDIENCE,
    }
    group = ServiceGroup(free_port_addrs(), folder / "data", extra_env=env)
    try:
        await group.start()
        await until_sessions_open(group.addrs["scheduler"], OPERATOR_TOKEN)
        yield group, issuer
    finally:
        await group.stop()
        issuer.close()


class Clients:
    """One scheduler stub per bearer token, on channels closed at the end."""

    def __init__(self, addr: str) -> None:
        self._addr = addr
        self._channels: list[grpc.aio.Channel] = []

    def stub(self, token: str | None) -> scheduler_pb2_grpc.SchedulerStub:
        channel = open_channel(self._addr, bearer_token=token)
        self._channels.append(channel)
        return scheduler_pb2_grpc.SchedulerStub(channel)

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()


@pytest_asyncio.fixture(loop_scope="session")
async def clients(services):
    group, _ = services
    opened = Clients(group.addrs["scheduler"])
    yield opened
    await opened.close()


def test_the_table_names_every_session_method():
    """A Scheduler method added later that takes a session_id must be added to session_calls (and is checked anyway)."""
    service = scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"]
    with_session = {m.name for m in service.methods if "session_id" in m.input_type.fields_by_name}
    assert with_session == set(session_calls("x"))


async def test_a_stranger_cannot_touch_a_session_by_id_and_learns_nothing(clients):
    alice, bob = clients.stub("alice-token"), clients.stub("bob-token")
    session = (await alice.CreateSession(minimal_session(), timeout=15)).session
    assert session.owner == "alice"
    for method, (kind, request) in session_calls(session.id).items():
        refused = await refusal(bob, method, kind, request)
        # Word for word what a session that does not exist gets: ids cannot be probed.
        missing = await refusal(bob, method, kind, session_calls(MISSING_ID)[method][1])
        assert (refused.code(), refused.details()) == (grpc.StatusCode.NOT_FOUND, f"session {session.id} not found"), method
        assert (missing.code(), missing.details()) == (grpc.StatusCode.NOT_FOUND, f"session {MISSING_ID} not found"), method
        assert error_info(refused).reason == error_info(missing).reason == "SESSION_NOT_FOUND", method
    # A /new from a stranger's session: the parent is as unknown as a missing one.
    for parent in (session.id, MISSING_ID):
        refused = await refusal(bob, "CreateSession", "unary", minimal_session(parent_session_id=parent, emit_command_hooks=True))
        assert (refused.code(), refused.details()) == (
            grpc.StatusCode.INVALID_ARGUMENT, f"parent_session_id: no session {parent!r}; name an existing session")
    # None of it happened: no turn, no approval, not ended, not reset.
    after = (await alice.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id), timeout=10)).session
    assert after.status == session.status and list(after.approved_plugins) == [] and after.completed_player_turns == 0
    assert list((await alice.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id), timeout=10)).turns) == []


async def test_the_owner_plays_and_an_operator_reaches_every_session(clients):
    alice, ops, api_token = clients.stub("alice-token"), clients.stub("ops-token"), clients.stub(OPERATOR_TOKEN)
    session = (await alice.CreateSession(minimal_session(), timeout=15)).session
    events = [event async for event in alice.SubmitActions(scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=SAY), timeout=60)]
    assert any(event.WhichOneof("event") == "turn_completed" for event in events)
    for operator in (ops, api_token):
        seen = (await operator.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id), timeout=10)).session
        assert (seen.owner, seen.completed_player_turns) == ("alice", 1)
        assert len((await operator.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id), timeout=10)).turns) == 1
        # Past the access check, into the method: nothing runs, so the method says so.
        refused = await refusal(operator, "Interject", "unary", session_calls(session.id)["Interject"][1])
        assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION
    # An operator's reset keeps the session its owner's; the owner may end the successor.
    reset = await ops.ResetSession(scheduler_pb2.ResetSessionRequest(session_id=session.id), timeout=15)
    assert reset.session.owner == "alice" and reset.previous_session.status == store_pb2.SESSION_STATUS_ENDED
    ended = await alice.EndSession(scheduler_pb2.EndSessionRequest(session_id=reset.session.id), timeout=15)
    assert ended.session.owner == "alice"
    own = (await api_token.CreateSession(minimal_session(), timeout=15)).session
    assert own.owner == API_TOKEN_PRINCIPAL


async def test_jwt_principals_own_their_sessions(services, clients):
    _, issuer = services
    dana, erin = clients.stub(issuer.token("dana")), clients.stub(issuer.token("erin"))
    boss = clients.stub(issuer.token("boss", roles=["operator"]))
    session = (await dana.CreateSession(minimal_session(), timeout=15)).session
    assert session.owner == "dana"
    refused = await refusal(erin, "GetSession", "unary", scheduler_pb2.GetSessionRequest(session_id=session.id))
    assert refused.code() == grpc.StatusCode.NOT_FOUND
    assert (await boss.GetSession(scheduler_pb2.GetSessionRequest(session_id=session.id), timeout=10)).session.owner == "dana"
    # The users file's alice is not dana: the principal, not the way it was proven, owns.
    refused = await refusal(clients.stub("alice-token"), "ListTurns", "unary", scheduler_pb2.ListTurnsRequest(session_id=session.id))
    assert refused.code() == grpc.StatusCode.NOT_FOUND


async def test_bad_and_expired_tokens_are_unauthenticated_with_why(services, clients):
    _, issuer = services
    cases = [
        (None, MISSING_TOKEN),
        ("nobody-token", INVALID_TOKEN),
        (issuer.token("dana", expires_in=-60), "expired bearer token: the JWT's exp has passed; get a new token from the issuer"),
        (issuer.token("dana", key=new_key()), "invalid bearer token: the JWT's signature does not verify"),
        (issuer.token("dana", audience="other"), f"invalid bearer token: the JWT's aud is not this service ({AUDIENCE})"),
    ]
    for token, message in cases:
        for method, kind, request in (("CreateSession", "unary", minimal_session()),
                                      ("SubmitActions", "stream", session_calls(MISSING_ID)["SubmitActions"][1])):
            refused = await refusal(clients.stub(token), method, kind, request)
            assert (refused.code(), refused.details()) == (grpc.StatusCode.UNAUTHENTICATED, message), (method, token)


async def test_list_sessions_gives_the_callers_own_and_an_operator_anyones(clients):
    alice, bob, ops = clients.stub("alice-token"), clients.stub("bob-token"), clients.stub("ops-token")
    hers = {(await alice.CreateSession(minimal_session(), timeout=15)).session.id for _ in range(3)}
    his = (await bob.CreateSession(minimal_session(), timeout=15)).session.id
    listed = await alice.ListSessions(scheduler_pb2.ListSessionsRequest(page_size=200), timeout=10)
    assert hers <= {s.id for s in listed.sessions} and his not in {s.id for s in listed.sessions}
    assert all(s.owner == "alice" for s in listed.sessions)
    first = await alice.ListSessions(scheduler_pb2.ListSessionsRequest(page_size=1), timeout=10)
    assert len(first.sessions) == 1 and first.next_page_token
    refused = await refusal(bob, "ListSessions", "unary", scheduler_pb2.ListSessionsRequest(owner="alice"))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED and "only an operator" in refused.details()
    seen = await ops.ListSessions(scheduler_pb2.ListSessionsRequest(owner="alice", page_size=200), timeout=10)
    assert hers <= {s.id for s in seen.sessions}


async def test_the_detached_queue_is_a_sessions_owners_and_all_of_it_an_operators(clients):
    alice, ops = clients.stub("alice-token"), clients.stub("ops-token")
    session = (await alice.CreateSession(minimal_session(), timeout=15)).session
    own = await alice.ListDetachedJobs(scheduler_pb2.ListDetachedJobsRequest(session_id=session.id), timeout=10)
    assert list(own.jobs) == [] and own.next_page_token == ""
    refused = await refusal(alice, "ListDetachedJobs", "unary", scheduler_pb2.ListDetachedJobsRequest(statuses=[resources_pb2.DETACHED_JOB_STATUS_PARKED]))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED and "only an operator" in refused.details()
    refused = await refusal(alice, "RequeueDetachedJob", "unary", scheduler_pb2.RequeueDetachedJobRequest(job_id="any"))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED
    await ops.ListDetachedJobs(scheduler_pb2.ListDetachedJobsRequest(statuses=[resources_pb2.DETACHED_JOB_STATUS_PARKED], page_size=500), timeout=10)
    missing = await refusal(ops, "RequeueDetachedJob", "unary", scheduler_pb2.RequeueDetachedJobRequest(job_id=MISSING_ID))
    assert missing.code() == grpc.StatusCode.NOT_FOUND and MISSING_ID in missing.details()
    bad = await refusal(ops, "ListDetachedJobs", "unary", scheduler_pb2.ListDetachedJobsRequest(statuses=[cast(Any, 42)]))
    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT and "statuses[0]" in bad.details()


async def test_only_an_operator_generates_world_data(clients):
    alice, ops = clients.stub("alice-token"), clients.stub("ops-token")
    refused = await refusal(alice, "GenerateWorldData", "unary", scheduler_pb2.GenerateWorldDataRequest(premise="A drowned city."))
    assert refused.code() == grpc.StatusCode.PERMISSION_DENIED and "only an operator" in refused.details()
    # An operator passes the door; no installed plugin here declares a generable namespace, so nothing is generated.
    nothing = await ops.GenerateWorldData(scheduler_pb2.GenerateWorldDataRequest(premise="A drowned city.", contracts=["none@1"]), timeout=30)
    assert not nothing.data and not nothing.skipped
