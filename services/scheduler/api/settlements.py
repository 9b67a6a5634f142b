"""Dimension settlement receipts: ListSettlements, ResolveSettlement (handled / skipped close one in the store;
a retry runs its maintainer alone on its source turn's inputs, turn/settlements.py)."""

from __future__ import annotations

import grpc

from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.api.idempotency_keys import check_idempotency_key
from services.scheduler.api.relay import relay
from services.scheduler.public_api import request_text, respond
from services.scheduler.turn.concealment import conceal_turn
from services.scheduler.turn.runner import TurnRunner
from services.scheduler.turn.settlements import RETRY, check_open, check_resolution, find_receipt
from shared.errors import require, rpc
from shared.page_tokens import pages


class Settlements:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, runner: TurnRunner) -> None:
        self._store = store
        self._runner = runner

    @rpc
    @pages("settlements")
    async def ListSettlements(self, request: scheduler_pb2.ListSettlementsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListSettlementsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        return await relay(self._store.ListSettlements, store_pb2.ListSettlementsRequest(
            session_id=request.session_id, include_closed=request.include_closed), scheduler_pb2.ListSettlementsResponse, "settlements")

    @rpc
    async def ResolveSettlement(self, request: scheduler_pb2.ResolveSettlementRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ResolveSettlementResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.source_turn_id, "source_turn_id", "the receipt's source turn, as ListSettlements shows it")
        require(request.runtime_id, "runtime_id", "the receipt's maintainer runtime, as ListSettlements shows it")
        resolution = request_text(request, "resolution")
        check_resolution(resolution)
        check_idempotency_key(request.idempotency_key)
        if resolution != RETRY:
            return await relay(self._store.ResolveSettlement, store_pb2.ResolveSettlementRequest(
                session_id=request.session_id, source_turn_id=request.source_turn_id, runtime_id=request.runtime_id,
                resolution=resolution), scheduler_pb2.ResolveSettlementResponse, "settlement")
        receipt = await self._receipt(request.session_id, request.source_turn_id, request.runtime_id)
        check_open(receipt)
        turn = await self._runner.retry_settlement(request.session_id, receipt, request.idempotency_key)
        after = await self._receipt(request.session_id, request.source_turn_id, request.runtime_id)
        return respond(scheduler_pb2.ResolveSettlementResponse, settlement=after, turn=conceal_turn(turn))

    async def _receipt(self, session_id: str, source_turn_id: str, runtime_id: str) -> store_pb2.DimensionSettlement:
        reply = await self._store.ListSettlements(store_pb2.ListSettlementsRequest(session_id=session_id, include_closed=True))
        return find_receipt(reply.settlements, source_turn_id, runtime_id)
