"""The session's turn lease in the store: taken for a turn, kept alive while it runs, released if
it does not commit, and the Cancel / Interject signals other replicas left for its holder."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc

from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.settings import SchedulerSettings
from shared.errors import PASSING_CODES
from shared.logs import get_logger

log = get_logger(component="turn_runner")
# How long one ask of the lease holder for Cancel / Interject sent to another replica waits in the store for one
# (SignalTurn through the same store answers it at once; the turn's commit or release ends it).
SIGNAL_WAIT_MS = 2000
RELEASE_TIMEOUT_S = 2.0
T = TypeVar("T")


async def _whole(call: Awaitable[T]) -> T:
    """A poller's RPC, run to its end even when the turn's end cancels the poller: its client span ends and is
    exported with the server's, so the turn's trace has both spans of the hop; the poller itself stops at once.
    What the call ends with after its poller stopped (ABORTED once the lease is released) is nobody's to handle."""
    whole = asyncio.ensure_future(call)
    whole.add_done_callback(_left_behind)
    return await asyncio.shield(whole)


def _left_behind(call: asyncio.Future) -> None:
    if not call.cancelled():
        call.exception()  # retrieved: asyncio would otherwise log "Task exception was never retrieved"


class LeaseKeeper:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, settings: SchedulerSettings) -> None:
        self._store = store
        self._settings = settings
        # Releases retried in the background (a reference keeps each task alive until it ends).
        self._releasing: set[asyncio.Task] = set()

    async def acquire(self, session_id: str, idempotency_key: str, origin: str, reads: store_pb2.TurnReads | None = None,
                      when_busy: Callable[[str], Awaitable[None]] | None = None, retry_turn_id: str = "", *,
                      without_lease: bool = False, turn_id: str = "") -> store_pb2.AcquireTurnLeaseResponse:
        """The lease (waiting up to scheduler_lease_wait_ms for a running turn) with the `reads` the turn
        asks for, or a retried submit's existing turn. With `when_busy`, a first try does not wait: when a
        turn holds the lease, `when_busy(why)` is called with the store's answer (it may raise) before the wait.
        `without_lease` and `turn_id`: a detached job's snapshot, and the lease for its commit (lease_hold.py)."""
        settings = self._settings
        request = store_pb2.AcquireTurnLeaseRequest(
            session_id=session_id, holder=settings.scheduler_instance_id, ttl_ms=settings.scheduler_lease_ttl_ms,
            idempotency_key=idempotency_key, wait_ms=settings.scheduler_lease_wait_ms, origin=origin, reads=reads,
            retry_turn_id=retry_turn_id, without_lease=without_lease, turn_id=turn_id,
        )
        if when_busy is not None:
            first = store_pb2.AcquireTurnLeaseRequest()
            first.CopyFrom(request)
            first.wait_ms = 0
            try:
                return await self._store.AcquireTurnLease(first, timeout=10)
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.ABORTED:
                    raise
                busy = error.details() or ""
            await when_busy(busy)
        # Per call: the lease wait is a setting.
        return await self._store.AcquireTurnLease(request, timeout=settings.scheduler_lease_wait_ms / 1000 + 10)

    def taking_commit(self) -> store_pb2.JobCommit:
        """A detached job's commit that takes the session's lease itself (lease_hold.py), waiting for it as acquire does."""
        return store_pb2.JobCommit(take_lease=True, holder=self._settings.scheduler_instance_id, wait_ms=self._settings.scheduler_lease_wait_ms)

    def commit_timeout_s(self, job: store_pb2.JobCommit | None) -> float | None:
        """A commit's deadline: CommitTurn's (shared/grpc_client.py), or with its wait for the lease (job.take_lease)."""
        return self._settings.scheduler_lease_wait_ms / 1000 + 10 if job is not None and job.take_lease else None

    async def keep(self, lease: store_pb2.TurnLease) -> None:
        """Renew every third of the lease's life; after a failed renewal (the store restarting) try again
        four times as often, so the lease is kept as soon as the store is back."""
        interval = self._settings.scheduler_lease_ttl_ms / 3000
        pause = interval
        while True:
            await asyncio.sleep(pause)
            try:
                await _whole(self._store.RenewTurnLease(
                    store_pb2.RenewTurnLeaseRequest(
                        session_id=lease.session_id, lease_id=lease.lease_id, ttl_ms=self._settings.scheduler_lease_ttl_ms
                    ),
                    timeout=interval,  # per call: a renewal late by one interval is no use
                ))
                pause = interval
            except grpc.aio.AioRpcError as error:
                log.warning("lease.renew_failed", session_id=lease.session_id, code=error.code().name)
                if error.code() == grpc.StatusCode.ABORTED:
                    return  # taken over: the commit will say so
                pause = interval / 4

    async def release(self, lease: store_pb2.TurnLease) -> None:
        """Released at once when the store answers; when it cannot (restarting), retried in the background
        for a while, so the session is free as soon as the store is back rather than when the lease lapses."""
        if not await self._release_once(lease):
            retry = asyncio.create_task(self._release_later(lease))
            self._releasing.add(retry)
            retry.add_done_callback(self._releasing.discard)

    async def _release_once(self, lease: store_pb2.TurnLease) -> bool:
        """Whether this try settled it (released, or failed for a reason another try would not change)."""
        try:
            await self._store.ReleaseTurnLease(
                store_pb2.ReleaseTurnLeaseRequest(session_id=lease.session_id, lease_id=lease.lease_id),
                timeout=RELEASE_TIMEOUT_S,  # per call: retried while the store restarts
            )
        except grpc.aio.AioRpcError as error:
            if error.code() in PASSING_CODES:  # the store restarting, or too slow this once
                return False
            log.warning("lease.release_failed", session_id=lease.session_id, code=error.code().name)
        return True

    async def _release_later(self, lease: store_pb2.TurnLease) -> None:
        # Past a few lease lifetimes the store's clock has let it lapse anyway.
        give_up = time.monotonic() + 3 * self._settings.scheduler_lease_ttl_ms / 1000 + 5
        pause = 0.1
        while time.monotonic() < give_up:
            await asyncio.sleep(pause)
            if await self._release_once(lease):
                log.info("lease.released_late", session_id=lease.session_id)
                return
            pause = min(pause * 2, 0.5)
        log.warning("lease.release_gave_up", session_id=lease.session_id)

    async def take_signals(self, lease: store_pb2.TurnLease, cancel: Callable[[str, str, str], object],
                           interject: Callable[[str, str], object]) -> None:
        """Cancel and Interject that reached another scheduler replica: the store keeps them for this
        lease's holder (SignalTurn), which takes them here and applies them as if asked directly."""
        # A turn that ends within the first pause never asks (most turns on a fast model).
        pause = self._settings.scheduler_signal_poll_ms / 1000
        await asyncio.sleep(pause)
        while True:
            try:
                reply = await _whole(self._store.TakeTurnSignals(
                    store_pb2.TakeTurnSignalsRequest(session_id=lease.session_id, lease_id=lease.lease_id, wait_ms=SIGNAL_WAIT_MS)))
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.ABORTED:
                    return  # the lease is gone: so is the turn's chance to be signalled here
                log.warning("signals.take_failed", session_id=lease.session_id, code=error.code().name)
                await asyncio.sleep(pause)
                continue
            for signal in reply.signals:
                if signal.kind == "cancel":
                    cancel(lease.session_id, signal.turn_id, signal.reason or "cancelled by request")
                elif signal.kind == "interject":
                    interject(lease.session_id, signal.text)
