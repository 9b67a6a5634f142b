"""Detached post-turn jobs: workers inside the scheduler process that claim jobs from the store's
queue and run each job's runtime as its own execution (origin `background`), committed in its
own transaction.

The store owns the queue: a claim hands one queued job to one worker with a lease (PostgreSQL
`FOR UPDATE SKIP LOCKED`), so any number of scheduler replicas can run workers side by side. An idle
worker's claim waits in the store (CLAIM_WAIT_MS) until a commit queues a job.

A job runs without the session's turn lease: on its source turn's snapshot and the committed state it reads,
noted with their revisions; it takes the lease for its commit only, where the store checks that what it read
is unchanged (turn/lease_hold.py). A player who acts meanwhile does not wait for the job's model calls. When
a player's commit changed what the job read (ABORTED, READ_CONFLICT), the job runs again on the new state;
after READ_CONFLICT_RUNS such runs it runs under the lease, so it cannot starve.
A worker renews the lease while the job runs; when the lease is lost (expired, timed out) the
execution is cancelled and commits nothing. The execution's idempotency key is the job id, so
a job retried after its turn committed answers with that turn instead of running again.

With tracing on, each job is one trace: its root span is the execution's `covel.turn` (origin
background), linked to the trace of the turn that queued it, and holds every RPC of the job
(lease renewals and the completion too). Idle polls of the queue are not traced.
"""

from __future__ import annotations

import asyncio
import contextlib

import grpc

from covel.scheduler.internal.v1 import turn_events_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.execution.origins import TurnOrigin
from services.scheduler.settings import SchedulerSettings
from services.scheduler.turn.detached_jobs import SOURCE_TRACE
from services.scheduler.turn.request import DetachedRun, TurnRequest, job_succeeded, job_summary
from services.scheduler.turn.runner import TurnRunner
from shared.errors import PASSING_CODES, error_info
from shared.ids import detached_job_key
from shared.logs import get_logger
from shared.structs import from_struct, to_struct
from shared.telemetry import tracing

log = get_logger(component="detached_worker")
# CompleteDetachedJob with this status hands a claimed job back to the queue (shutdown).
RELEASED = "queued"
# ... and with this one reports a passing failure: queued again after a backoff, or parked.
RETRY = "retry"
# Of a stop's budget, what releasing the jobs cut short may take.
RELEASE_S = 2.0
# How long an idle worker's claim waits in the store for a job (a commit that queues one wakes it).
CLAIM_WAIT_MS = 5_000
# Runs without the lease a job gets before it runs under it (each ended by a commit that changed what it read).
READ_CONFLICT_RUNS = 3
READ_CONFLICT = "READ_CONFLICT"  # shared/error_reasons.py


async def _ignore(_: turn_events_pb2.TurnEvent) -> None:
    """A job has no client to stream to."""


