"""A history.compact@2 provider's model call: what the kernel accepts, and that any failure keeps the first summary."""

from __future__ import annotations

import asyncio
import json

import grpc
import pytest

from covel.common.v1 import common_pb2
from covel.gateway.v1 import gateway_pb2
from covel.hooks.v1 import hooks_pb2
from services.scheduler.turn.compaction import _summarise
from services.scheduler.turn.compaction_model import MAX_TIMEOUT_MS, model_ask
from shared.structs import to_value
from tests.scheduler.agent_harness import scope

ASK = {"slot": "fast", "system": "Summarise.", "prompt": "Turns to fold:\nPlayer: I rest.", "schema": {"type": "object"}}


class Hooks:
    """The provider: its first answer asks for the model; its second makes the summary from `modelAnswer`."""

    def __init__(self, second=None):
        self.requests = []
        self.second = second

    async def call_extension(self, scope, point, payload, *, plugin_id="", timeout_ms=0):
        self.requests.append(payload)
        if "modelAnswer" in payload:
            output = self.second if self.second is not None else {"summary": f"MODEL: {payload['modelAnswer']['summary']}"}
        else:
            output = {"summary": "The player: I rest.", "model": ASK}
        return [hooks_pb2.ExtensionAnswer(plugin_id=plugin_id, id="summaries", ok=True, output=to_value(output))]


class Gateway:
    def __init__(self, content='{"summary": "the player rested"}', finish=gateway_pb2.FINISH_REASON_STOP, error=None, delay=0.0):
        self.content, self.finish, self.error, self.delay, self.requests = content, finish, error, delay, []

    async def GenerateOnce(self, request, timeout=None, wait_for_ready=False):  # noqa: N802 (the gRPC method's name)
        self.requests.append((request, timeout))
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return gateway_pb2.GenerateResponse(message=gateway_pb2.ChatMessage(role="assistant", content=self.content), finish_reason=self.finish)


class Unavailable(grpc.aio.AioRpcError):
    def __init__(self):
        super().__init__(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), details="gateway down")


FOLDED = [common_pb2.Message(seq=1, role="player", text="I rest.")]


async def summarise(hooks, gateway):
    return await _summarise(hooks, scope(), "history-compaction", FOLDED, None, 4000, gateway)


async def test_the_model_answer_goes_back_to_the_provider_and_its_summary_is_kept():
    hooks, gateway = Hooks(), Gateway()
    assert await summarise(hooks, gateway) == ("MODEL: the player rested", "")
    request, timeout = gateway.requests[0]
    assert request.slot == "fast" and [m.role for m in request.messages] == ["system", "user"]
    assert request.response_format.name == "summary" and request.timeout_ms == 20_000 and timeout == 21.0
    assert request.origin.runtime_id == "history-compaction/history.compact@2"
    assert hooks.requests[1]["modelAnswer"] == {"summary": "the player rested"}
    assert hooks.requests[1]["messages"] == hooks.requests[0]["messages"]


@pytest.mark.parametrize("gateway", [Gateway(error=Unavailable()), Gateway(content="not json"),
                                     Gateway(finish=gateway_pb2.FINISH_REASON_ERROR)], ids=["unavailable", "not-json", "error"])
async def test_a_failed_model_call_keeps_the_first_summary(gateway):
    hooks = Hooks()
    assert await summarise(hooks, gateway) == ("The player: I rest.", "")
    assert len(hooks.requests) == 1


async def test_a_second_answer_without_a_summary_keeps_the_first_and_no_gateway_means_no_call():
    assert await summarise(Hooks(second={"nothing": True}), Gateway()) == ("The player: I rest.", "")
    hooks = Hooks()
    assert await summarise(hooks, None) == ("The player: I rest.", "") and len(hooks.requests) == 1


def test_model_ask_checks_the_request():
    assert model_ask({"summary": "x"}) is None
    assert model_ask({"model": {**ASK, "timeoutMs": 10**9}}).timeout_ms == MAX_TIMEOUT_MS
    for bad, why in (({**ASK, "slot": ""}, "model.slot"), ({**ASK, "schema": "json"}, "model.schema"),
                     ({**ASK, "timeoutMs": -1}, "model.timeoutMs"), ("fast", "model must be")):
        with pytest.raises(ValueError, match=why):
            model_ask({"model": bad})
    assert json.dumps(ASK)
