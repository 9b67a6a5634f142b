"""Two replicas of the scheduler and of the hooks service (scheduler A uses hooks A, scheduler B hooks B) on one
store: what must be shared lives in the store, so any replica serves any session (issue 23 item 4).

- The fault breaker: faults seen by either hooks replica count together; the pause holds on both; a reset on
  either lifts it.
- Cancel sent to the replica that does not run an auto-advance chain stops the chain, also between two of its
  turns (the store's SignalTurn waits for the chain's next turn to take the lease).
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from contextlib import asynccontextmanager

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from shared.errors import error_info
from shared.grpc_client import check_health, open_channel
from shared.settings import REPO_ROOT
from shared.structs import to_struct
from tests.e2e.conftest import minimal_session, running_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
FAULTY = "rules-probe"
CONTINUING = {"segments": [{"kind": "narration", "text": "The road unrolls ahead."}], "yield": "continue"}
SLOW = {"segments": [{"kind": "narration", "text": "The fog thins, slowly."}]}
SCRIPT = {"rules": [*({"match": match, "slots": ["story"], "reply": {"json": CONTINUING}} for match in ("walk on", "The player waits")),
                    {"match": "slowly", "slots": ["story"], "reply": {"json": SLOW, "delay_ms": 1500}}]}


def free_addr() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


@asynccontextmanager
async def replica(group, service: str, addr: str, env: dict[str, str], security):
    """One more process of `service` on `addr` with the group's settings and `env`, serving until the block ends."""
    log_path = group.log_dir / f"{service}-b.log"
    with log_path.open("ab") as log:
        process = await asyncio.create_subprocess_exec(sys.executable, "-m", f"services.{service}", env={**group.env(service), **env},
                                                       cwd=REPO_ROOT, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while await check_health(addr, timeout_s=1.0, security=security) != "SERVING":
            assert process.returncode is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, f"the second {service} did not start serving"
            await asyncio.sleep(0.1)
        yield
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def replicas(tmp_path_factory):
    async with running_services(tmp_path_factory.mktemp("replicas"), script=SCRIPT) as group:
        hooks_b, scheduler_b = free_addr(), free_addr()
        async with replica(group, "hooks", hooks_b, {"COVEL_HOOKS_ADDR": hooks_b}, group.security()):
            async with replica(group, "scheduler", scheduler_b, {"COVEL_SCHEDULER_ADDR": scheduler_b, "COVEL_HOOKS_ADDR": hooks_b,
                                                                 "COVEL_SCHEDULER_INSTANCE_ID": "replica-b"}, group.security("scheduler")):
                async with open_channel(group.addrs["scheduler"]) as channel_a, open_channel(scheduler_b) as channel_b:
                    yield scheduler_pb2_grpc.SchedulerStub(channel_a), scheduler_pb2_grpc.SchedulerStub(channel_b)


async def hook_statuses(stub, session_id: str) -> list[int]:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(text="I wait.")])
    events = [event async for event in stub.SubmitActions(request)]
    turn = events[-1].turn_completed
    assert turn.status == store_pb2.TURN_STATUS_COMMITTED, "a non-guard fault only skips the handler"
    return [entry.status for entry in turn.hook_trace if entry.event == "PreLLMCall" and entry.handler_plugin_id == FAULTY]


async def test_faults_seen_by_two_hooks_replicas_pause_the_plugin_on_both(replicas) -> None:
    a, b = replicas
    session = (await a.CreateSession(minimal_session(requested_plugins=[FAULTY], approved_plugins=[FAULTY],
                                                     plugin_settings={FAULTY: to_struct({"raise": True})}))).session
    # Three faults, on A, B, A: no replica saw three, together they trip the breaker.
    assert [await hook_statuses(stub, session.id) for stub in (a, b, a)] == [[resources_pb2.HOOK_STATUS_ERROR]] * 3
    for stub in (a, b):
        paused = await stub.ListPausedPlugins(scheduler_pb2.ListPausedPluginsRequest(session_id=session.id))
        assert [p.plugin_id for p in paused.plugins] == [FAULTY] and p_faults(paused) == 3
    assert await hook_statuses(b, session.id) == [], "paused on the replica that saw one fault too"
    assert (await b.ResetPluginFaults(scheduler_pb2.ResetPluginFaultsRequest(session_id=session.id, plugin_id=FAULTY))).was_paused
    assert await hook_statuses(a, session.id) == [resources_pb2.HOOK_STATUS_ERROR], "the reset on B holds on A"


def p_faults(paused: scheduler_pb2.ListPausedPluginsResponse) -> int:
    return paused.plugins[0].faults


async def test_cancel_on_the_other_replica_stops_an_auto_advance_chain(replicas) -> None:
    a, b = replicas
    session = (await a.CreateSession(minimal_session(
        requested_plugins=["pace-probe"], approved_plugins=["pace-probe"], plugin_settings={"framework": to_struct({"maxAutoAdvance": 20})}))).session
    turns: list[store_pb2.Turn] = []
    cancelled = None
    async for event in a.SubmitActions(scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I walk on.")])):
        if event.WhichOneof("event") == "turn_completed":
            turns.append(event.turn_completed)
            if len(turns) == 2 and cancelled is None:
                # Between two turns of the chain, or in the next one: B runs no turn of it, the store relays.
                cancelled = await b.Cancel(scheduler_pb2.CancelRequest(session_id=session.id, reason="stopped from replica B"))
    assert cancelled is not None and [t.origin for t in turns[:2]] == [resources_pb2.TURN_ORIGIN_PLAYER, resources_pb2.TURN_ORIGIN_CONTINUATION]
    assert len(turns) == 3 and turns[2].status == store_pb2.TURN_STATUS_FAILED, [t.status for t in turns]
    assert turns[2].abort_reason == "cancelled: stopped from replica B"
    await asyncio.sleep(0.6)
    listed = (await b.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))).turns
    assert len(listed) == 3, "no turn ran after the chain was stopped"