class DetachedWorker:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, runner: TurnRunner, settings: SchedulerSettings,
                 *, holder: str = "") -> None:
        self._store = store
        self._runner = runner
        self._settings = settings
        self.holder = holder or f"{settings.scheduler_instance_id}/detached"
        self._loops: list[asyncio.Task] = []
        self._stopping = asyncio.Event()
        # Jobs this worker finished, by id -> final status (for tests and logs).
        self.finished: dict[str, str] = {}
        self._unreachable = False
        # Jobs a stop cut short: handed back to the queue rather than left to lapse as orphaned.
        self._interrupted: list[store_pb2.DetachedJob] = []

    def start(self) -> None:
        for index in range(self._settings.scheduler_detached_workers):
            self._loops.append(asyncio.create_task(self._loop(index), name=f"detached-worker-{index}"))

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop claiming; jobs already running may finish within `grace_s`. One still running then is
        cancelled and released to the queue (status queued again), where another replica claims it:
        its execution's idempotency key is the job id, so a turn it had already committed is not run twice."""
        self._stopping.set()
        release_s = min(RELEASE_S, grace_s / 2)
        if self._loops:
            _, pending = await asyncio.wait(self._loops, timeout=max(0.0, grace_s - release_s))
            for task in pending:
                task.cancel()
            await asyncio.gather(*self._loops, return_exceptions=True)
        interrupted, self._interrupted = self._interrupted, []
        if interrupted:
            await asyncio.gather(*(self._release(job, max(release_s, 0.1)) for job in interrupted))

    async def _release(self, job: store_pb2.DetachedJob, timeout_s: float) -> None:
        try:
            await self._store.CompleteDetachedJob(
                store_pb2.CompleteDetachedJobRequest(job_id=job.id, lease_id=job.lease_id, status=RELEASED), timeout=timeout_s  # per call: the stop's grace left
            )
            self.finished[job.id] = "released"
            log.info("detached.released", job_id=job.id, runtime_id=job.runtime_id)
        except grpc.aio.AioRpcError as error:
            # Its lease lapses instead, and the store records the job as orphaned.
            log.warning("detached.release_failed", job_id=job.id, code=error.code().name, details=error.details())

    async def _loop(self, index: int) -> None:
        poll_s = self._settings.scheduler_detached_poll_ms / 1000
        while not self._stopping.is_set():
            try:
                job = await self._claim_unless_stopping()
                self._unreachable = False
            except grpc.aio.AioRpcError as error:
                if not self._unreachable:  # once per outage, not once per poll
                    log.warning("detached.claim_failed", code=error.code().name, details=error.details())
                self._unreachable = error.code() == grpc.StatusCode.UNAVAILABLE
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), poll_s)
                continue
            if job is not None:
                await self.run(job)

    async def _claim_unless_stopping(self) -> store_pb2.DetachedJob | None:
        """A claim that waits in the store, given up when the worker stops (a job the store claimed in that instant
        lapses and is retried, as when a worker dies)."""
        claim = asyncio.ensure_future(self.claim(CLAIM_WAIT_MS))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({claim, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not claim.done():
                claim.cancel()
        return claim.result() if not claim.cancelled() else None

    async def claim(self, wait_ms: int = 0) -> store_pb2.DetachedJob | None:
        reply = await self._store.ClaimDetachedJob(
            store_pb2.ClaimDetachedJobRequest(holder=self.holder, lease_ttl_ms=self._settings.scheduler_detached_lease_ttl_ms,
                                              wait_ms=wait_ms),
            timeout=wait_ms / 1000 + 10,  # per call: the wait in the store, and the claim
        )
        return reply.job if reply.HasField("job") else None

    async def run(self, job: store_pb2.DetachedJob) -> str:
        """Run one claimed job to its end, as a trace of its own; its final status (succeeded, failed, or lost)."""
        attributes = {"covel.session_id": job.session_id, "covel.turn.origin": "background", "covel.detached_job_id": job.id,
                      "covel.runtime_id": job.runtime_id, "covel.source_turn_id": job.turn_id}
        with tracing.root_span("covel.turn", attributes, linked=from_struct(job.input).get(SOURCE_TRACE)):
            return await self._run_traced(job)

    async def _run_traced(self, job: store_pb2.DetachedJob) -> str:
        execution = asyncio.create_task(self._execute(job))
        renewer = asyncio.create_task(self._keep_lease(job, execution))
        try:
            status, result, error, ended = await execution
        except asyncio.CancelledError:
            if not renewer.done() or renewer.cancelled() or renewer.result() is not True:
                if self._stopping.is_set():
                    execution.cancel()
                    self._interrupted.append(job)
                raise
            log.warning("detached.lease_lost", job_id=job.id, runtime_id=job.runtime_id)
            self.finished[job.id] = "lost"
            return "lost"
        finally:
            renewer.cancel()
        try:
            if not ended:  # else its turn's commit ended it (CommitTurnRequest.job)
                await self._store.CompleteDetachedJob(
                    store_pb2.CompleteDetachedJobRequest(job_id=job.id, lease_id=job.lease_id, status=status, result=to_struct(result), error=error),
                )
        except grpc.aio.AioRpcError as failure:
            # ABORTED: the lease lapsed meanwhile; the store recorded the job as orphaned or timed out.
            log.warning("detached.complete_failed", job_id=job.id, code=failure.code().name, details=failure.details())
            status = "lost"
        log.info("detached.finished", job_id=job.id, runtime_id=job.runtime_id, status=status, error=error)
        self.finished[job.id] = status
        return status

    async def _execute(self, job: store_pb2.DetachedJob) -> tuple[str, dict, str, bool]:
        """The job's status, result and error, and whether its turn's commit already ended it."""
        conflicts = 0
        while True:
            work = DetachedRun(job)
            request = TurnRequest(job.session_id, detached_job_key(job.id), work, origin=TurnOrigin.BACKGROUND,
                                  off_lease=conflicts < READ_CONFLICT_RUNS)
            try:
                # The span this job's trace started with (run) is the execution's turn span.
                turn = await self._runner.run_observed(request, _ignore, tracing.current_span())
                break
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.ABORTED:
                    # A player's commit changed what the job read: it runs again on the new state. Else the session's
                    # turn lease stayed busy (a player's turn) past the wait: wait for it again.
                    conflicts += _read_conflict(error)
                    continue
                # A peer restarting: the store queues the job again after a backoff (or parks it).
                status = RETRY if error.code() in PASSING_CODES else "failed"
                return status, {}, f"{error.code().name}: {error.details()}", False
            except Exception as error:  # a bad job must not take the worker down
                log.warning("detached.execution_failed", job_id=job.id, error=repr(error), exc_info=True)
                return "failed", {}, f"{type(error).__name__}: {error}", False
        result = next((r for r in turn.runtime_results if r.runtime_id == job.runtime_id), None)
        summary = job_summary(turn, job.runtime_id)
        if job_succeeded(turn, job.runtime_id):
            return "succeeded", summary, "", bool(work.ended)
        reason = (result.reason if result is not None and result.reason else turn.abort_reason) or "the runtime did not succeed"
        passing = turn.retryable or (result is not None and result.retryable)
        return RETRY if passing else "failed", summary, reason, False

    async def _keep_lease(self, job: store_pb2.DetachedJob, execution: asyncio.Task) -> bool:
        """Renew the job's lease every third of its life; True (and the execution cancelled) once it is lost."""
        interval = self._settings.scheduler_detached_lease_ttl_ms / 3000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._store.RenewDetachedJob(
                    store_pb2.RenewDetachedJobRequest(job_id=job.id, lease_id=job.lease_id,
                                                      lease_ttl_ms=self._settings.scheduler_detached_lease_ttl_ms),
                    timeout=interval,  # per call: a renewal late by one interval is no use
                )
            except grpc.aio.AioRpcError as error:
                if error.code() in (grpc.StatusCode.ABORTED, grpc.StatusCode.NOT_FOUND):
                    execution.cancel()
                    return True
                log.warning("detached.renew_failed", job_id=job.id, code=error.code().name)


def _read_conflict(error: grpc.aio.AioRpcError) -> int:
    info = error_info(error)
    if info is not None and info.reason == READ_CONFLICT:
        log.info("detached.read_conflict", details=error.details())
        return 1
    return 0
