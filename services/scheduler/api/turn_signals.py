"""Signals to a session's running turn, on whichever replica runs it: Cancel, Interject."""

from __future__ import annotations

import grpc

from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.advance_chains import AdvanceChains
from services.scheduler.hooks.event_keys import SchedulerEventKeys
from services.scheduler.turn.runner import TurnRunner
from shared.errors import failed_precondition, invalid_argument, require, rpc

MAX_INTERJECTION = 4000
# A Cancel or Interject for a session with no turn running here waits this long for one to take the lease on
# any replica: the next turn of an auto-advance chain starts a few milliseconds after the last one committed.
CHAIN_GAP_WAIT_MS = 1_000


class TurnSignals:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, runner: TurnRunner, chains: AdvanceChains,
                 events: SchedulerEventKeys) -> None:
        self._store = store
        self._runner = runner
        self._chains = chains
        self._events = events

    @rpc
    async def Cancel(self, request: scheduler_pb2.CancelRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.CancelResponse:
        require(request.session_id, "session_id", "the session whose turn to cancel")
        reason = f"cancelled: {request.reason}" if request.reason else "cancelled by request"
        # Cancel also stops the session's auto-advance: no continuation turn starts after it.
        stopped_chains = self._chains.stop(request.session_id, reason) if not request.turn_id else False
        if not self._runner.cancel(request.session_id, request.turn_id, reason) and not stopped_chains:
            # Not running here: the store hands the cancel to the replica holding the turn's lease.
            await self._signal_turn(store_pb2.SignalTurnRequest(
                session_id=request.session_id, turn_id=request.turn_id, kind="cancel", reason=reason,
                wait_ms=0 if request.turn_id else CHAIN_GAP_WAIT_MS))
        await self._events.command_stop(request.session_id)
        return scheduler_pb2.CancelResponse()

    @rpc
    async def Interject(self, request: scheduler_pb2.InterjectRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.InterjectResponse:
        require(request.session_id, "session_id", "the session whose running turn should hear it")
        text = request.text.strip()
        if not text or len(text) > MAX_INTERJECTION:
            raise invalid_argument("text", f"say 1-{MAX_INTERJECTION} characters")
        turn_id = self._runner.interject(request.session_id, text)
        if not turn_id:
            # Not running here: the store hands it to the replica holding the turn's lease.
            signalled = await self._signal_turn(
                store_pb2.SignalTurnRequest(session_id=request.session_id, kind="interject", text=text, wait_ms=CHAIN_GAP_WAIT_MS),
                instead="submit it as the next action instead")
            turn_id = signalled.signal.turn_id
        return scheduler_pb2.InterjectResponse(turn_id=turn_id)

    async def _signal_turn(self, signal: store_pb2.SignalTurnRequest, instead: str = "") -> store_pb2.SignalTurnResponse:
        """Leave a cancel or interjection for the session's running turn on whichever replica runs it."""
        try:
            return await self._store.SignalTurn(signal)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.FAILED_PRECONDITION:
                # The store says which turn runs, if any (and that background work hears no interjection).
                why = error.details() or f"no turn of session {signal.session_id} is running"
                raise failed_precondition(why + (f"; {instead}" if instead else ""), reason="NO_RUNNING_TURN",
                                          subject=f"sessions/{signal.session_id}") from error
            raise
