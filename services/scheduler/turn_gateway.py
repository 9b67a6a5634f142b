"""The gateway stub the scheduler calls: a running turn's GenerateOnce and Embed calls go on its TurnModelCalls stream
(shared/call_streams.py), found by the request's `origin.turn_id`; every other call as its unary method. Callers
use the stub as any LlmGatewayStub: what they await answers, or raises, as the unary call would."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from shared.call_streams import TurnCallStreams


class _TurnRouted(grpc.aio.UnaryUnaryMultiCallable[Any, Any]):
    """GenerateOnce or Embed: on the turn's stream while its turn (the request's origin) runs, else unary."""

    def __init__(self, unary: Any, kind: str, turns: TurnCallStreams) -> None:
        self._unary = unary
        self._kind = kind
        self._turns = turns

    def __call__(self, request: Any, *, timeout: float | None = None, metadata: Any = None, credentials: Any = None,
                 wait_for_ready: bool | None = None, compression: Any = None) -> Any:
        calls = self._turns.of(request.origin.turn_id)
        if calls is None:
            return self._unary(request, timeout=timeout, metadata=metadata, credentials=credentials,
                               wait_for_ready=wait_for_ready, compression=compression)
        return calls.call(self._kind, request, timeout)


if TYPE_CHECKING:  # what LlmGatewayStub(an aio channel) is to the type checker
    _Stub = gateway_pb2_grpc.LlmGatewayAsyncStub
else:
    _Stub = gateway_pb2_grpc.LlmGatewayStub


class TurnGateway(_Stub):
    def __init__(self, channel: grpc.aio.Channel) -> None:
        super().__init__(channel)
        # wait_for_ready: a gateway restarting is waited for, as the unary calls do (agent/model_call.py).
        self.turns = TurnCallStreams(lambda: self.TurnModelCalls(wait_for_ready=True), gateway_pb2.TurnModelCallsRequest)
        self.GenerateOnce = _TurnRouted(self.GenerateOnce, "generate_once", self.turns)
        self.Embed = _TurnRouted(self.Embed, "embed", self.turns)
