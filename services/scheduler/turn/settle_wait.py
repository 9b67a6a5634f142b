"""schedule.detached.settle: a player's next action waits for the session's settling jobs (queued or running jobs
of settle: true runtimes) to finish, each at most its maxSettleWaitMs from when the action arrived; then the turn
runs whether they finished or not. While it waits, the action has not asked for the session's lease, so the
workers claim and run those jobs ahead of it (a waiting player's turn otherwise goes first: services/store/leases.py).

Only a session this scheduler queued a settling job for is asked about (`note_settling`): every other submit costs no
call. A settling job another scheduler replica queued is not waited for here (its session's turns usually stay on one
replica; the wait is best effort either way)."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable

from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.structs import from_struct

UNFINISHED = ("queued", "running")
# A job queued without its maxSettleWaitMs (none is: turn/detached_jobs.py writes it) waits the spec's most.
MOST_SETTLE_WAIT_MS = 120_000
POLL_FIRST_S = 0.05
POLL_MAX_S = 0.5
# Sessions this process queued a settling job for, the newest last (bounded).
_MAY_SETTLE: OrderedDict[str, None] = OrderedDict()
MAY_SETTLE_MAX = 10_000


def note_settling(session_id: str) -> None:
    """A turn of the session queued a job of a settle: true runtime: its next action may have to wait."""
    _MAY_SETTLE[session_id] = None
    _MAY_SETTLE.move_to_end(session_id)
    while len(_MAY_SETTLE) > MAY_SETTLE_MAX:
        _MAY_SETTLE.popitem(last=False)


async def _settling(store: store_pb2_grpc.TransactionalStoreStub, session_id: str) -> list[store_pb2.DetachedJob]:
    reply = await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(session_id=session_id, statuses=list(UNFINISHED), page_size=500))
    return [job for job in reply.jobs if job.settle]


def _wait_ms(job: store_pb2.DetachedJob) -> int:
    declared = from_struct(job.input).get("maxSettleWaitMs")
    return int(declared) if isinstance(declared, int | float) else MOST_SETTLE_WAIT_MS


async def wait_for_settling_jobs(store: store_pb2_grpc.TransactionalStoreStub, session_id: str,
                                 stopped: Callable[[], bool] = lambda: False) -> list[str]:
    """Wait until the settling jobs found now have finished or passed their maxSettleWaitMs; the ids of those still
    unfinished when the wait gave up (logged by the caller). `stopped`: the action was cancelled meanwhile."""
    if session_id not in _MAY_SETTLE:
        return []
    started = time.monotonic()
    deadlines = {job.id: started + _wait_ms(job) / 1000 for job in await _settling(store, session_id)}
    if not deadlines:
        _MAY_SETTLE.pop(session_id, None)
    pause = POLL_FIRST_S
    while deadlines and not stopped():
        now = time.monotonic()
        waiting = {job_id: deadline for job_id, deadline in deadlines.items() if deadline > now}
        if not waiting:
            return list(deadlines)
        await asyncio.sleep(min(pause, max(0.0, min(waiting.values()) - now)))
        pause = min(pause * 2, POLL_MAX_S)
        unfinished = {job.id for job in await _settling(store, session_id)}
        deadlines = {job_id: deadline for job_id, deadline in deadlines.items() if job_id in unfinished}
    return []
