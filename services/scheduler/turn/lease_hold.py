"""The session's lease as one turn holds it.

A turn takes it before it runs (a player's turn, a continuation, a manual run...) and keeps it alive while it runs.
A detached job does not: it runs on a snapshot (the store's reads, answered without the lease, and what its runtime
reads of the committed state meanwhile, each with its revision) and its commit takes the lease in the commit's own
transaction (CommitTurnRequest.job.take_lease: the store waits for a turn that holds it), which checks that what it
read is unchanged (CommitTurnRequest.read_checks; a change answers ABORTED, READ_CONFLICT, and the worker runs the
job again). A player who acts while a job's model calls run does not wait for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import grpc

from covel.store.v1 import store_pb2
from services.scheduler.turn.lease import LeaseKeeper
from shared.errors import error_info
from shared.ids import new_id

# The reason the store gives a job's commit that waited for the session's lease in vain (a player playing on).
SESSION_BUSY = "SESSION_BUSY"
Send = Callable[[store_pb2.TurnLease | None, store_pb2.JobCommit | None], Awaitable[store_pb2.CommitTurnResponse]]


class LeaseHold:
    def __init__(self, keeper: LeaseKeeper, lease: store_pb2.TurnLease, session: store_pb2.Session, held: bool) -> None:
        self._keeper = keeper
        # The session as the store answered with the lease (a job's: with its snapshot, then as its commit found it):
        # what the turn's record follows (selection.TriggerHistories).
        self.session = session
        # Held: the store's lease. Not yet: the turn's id and logical turn as the job runs them, no lease id.
        self.lease = lease
        self.held = held
        self.off_lease = not held
        self._keeping: list[asyncio.Task] = []
        self._signals: tuple[Callable[[str, str, str], object], Callable[[str, str], object]] | None = None

    @classmethod
    def taken(cls, keeper: LeaseKeeper, reply: store_pb2.AcquireTurnLeaseResponse) -> LeaseHold:
        return cls(keeper, reply.lease, reply.session, held=True)

    @classmethod
    def for_job(cls, keeper: LeaseKeeper, session: store_pb2.Session) -> LeaseHold:
        """A detached job's run on its snapshot: the lease comes with its commit. Its logical turn is the commit's; until
        then, the one the store would give it now (the session's last player turn)."""
        lease = store_pb2.TurnLease(session_id=session.id, turn_id=new_id(), logical_turn=max(session.completed_player_turns, 1))
        return cls(keeper, lease, session, held=False)

    def keep(self, cancel: Callable[[str, str, str], object], interject: Callable[[str, str], object]) -> None:
        """Renewals, and the signals other replicas leave for the holder, while the lease is held."""
        self._signals = (cancel, interject)
        if self.held:
            self._start_keeping()

    def _start_keeping(self) -> None:
        self._keeping.append(asyncio.create_task(self._keeper.keep(self.lease)))
        if self._signals is not None:
            self._keeping.append(asyncio.create_task(self._keeper.take_signals(self.lease, *self._signals)))

    def commit_timeout_s(self, job: store_pb2.JobCommit | None) -> float | None:
        return self._keeper.commit_timeout_s(job)

    async def commit(self, send: Send, job: store_pb2.JobCommit | None = None) -> store_pb2.CommitTurnResponse:
        """`send(lease, job)`: the commit under the lease held, or (a job that ran without it) a commit that takes it
        (job.take_lease), sent again while the session stays busy past the store's wait: the job's run is done, only
        its commit waits (the job's own lease bounds how long)."""
        if self.held:
            return await send(self.lease, job)
        taking = self._keeper.taking_commit()
        if job is not None:
            taking.MergeFrom(job)
        while True:
            try:
                reply = await send(None, taking)
            except grpc.aio.AioRpcError as error:
                info = error_info(error)
                if error.code() == grpc.StatusCode.ABORTED and info is not None and info.reason == SESSION_BUSY:
                    continue
                raise
            if reply.turn.id == self.lease.turn_id:  # recorded now (not a turn recorded before under the job's key)
                # What TriggerHistories.recorded expects: the session as a lease for the turn would have answered it.
                self.session = session_before(reply.session, reply.turn)
            return reply

    async def release(self) -> None:
        if self.held:
            await self._keeper.release(self.lease)

    def stop(self) -> None:
        for task in self._keeping:
            task.cancel()


def session_before(after: store_pb2.Session, turn: store_pb2.Turn) -> store_pb2.Session:
    """The session as it was before `turn` was recorded (its count of recorded turns, the head the turn followed),
    from the session the commit answered with."""
    before = store_pb2.Session()
    before.CopyFrom(after)
    before.recorded_turns = after.recorded_turns - 1
    before.head_turn_id = turn.parent_turn_id
    return before
