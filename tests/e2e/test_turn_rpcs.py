"""What a turn costs in calls between the five services (issue 19): a narrator-only turn is its lease
(with the world and the history window), one hook dispatch, one model call and its commit. A plugin
that is installed but not in the session (event-key-probe hears every message:* key) costs nothing,
and the registry is not asked again while its catalogue does not change."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.turn_costs import Snapshot, metrics_env, per_turn, snapshot
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2_grpc
from covel_cli.in_process import unix_socket_addrs
from covel_cli.launcher import ServiceGroup
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from tests.e2e.conftest import minimal_session, running_services
from tests.e2e.test_detached import finished_jobs

TURNS = 4


async def play(stub, session_id: str, text: str) -> None:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)])
    events = [event async for event in stub.SubmitActions(request)]
    assert events[-1].turn_completed.narrative, events[-1]


async def test_a_narrator_turn_makes_five_calls(tmp_path: Path) -> None:
    env, ports = metrics_env()
    async with running_services(tmp_path, extra_env=env) as group, open_channel(group.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session())).session
        assert "event-key-probe" not in session.active_plugins
        for index in range(2):
            await play(stub, session.id, f"I wait, {index}.")
        before = snapshot(group, ports)
        for index in range(TURNS):
            await play(stub, session.id, f"I walk on, {index}.")
        costs = per_turn(before, snapshot(group, ports), TURNS)
    rpcs = costs["rpcs_per_turn"]
    # The detached-job worker's poll is not the turn's: it runs on its own clock.
    turn_calls = {method: count for method, count in rpcs.items() if not method.endswith("ClaimDetachedJob")}
    assert turn_calls == {
        "scheduler.SubmitActions": 1, "store.AcquireTurnLease": 1, "hooks.TurnHooks": 1, "gateway.Generate": 1,
        "store.CommitTurn": 1,
    }, rpcs
    # The turn's hook calls go on its one TurnHooks stream: here the narrator's own hook.
    assert costs["stream_calls_per_turn"] == {"hooks.TurnHooks.dispatch": 1}, costs


async def test_an_event_no_declarative_match_accepts_costs_no_dispatch(tmp_path: Path) -> None:
    """match-probe's PostRuntime match accepts the narrator's result; its PostLLMResponse match accepts
    nothing the scripted model says. The scheduler tests both itself: a turn dispatches PostContextAssembly
    (the narrator's own hook) and PostRuntime, never PostLLMResponse."""
    env, ports = metrics_env()
    async with running_services(tmp_path, extra_env=env) as group, open_channel(group.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["match-probe"],
                                                            approved_plugins=["match-probe"]))).session
        assert "match-probe" in session.active_plugins
        await play(stub, session.id, "I wait.")
        before = snapshot(group, ports)
        for index in range(TURNS):
            request = scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text=f"I walk on, {index}.")])
            turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
            seen = [(entry.event, entry.status, entry.runtime_id) for entry in turn.hook_trace
                    if entry.handler_plugin_id == "match-probe"]
            assert seen == [("PostRuntime", resources_pb2.HOOK_STATUS_OK, "narrator")], turn.hook_trace
        costs = per_turn(before, snapshot(group, ports), TURNS)
    assert costs["stream_calls_per_turn"]["hooks.TurnHooks.dispatch"] == 2 and "hooks.Dispatch" not in costs["rpcs_per_turn"], costs


async def test_the_five_processes_play_over_unix_sockets(tmp_path: Path) -> None:
    """Over unix sockets (bench.split_cost's setup) the services reach each other with TLS: a socket
    path is no host name, so a channel checks the peer's certificate for localhost."""
    addrs = unix_socket_addrs(tmp_path)
    group = ServiceGroup(addrs, tmp_path / "data", extra_env={"COVEL_PLUGIN_DIRS": str(REPO_ROOT / "plugins")})
    await group.start()
    try:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            session = (await stub.CreateSession(minimal_session())).session
            await play(stub, session.id, "I wait by the socket.")
    finally:
        await group.stop()


