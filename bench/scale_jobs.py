"""Detached jobs in the model (bench/scale_sim.py), as the scheduler's workers run them.

services/scheduler/detached/worker.py and services/store/job_claims.py: each scheduler replica runs
`detached_workers` workers. An idle worker's ClaimDetachedJob waits in the store until a commit queues a job (no
polls; a look every second for what it cannot see) and claims the oldest queued job of a session whose player's
turn is not waiting for the lease. The job runs off the lease on a snapshot: its store calls are the claim, the
snapshot, the reads, then its commit, one call that takes the lease in its own transaction, commits and ends the job
(services/store/job_commits.py; `commit_calls` 3 models the tree before it: AcquireTurnLease, CommitTurn,
CompleteDetachedJob); only the commit holds the lease (scale_leases.py), and while the lease is busy the store asks
again. A job's wait on models (`model_s`) holds its worker, halfway through its run. A
commit whose lease wait ran out runs the job again from the snapshot (SESSION_BUSY); a read conflict would too, but none was measured (bench.concurrency counts them), so none is modelled. Two jobs of
one runtime of one session do not run at once in the store; with two jobs a turn from two runtimes that bound
never binds here and is left out.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import replace
from typing import TYPE_CHECKING

import simpy

from bench.scale_profile import TurnProfile, hops, store_indices

if TYPE_CHECKING:
    from bench.scale_leases import Leases
    from bench.scale_sim import Cluster

Process = Generator[simpy.Event, object, None]
CLAIM_LOOK_S = 1.0
# A job's store calls as the store sees them: the claim and the snapshot first; its commit last.
LEAD_CALLS = 2


class JobQueue:
    def __init__(self, env: simpy.Environment, leases: Leases) -> None:
        self.env, self.leases = env, leases
        self.queued: list[int] = []  # sessions, a job each, oldest first
        self.arrived: simpy.Event | None = None
        self.done = 0
        self.reruns = 0

    def put(self, session: int, jobs: int) -> None:
        if not jobs:
            return
        self.queued += [session] * jobs
        self.leases.state(session).open_jobs += jobs
        if self.arrived is not None:
            arrived, self.arrived = self.arrived, None
            arrived.succeed()

    def open_jobs(self) -> int:
        return sum(state.open_jobs for state in self.leases.sessions.values())

    def take(self) -> Generator[simpy.Event, object, int]:
        """The oldest job of a session no player waits for, once there is one."""
        while True:
            for index, session in enumerate(self.queued):
                if not self.leases.marked(session):
                    del self.queued[index]
                    return session
            self.arrived = self.arrived or self.env.event()
            yield self.env.timeout(CLAIM_LOOK_S) | self.arrived


def job_plan(job: TurnProfile, wakeup_ms: float) -> tuple[list, int, int, int]:
    """The job's bursts and the indices of its claim, of the call that asks for the lease and of its commit. With
    `commit_calls` 3 (the tree before job_commits.py) those are AcquireTurnLease, CommitTurn and CompleteDetachedJob;
    with 1 the commit asks for the lease itself."""
    bursts = hops(replace(job, wakeup_ms=wakeup_ms), lead=LEAD_CALLS, tail=job.commit_calls)
    stores = store_indices(bursts) or [len(bursts) - 1]
    take = stores[-min(job.commit_calls, len(stores))]
    commit = stores[-2] if job.commit_calls > 1 and len(stores) >= 2 else take
    return bursts, stores[0], max(stores[0], take), max(stores[0], take, commit)


def worker(cluster: Cluster, job: TurnProfile) -> Process:
    bursts, claim, take, commit = job_plan(job, cluster.wakeup_ms)
    queue, leases = cluster.queue, cluster.leases
    # Its own call (AcquireTurnLease) is the first ask; a one-call commit asks with a lease check.
    first = bursts[take] if job.commit_calls > 1 and take > claim else None
    while True:
        session = yield from queue.take()
        yield from cluster.run(bursts[:claim + 1], session)
        middle = (claim + 1 + take) // 2
        while True:
            yield from cluster.run(bursts[claim + 1:middle], session)
            if job.model_s:
                yield cluster.env.timeout(job.model_s)  # its model calls, off the lease, holding its worker
            yield from cluster.run(bursts[middle:take], session)
            if (yield from leases.for_job(session, first)):
                break
            queue.reruns += 1
        yield from cluster.run(bursts[take + (first is not None):commit + 1] if commit > claim else [], session)
        leases.release(session, by_job=True)
        yield from cluster.run(bursts[commit + 1:], session)
        queue.done += 1
        leases.job_ended(session)