async def test_a_plugins_hook_state_is_one_for_every_hooks_replica(replicas) -> None:
    """cost-gate counts tokens with ctx.state: what hooks A counted, hooks B (another process) stops on."""
    a, b = replicas
    session = (await a.CreateSession(minimal_session(
        requested_plugins=["cost-gate"], plugin_settings={"cost-gate": to_struct({"softCapTokens": 1_000_000, "hardCapTokens": 1})}))).session
    request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I wait.")])
    first = [event async for event in a.SubmitActions(request)][-1].turn_completed
    assert first.status == store_pb2.TURN_STATUS_COMMITTED, "nothing was counted before the first turn"
    second = [event async for event in b.SubmitActions(request.__class__(session_id=session.id, actions=request.actions))][-1].turn_completed
    assert second.status == store_pb2.TURN_STATUS_ABORTED
    assert "cost-gate: this session used" in second.abort_reason and "past its hard cap of 1" in second.abort_reason


async def _watch(stub, session_id: str, turn_id: str = "") -> list:
    return [event async for event in stub.WatchTurn(scheduler_pb2.WatchTurnRequest(session_id=session_id, turn_id=turn_id), timeout=30)]


async def test_a_client_that_lost_its_stream_reattaches_on_either_replica(replicas) -> None:
    a, b = replicas
    session = (await a.CreateSession(minimal_session())).session
    request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text="I go on, slowly.")])
    stream = a.SubmitActions(request)
    started = await stream.read()
    assert started.WhichOneof("event") == "turn_started"
    stream.cancel()  # the client goes away; the turn goes on
    here, elsewhere = await asyncio.gather(_watch(a, session.id), _watch(b, session.id))
    # The replica running it replays what was sent and follows it live; the other waits for the record and replays it.
    for events in (here, elsewhere):
        kinds = [event.WhichOneof("event") for event in events]
        assert kinds[0] == "turn_started" and kinds[-1] == "turn_completed", kinds
        assert events[0].turn_started.turn_id == started.turn_started.turn_id == events[-1].turn_completed.id
        assert events[-1].turn_completed.status == store_pb2.TURN_STATUS_COMMITTED
        assert "".join(e.narrative_delta.text for e in events if e.WhichOneof("event") == "narrative_delta") == "The fog thins, slowly."
    assert "runtime_started" in [event.WhichOneof("event") for event in here], "live events on the replica running the turn"
    # A finished turn, by id, from either replica; the latest without one.
    for stub in (a, b):
        again = await _watch(stub, session.id, started.turn_started.turn_id)
        assert again[-1].turn_completed.id == started.turn_started.turn_id
    missing = None
    try:
        await _watch(b, session.id, "00000000-0000-0000-0000-000000000000")
    except grpc.aio.AioRpcError as error:
        missing = error
    assert missing is not None and missing.code() == grpc.StatusCode.NOT_FOUND and "neither recorded nor running" in missing.details()
    assert error_info(missing).reason == "TURN_NOT_FOUND"
    fresh = (await b.CreateSession(minimal_session())).session
    try:
        await _watch(b, fresh.id)
    except grpc.aio.AioRpcError as error:
        missing = error
    assert missing.code() == grpc.StatusCode.NOT_FOUND and "no turn yet" in missing.details()


async def test_list_turns_and_messages_page(replicas) -> None:
    a, _ = replicas
    session = (await a.CreateSession(minimal_session())).session
    for number in range(3):
        request = scheduler_pb2.SubmitActionsRequest(session_id=session.id, actions=[resources_pb2.PlayerAction(text=f"I wait {number}.")])
        [event async for event in a.SubmitActions(request)]
    first = await a.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id, page_size=2))
    rest = await a.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id, page_size=2, page_token=first.next_page_token))
    assert len(first.turns) == 2 and len(rest.turns) == 1 and not rest.next_page_token
    newest = await a.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id, page_size=1, newest_first=True))
    assert newest.turns[0].id == rest.turns[0].id
    page = await a.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id, page_size=4))
    more = await a.ListMessages(scheduler_pb2.ListMessagesRequest(session_id=session.id, page_size=4, page_token=page.next_page_token))
    assert [m.seq for m in page.messages] == [1, 2, 3, 4] and [m.seq for m in more.messages] == [5, 6] and not more.next_page_token
    try:
        await a.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id, page_token="forged"))
    except grpc.aio.AioRpcError as error:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("page_token:")
    else:
        raise AssertionError("a forged page token was accepted")



async def test_the_short_lists_page_too(replicas) -> None:
    a, _ = replicas
    session = (await a.CreateSession(minimal_session())).session
    everything = await a.ListActionKinds(scheduler_pb2.ListActionKindsRequest(session_id=session.id))
    assert len(everything.kinds) >= 3 and not everything.next_page_token
    seen, token = [], ""
    while True:
        page = await a.ListActionKinds(scheduler_pb2.ListActionKindsRequest(session_id=session.id, page_size=2, page_token=token))
        seen.extend(kind.kind for kind in page.kinds)
        if not (token := page.next_page_token):
            break
    assert seen == [kind.kind for kind in everything.kinds]
    for bad, field in ((scheduler_pb2.ListWorldsRequest(page_size=501), "page_size"), (scheduler_pb2.ListWorldsRequest(page_token="x"), "page_token")):
        try:
            await a.ListWorlds(bad)
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith(f"{field}:")
        else:
            raise AssertionError(f"a bad {field} was accepted")
