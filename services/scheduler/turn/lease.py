"""The session's turn lease in the store: taken for a turn, kept alive while it runs, released if
it does not commit, and the Cancel / Interject signals other replicas left for its holder."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc

from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.settings import SchedulerSettings
from shared.logs import get_logger

log = get_logger(component="turn_runner")
# How often the lease holder asks the store for Cancel / Interject sent to another replica.
SIGNAL_POLL_S = 0.25


class LeaseKeeper:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, settings: SchedulerSettings) -> None:
        self._store = store
        self._settings = settings

    async def acquire(self, session_id: str, idempotency_key: str, origin: str,
                      reads: store_pb2.TurnReads | None = None) -> store_pb2.AcquireTurnLeaseResponse:
        """The lease (waiting up to scheduler_lease_wait_ms for a running turn) with the `reads` the turn
        asks for, or a retried submit's existing turn."""
        settings = self._settings
        return await self._store.AcquireTurnLease(
            store_pb2.AcquireTurnLeaseRequest(
                session_id=session_id, holder=settings.scheduler_instance_id, ttl_ms=settings.scheduler_lease_ttl_ms,
                idempotency_key=idempotency_key, wait_ms=settings.scheduler_lease_wait_ms, origin=origin, reads=reads,
            ),
            timeout=settings.scheduler_lease_wait_ms / 1000 + 10,  # per call: the lease wait is a setting
        )

    async def keep(self, lease: store_pb2.TurnLease) -> None:
        interval = self._settings.scheduler_lease_ttl_ms / 3000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._store.RenewTurnLease(
                    store_pb2.RenewTurnLeaseRequest(
                        session_id=lease.session_id, lease_id=lease.lease_id, ttl_ms=self._settings.scheduler_lease_ttl_ms
                    ),
                    timeout=interval,  # per call: a renewal late by one interval is no use
                )
            except grpc.aio.AioRpcError as error:
                log.warning("lease.renew_failed", session_id=lease.session_id, code=error.code().name)

    async def release(self, lease: store_pb2.TurnLease) -> None:
        with contextlib.suppress(Exception):
            await self._store.ReleaseTurnLease(
                store_pb2.ReleaseTurnLeaseRequest(session_id=lease.session_id, lease_id=lease.lease_id)
            )

    async def take_signals(self, lease: store_pb2.TurnLease, cancel: Callable[[str, str, str], object],
                           interject: Callable[[str, str], object]) -> None:
        """Cancel and Interject that reached another scheduler replica: the store keeps them for this
        lease's holder (SignalTurn), which takes them here and applies them as if asked directly."""
        while True:
            await asyncio.sleep(SIGNAL_POLL_S)
            try:
                reply = await self._store.TakeTurnSignals(
                    store_pb2.TakeTurnSignalsRequest(session_id=lease.session_id, lease_id=lease.lease_id))
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.ABORTED:
                    return  # the lease is gone: so is the turn's chance to be signalled here
                log.warning("signals.take_failed", session_id=lease.session_id, code=error.code().name)
                continue
            for signal in reply.signals:
                if signal.kind == "cancel":
                    cancel(lease.session_id, signal.turn_id, signal.reason or "cancelled by request")
                elif signal.kind == "interject":
                    interject(lease.session_id, signal.text)
