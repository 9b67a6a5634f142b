"""The session's lease as one turn holds it.

A turn takes it before it runs (a player's turn, a continuation, a manual run...) and keeps it alive while it runs.
A detached job does not: it runs on a snapshot (the store's reads, answered without the lease, and what its runtime
reads of the committed state meanwhile, each with its revision) and takes the lease only for its commit, which
checks that what it read is unchanged (CommitTurnRequest.read_checks; a change answers ABORTED, READ_CONFLICT, and
the worker runs the job again). A player who acts while a job's model calls run does not wait for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc

from covel.store.v1 import store_pb2
from services.scheduler.turn.lease import LeaseKeeper
from shared.ids import new_id


class Recorded(Exception):
    """The job's turn was recorded meanwhile (its idempotency key answered with it): there is nothing to commit."""

    def __init__(self, turn: store_pb2.Turn) -> None:
        super().__init__(f"turn {turn.id} is already recorded")
        self.turn = turn


class LeaseHold:
    def __init__(self, keeper: LeaseKeeper, lease: store_pb2.TurnLease, session: store_pb2.Session, held: bool,
                 idempotency_key: str = "") -> None:
        self._keeper = keeper
        # The session as the store answered with the lease (a job's: with its snapshot, then with its commit's lease):
        # what the turn's record follows (selection.TriggerHistories).
        self.session = session
        # Held: the store's lease. Not yet: the turn's id and logical turn as the job runs them, no lease id.
        self.lease = lease
        self.held = held
        self.off_lease = not held
        self._key = idempotency_key
        self._keeping: list[asyncio.Task] = []
        self._signals: tuple[Callable[[str, str, str], object], Callable[[str, str], object]] | None = None

    @classmethod
    def taken(cls, keeper: LeaseKeeper, reply: store_pb2.AcquireTurnLeaseResponse) -> LeaseHold:
        return cls(keeper, reply.lease, reply.session, held=True)

    @classmethod
    def for_job(cls, keeper: LeaseKeeper, session: store_pb2.Session, idempotency_key: str) -> LeaseHold:
        """A detached job's run on its snapshot: the lease comes with its commit. Its logical turn is the commit's; until
        then, the one the store would give it now (the session's last player turn)."""
        lease = store_pb2.TurnLease(session_id=session.id, turn_id=new_id(), logical_turn=max(session.completed_player_turns, 1))
        return cls(keeper, lease, session, held=False, idempotency_key=idempotency_key)

    def keep(self, cancel: Callable[[str, str, str], object], interject: Callable[[str, str], object]) -> None:
        """Renewals, and the signals other replicas leave for the holder, while the lease is held."""
        self._signals = (cancel, interject)
        if self.held:
            self._start_keeping()

    def _start_keeping(self) -> None:
        self._keeping.append(asyncio.create_task(self._keeper.keep(self.lease)))
        if not self.off_lease and self._signals is not None:
            # A job's commit is not signalled: Cancel and Interject reach a player's turn.
            self._keeping.append(asyncio.create_task(self._keeper.take_signals(self.lease, *self._signals)))

    async def for_commit(self) -> store_pb2.TurnLease:
        """The lease to commit with: a job takes it now (waiting for a turn that holds it), for the turn it ran."""
        if not self.held:
            reply = await self._commit_lease()
            if reply.WhichOneof("result") == "existing_turn":
                raise Recorded(reply.existing_turn)
            self.lease, self.session, self.held = reply.lease, reply.session, True
            self._start_keeping()
        return self.lease

    async def _commit_lease(self) -> store_pb2.AcquireTurnLeaseResponse:
        """The store's answer to the job's ask for the lease, asked again while the session stays busy past the wait (a
        player playing on): the job's run is done, only its commit waits (the job's own lease bounds how long)."""
        while True:
            try:
                return await self._keeper.acquire(self.lease.session_id, self._key, "background", turn_id=self.lease.turn_id)
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.ABORTED:
                    raise

    async def release(self) -> None:
        if self.held:
            await self._keeper.release(self.lease)

    def stop(self) -> None:
        for task in self._keeping:
            task.cancel()
