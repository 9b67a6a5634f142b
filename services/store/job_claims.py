"""ClaimDetachedJob's wait: a worker with nothing to run asks once and waits in the store (wait_ms) until a commit
queues a job, a job ends (its runtime's next one may go) or one is queued again, instead of polling the queue.

Every look is a read first (detached_jobs.claim_in_sight), the claim a write only when a job is in sight. What this
store cannot see happen (another replica's commit, a backoff or a player's wait running out, a lease that lapses)
is found by a look every CLAIM_LOOK_S while waiting."""

from __future__ import annotations

import time

from covel.store.v1 import store_pb2
from services.store import detached_jobs
from services.store.database import Database
from services.store.lease_wakeups import LeaseWakeups, give_up_at

CLAIM_LOOK_S = 1.0
# LeaseWakeups keeps waiters by session; the queue's waiters share this one key.
QUEUE = "detached-queue"


async def claim_waiting(database: Database, wakeups: LeaseWakeups, request: store_pb2.ClaimDetachedJobRequest, ttl_ms: int,
                        policy: detached_jobs.RetryPolicy, time_remaining_s: float | None) -> store_pb2.DetachedJob | None:
    give_up = give_up_at(request.wait_ms, time_remaining_s)
    with wakeups.watching(QUEUE):
        while True:
            ticket = wakeups.ticket(QUEUE)
            if await database.read(detached_jobs.claim_in_sight, request.session_id):
                job = await database.write(detached_jobs.claim, request.holder, ttl_ms, request.session_id, policy)
                if job is not None:
                    return job
            left = give_up - time.monotonic()
            if left <= 0:
                return None
            await wakeups.wait(ticket, min(left, CLAIM_LOOK_S))