async def test_plugin_data_read_last_turn_comes_with_the_lease(tmp_path: Path) -> None:
    """world-time reads its clock every turn: from the second turn on the lease brings it, no ListPluginData."""
    env, ports = metrics_env()
    async with running_services(tmp_path, extra_env=env) as group, open_channel(group.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        request = minimal_session()
        request.excluded_plugins.remove("world-time")  # the narrator and world-time only
        session = (await stub.CreateSession(request)).session
        assert "world-time" in session.active_plugins
        await play(stub, session.id, "I wait.")
        before = snapshot(group, ports)
        for index in range(TURNS):
            await play(stub, session.id, f"I walk on, {index}.")
        rpcs = per_turn(before, snapshot(group, ports), TURNS)["rpcs_per_turn"]
    assert "store.ListPluginData" not in rpcs, rpcs


async def test_a_plugin_that_only_watches_costs_a_turn_two_calls(tmp_path: Path) -> None:
    """watch-probe watches TurnStart, PreLLMCall, PostLLMResponse, TurnStop and PostStateCommit (observe=True): the
    first four go in one DispatchObserved call on the turn's hook stream before the commit, PostStateCommit in one
    DispatchObserved RPC after the turn answered; the narrator's own hook stays the turn's one Dispatch. Each turn's TurnStart watcher checks it heard every earlier
    turn's commit (docs/hooks.md, "Events sent together")."""
    env, ports = metrics_env()
    async with running_services(tmp_path, extra_env=env) as group, open_channel(group.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["watch-probe"],
                                                            approved_plugins=["watch-probe"]))).session
        assert "watch-probe" in session.active_plugins
        played = 0

        async def observed_after(turns: int) -> Snapshot:
            # A turn's PostStateCommit watchers are told after it answered: wait until the hooks service has them all.
            deadline = asyncio.get_running_loop().time() + 30
            while True:
                taken = snapshot(group, ports)
                if taken.rpcs[("hooks", "DispatchObserved")] >= turns or asyncio.get_running_loop().time() > deadline:
                    return taken
                await asyncio.sleep(0.05)

        for index in range(2):
            await play(stub, session.id, f"I wait, {index}.")
        played += 2
        before = await observed_after(played)
        traces = []
        for index in range(TURNS):
            request = scheduler_pb2.SubmitActionsRequest(
                session_id=session.id, actions=[resources_pb2.PlayerAction(kind="do", text=f"I walk on, {index}.")])
            turn = [event async for event in stub.SubmitActions(request)][-1].turn_completed
            traces.append([(entry.event, entry.status) for entry in turn.hook_trace if entry.handler_plugin_id == "watch-probe"])
        played += TURNS
        costs = per_turn(before, await observed_after(played), TURNS)
    ok = resources_pb2.HOOK_STATUS_OK
    assert traces == [[("TurnStart", ok), ("PreLLMCall", ok), ("PostLLMResponse", ok), ("TurnStop", ok)]] * TURNS, traces
    rpcs, calls = costs["rpcs_per_turn"], costs["stream_calls_per_turn"]
    assert rpcs["hooks.TurnHooks"] == 1 and rpcs["hooks.DispatchObserved"] == 1 and "hooks.Dispatch" not in rpcs, costs
    # Its watchers' ctx.state (TurnStart's get and add, PostStateCommit's add) go on the hooks service's stream to the store.
    assert calls == {"hooks.TurnHooks.dispatch": 1, "hooks.TurnHooks.observed": 1, "store.HookStateCalls.access": 3}, costs


async def test_a_detached_jobs_commit_is_one_call(tmp_path: Path) -> None:
    """detached-probe queues one job a turn. The job reads its snapshot (AcquireTurnLease without the lease) and commits
    in one CommitTurn that takes the session's lease and ends the job (CommitTurnRequest.job): no AcquireTurnLease for
    its commit, no CompleteDetachedJob."""
    env, ports = metrics_env()
    async with running_services(tmp_path, extra_env=env) as group, open_channel(group.addrs["scheduler"]) as channel, \
            group.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        session = (await stub.CreateSession(minimal_session(requested_plugins=["detached-probe"], approved_plugins=["detached-probe"]))).session
        await play(stub, session.id, "I wait.")
        await finished_jobs(store, [session.id])
        before = snapshot(group, ports)
        for index in range(TURNS):
            await play(stub, session.id, f"I walk on, {index}.")
            await finished_jobs(store, [session.id])  # each turn's job done before the next turn
        rpcs = per_turn(before, snapshot(group, ports), TURNS)["rpcs_per_turn"]
        jobs = (await finished_jobs(store, [session.id]))[session.id]
    assert [job.status for job in jobs] == ["succeeded"] * (TURNS + 1), [job.error for job in jobs]
    # A turn and its job: the turn's lease and the job's snapshot; the turn's commit and the job's.
    assert rpcs["store.AcquireTurnLease"] == 2 and rpcs["store.CommitTurn"] == 2, rpcs
    assert "store.CompleteDetachedJob" not in rpcs, rpcs


async def test_a_memory_search_and_the_log_come_with_the_lease(tmp_path: Path) -> None:
    """The narrator's memory tool searches memory's facts: from the second turn on the lease brings them (the scope the
    turn read), so a search asks the store for its vectors only, no ListPluginData. With history-compaction a player's
    turn reads the log since its summary, memory/extract's job a few turns: each kind's next lease asks for its own
    window (before, the job's shorter one made every next player turn read the whole log again: ListMessages)."""
    env, ports = metrics_env()
    async with running_services(tmp_path, extra_env=env) as group, open_channel(group.addrs["scheduler"]) as channel, \
            group.channel_as("store", "scheduler") as store_channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        store = store_pb2_grpc.TransactionalStoreStub(store_channel)
        request = minimal_session()
        request.excluded_plugins.remove("memory")  # the narrator, memory and history-compaction
        request.excluded_plugins.remove("history-compaction")
        session = (await stub.CreateSession(request)).session
        assert {"memory", "history-compaction"} <= set(session.active_plugins)
        for index in range(2):
            await play(stub, session.id, f"I remember the lighthouse, {index}.")
            await finished_jobs(store, [session.id])  # memory/extract wrote its facts
        before = snapshot(group, ports)
        for index in range(TURNS):
            await play(stub, session.id, f"What of the lighthouse, {index}?")
            await finished_jobs(store, [session.id])
        rpcs = per_turn(before, snapshot(group, ports), TURNS)["rpcs_per_turn"]
    assert rpcs.get("store.SearchMemoryVectors", 0) >= 1, rpcs
    assert "store.ListPluginData" not in rpcs and "store.ListMessages" not in rpcs, rpcs
