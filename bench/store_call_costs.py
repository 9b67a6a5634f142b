"""The store's CPU per call (bench/store_commit.py's `calls` part): a store started as a real process, its CPU
(user + system, from /proc) over N calls of each kind, divided by N. What load does not skew much, where wall times
do; `--base-root` runs the same calls against a store started from another tree (a `git worktree` or an export of
the base, with its generated stubs), alternating the two trees so each pair runs in the same minutes.

Kinds, each on a fresh session (SQLite by default; the PostgreSQL backend as store_commit's other parts):
- `turn`: AcquireTurnLease (with the reads a turn asks: the world, a history window, two plugin data scopes) and
  CommitTurn (a narrative.append, the lease released): the narrator-only turn's two store calls;
- `lease`: AcquireTurnLease with those reads, then ReleaseTurnLease;
- `turn+job`: a turn whose commit queues a detached job, then ClaimDetachedJob and CompleteDetachedJob of it;
- `idle claim`: ClaimDetachedJob with nothing queued (wait_ms 0): a worker's look that finds nothing;
- `signals`: TakeTurnSignals (wait_ms 0) under a held lease, nothing pending.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.structs import to_struct

Stub = store_pb2_grpc.TransactionalStoreStub
CALLS = 200
TICK_S = 1 / os.sysconf("SC_CLK_TCK")
READS = store_pb2.TurnReads(world=True, history=store_pb2.HistoryWindow(player_turns=8), plugin_data=[
    store_pb2.PluginDataScope(plugin_id="story"), store_pb2.PluginDataScope(plugin_id="memory", namespace="facts")])


def process_cpu_s(process: subprocess.Popen[bytes]) -> float:
    """User + system CPU of the process so far (its threads included)."""
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def narrative(turn: int) -> store_pb2.Proposal:
    return store_pb2.Proposal(id=str(uuid.uuid4()), type="narrative.append", plugin_id="story", runtime_id="narrator",
                              unit_runtime_id="narrator", payload=to_struct({"text": f"Story of turn {turn}."}))


def commit_request(session_id: str, lease: store_pb2.TurnLease, number: int, jobs: int = 0) -> store_pb2.CommitTurnRequest:
    turn = store_pb2.Turn(
        id=lease.turn_id, session_id=session_id, status=store_pb2.TURN_STATUS_COMMITTED, player_message=f"step {number}", origin="player",
        runtime_results=[store_pb2.RuntimeResult(runtime_id="narrator", plugin_id="story", status="success", story=True)],
    )
    specs = [store_pb2.DetachedJobSpec(plugin_id="memory", runtime_id="extract", input=to_struct({"turn": number}))] * jobs
    return store_pb2.CommitTurnRequest(session_id=session_id, lease_id=lease.lease_id, turn=turn, proposals=[narrative(number)],
                                       release_lease=True, detached_jobs=specs)


async def acquire(stub: Stub, session_id: str) -> store_pb2.TurnLease:
    request = store_pb2.AcquireTurnLeaseRequest(session_id=session_id, holder="bench", wait_ms=5000, reads=READS)
    return (await stub.AcquireTurnLease(request)).lease


def kinds(stub: Stub) -> dict[str, Callable[[str, int], Awaitable[None]]]:
    async def turn(session_id: str, number: int) -> None:
        reply = await stub.CommitTurn(commit_request(session_id, await acquire(stub, session_id), number))
        assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED, reply.turn.abort_reason

    async def lease(session_id: str, _number: int) -> None:
        held = await acquire(stub, session_id)
        await stub.ReleaseTurnLease(store_pb2.ReleaseTurnLeaseRequest(session_id=session_id, lease_id=held.lease_id))

    async def turn_and_job(session_id: str, number: int) -> None:
        await stub.CommitTurn(commit_request(session_id, await acquire(stub, session_id), number, jobs=1))
        job = (await stub.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(holder="bench", session_id=session_id))).job
        assert job.id, "the turn's job was not claimed"
        await stub.CompleteDetachedJob(store_pb2.CompleteDetachedJobRequest(job_id=job.id, lease_id=job.lease_id, status="succeeded"))

    async def idle_claim(session_id: str, _number: int) -> None:
        job = (await stub.ClaimDetachedJob(store_pb2.ClaimDetachedJobRequest(holder="bench", session_id=session_id))).job
        assert not job.id

    return {"turn": turn, "lease": lease, "turn+job": turn_and_job, "idle claim": idle_claim}


async def signals_cost(stub: Stub, process: subprocess.Popen[bytes], calls: int) -> float:
    """Store CPU ms per TakeTurnSignals (nothing pending) under one held lease."""
    session_id = (await stub.CreateSession(store_pb2.CreateSessionRequest())).session.id
    held = await acquire(stub, session_id)
    request = store_pb2.TakeTurnSignalsRequest(session_id=session_id, lease_id=held.lease_id)
    for _ in range(10):
        await stub.TakeTurnSignals(request)
    started = process_cpu_s(process)
    for _ in range(calls):
        assert not (await stub.TakeTurnSignals(request)).signals
    return (process_cpu_s(process) - started) * 1000 / calls


async def call_costs(stub: Stub, process: subprocess.Popen[bytes], calls: int = CALLS) -> dict[str, float]:
    """Store CPU ms per call of each kind (a warm-up of 10 first, on the same session)."""
    costs = {}
    for name, run in kinds(stub).items():
        session_id = (await stub.CreateSession(store_pb2.CreateSessionRequest())).session.id
        for number in range(10):
            await run(session_id, number)
        started = process_cpu_s(process)
        for number in range(10, 10 + calls):
            await run(session_id, number)
        costs[name] = round((process_cpu_s(process) - started) * 1000 / calls, 3)
    costs["signals"] = round(await signals_cost(stub, process, calls), 3)
    return costs
