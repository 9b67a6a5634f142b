"""Interactions a plugin opened for the player: ListInteractions, SubmitInteraction (an answer is a player action
carrying `interaction`; one a suspended agent asked resumes that agent, turn/interaction_answers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc

from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.agent.loop import Resume
from services.scheduler.api.idempotency_keys import check_idempotency_key
from services.scheduler.api.relay import relay
from services.scheduler.api.submit import Submissions
from services.scheduler.api.turn_stream import TurnStreams
from services.scheduler.turn.interaction_answers import ResumeCall, answer_action
from services.scheduler.turn.player_input import validate_actions
from services.scheduler.turn.request import ResumeRun, TurnRequest
from shared.errors import failed_precondition, require, rpc
from shared.page_tokens import pages
from shared.structs import from_struct


class Interactions:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, submissions: Submissions, streams: TurnStreams) -> None:
        self._store = store
        self._submissions = submissions
        self._streams = streams

    @rpc
    @pages("interactions")
    async def ListInteractions(self, request: scheduler_pb2.ListInteractionsRequest, context: grpc.aio.ServicerContext) -> scheduler_pb2.ListInteractionsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        return await relay(self._store.ListInteractions, store_pb2.ListInteractionsRequest(
            session_id=request.session_id, include_answered=request.include_answered), scheduler_pb2.ListInteractionsResponse, "interactions")

    @rpc
    async def SubmitInteraction(self, request: scheduler_pb2.SubmitInteractionRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[scheduler_pb2.TurnEvent]:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.interaction_id, "interaction_id", "an open interaction's id, as ListInteractions shows it")
        check_idempotency_key(request.idempotency_key)
        reply = await self._store.ListInteractions(store_pb2.ListInteractionsRequest(session_id=request.session_id, include_answered=True))
        record, action = answer_action(request, list(reply.interactions))
        if not record.interaction.resumes:
            submit = scheduler_pb2.SubmitActionsRequest(session_id=request.session_id, idempotency_key=request.idempotency_key)
            async for event in self._submissions.submit(submit, validate_actions([action])):
                yield event
            return
        # A suspended agent asked it: the answer resumes that agent from what its turn saved.
        asked = (await self._store.GetTurn(store_pb2.GetTurnRequest(session_id=request.session_id, turn_id=record.turn_id))).turn
        saved = next((r.suspension for r in asked.runtime_results if r.runtime_id == record.interaction.runtime_id and r.HasField("suspension")), None)
        if saved is None:
            raise failed_precondition(f"interaction_id: the run that asked {request.interaction_id} left nothing to resume",
                                      reason="INTERACTION_NOT_RESUMABLE", subject=f"interactions/{request.interaction_id}")
        resume = ResumeCall(record, Resume(from_struct(saved), from_struct(request.values)))
        turn_request = TurnRequest(request.session_id, request.idempotency_key, ResumeRun(validate_actions([action]), resume), origin="resume")
        async for event in self._streams.one_turn(turn_request):
            yield event
