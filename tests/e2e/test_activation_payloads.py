"""What starts a manual or event runtime, through the five services: an agent reads its activation payload in
<runtime-activation> (bookkeeping fields removed, as every record the model reads), and io.payloadSchema refuses a
manual payload that does not fit, from RunManual (INVALID_ARGUMENT, PAYLOAD_INVALID) and from ctx.recursive_call.
The model is the local recorded-replies server, which keeps every request the gateway sends it."""

from __future__ import annotations

import json
import re

import grpc
import pytest
import pytest_asyncio

from covel.scheduler.v1 import resources_pb2, scheduler_pb2
from shared.errors import error_info
from shared.settings import REPO_ROOT
from shared.structs import from_struct, to_struct
from tests.e2e.conftest import TEST_PLUGIN_DIR, minimal_session
from tests.e2e.recorded_model import recorded, recorded_services

pytestmark = pytest.mark.asyncio(loop_scope="session")
BLOCK = re.compile(r"<runtime-activation>\n(.*?)\n</runtime-activation>", re.DOTALL)


def answer(text: str) -> dict:
    """A recorded-style completion whose content is `text`."""
    return {"id": "chatcmpl-activation", "object": "chat.completion", "model": "recorded-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def activation_of(system: str) -> dict | None:
    found = BLOCK.search(system)
    return json.loads(found.group(1)) if found else None


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(tmp_path_factory):
    async with recorded_services(tmp_path_factory.mktemp("covel-activation"), [REPO_ROOT / "plugins", TEST_PLUGIN_DIR]) as (model, stub, _):
        model.replies = {"narrator": [recorded("narrator-en-1")], "activation-probe/ask": [answer("The ferry leaves at dawn.")],
                         "activation-probe/hear": [answer("The north tower bell rang.")]}
        session = (await stub.CreateSession(minimal_session(requested_plugins=["activation-probe"],
                                                            approved_plugins=["activation-probe"]))).session
        yield model, stub, session


async def run_manual(stub, session_id: str, runtime_id: str, payload: dict) -> resources_pb2.Turn:
    request = scheduler_pb2.RunManualRequest(session_id=session_id, runtime_id=runtime_id, payload=to_struct(payload))
    return [event async for event in stub.RunManual(request)][-1].turn_completed


async def test_a_manual_agent_reads_its_payload(stack) -> None:
    model, stub, session = stack
    model.requests.clear()
    turn = await run_manual(stub, session.id, "activation-probe/ask", {"question": "When does the ferry leave?",
                                                                       "askedAt": "2026-01-02T03:04:05Z"})
    assert turn.status == resources_pb2.TURN_STATUS_COMMITTED, turn.abort_reason
    [sent] = model.of("activation-probe/ask")
    # The ISO time under a name ending in At is bookkeeping: the model does not see it (ctx.activation keeps it).
    assert activation_of(sent.system) == {"question": "When does the ferry leave?"}
    assert sent.system.index("Answer the question the activation payload asks.") < sent.system.index("<runtime-activation>")


async def test_an_event_agent_reads_the_events_that_started_it(stack) -> None:
    model, stub, session = stack
    model.requests.clear()
    events = [e async for e in stub.SubmitActions(scheduler_pb2.SubmitActionsRequest(
        session_id=session.id, actions=[resources_pb2.PlayerAction(text="I listen for the bells.")]))]
    turn = events[-1].turn_completed
    results = {r.runtime_id: r for r in turn.runtime_results}
    assert results["activation-probe/hear"].status == resources_pb2.RUNTIME_STATUS_SUCCESS, results["activation-probe/hear"].reason
    [sent] = model.of("activation-probe/hear")
    assert activation_of(sent.system) == {"events": [{"topic": "activation-probe.rang", "payload": {"bell": "north tower"},
                                                      "source": "activation-probe/bell"}]}
    [narrator] = model.of("narrator")
    assert "<runtime-activation>" not in narrator.system, "a runtime the turn scheduled has no activation"


async def test_run_manual_refuses_a_payload_its_schema_does_not_accept(stack) -> None:
    model, stub, session = stack
    model.requests.clear()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await run_manual(stub, session.id, "activation-probe/ask", {"question": "", "mood": "grim"})
    error = refused.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    info = error_info(error)
    assert info is not None and info.reason == "PAYLOAD_INVALID" and info.metadata["runtime_id"] == "activation-probe/ask"
    assert "/question" in error.details() and "'mood' was unexpected" in error.details(), error.details()
    assert model.of("activation-probe/ask") == [], "the runtime never ran"
    turns = (await stub.ListTurns(scheduler_pb2.ListTurnsRequest(session_id=session.id))).turns
    assert all(t.origin != resources_pb2.TURN_ORIGIN_MANUAL or t.status == resources_pb2.TURN_STATUS_COMMITTED for t in turns)


async def test_a_nested_run_with_a_payload_its_schema_refuses_raises_in_the_caller(stack) -> None:
    model, stub, session = stack
    model.requests.clear()
    turn = await run_manual(stub, session.id, "activation-probe/relay", {"topic": "the ferry"})
    [result] = turn.runtime_results
    refused = from_struct(result.output)["refused"]
    assert refused.startswith("recursive_call('activation-probe/ask'): the input does not match") and "'question' is a required property" in refused
    assert model.of("activation-probe/ask") == []
    turn = await run_manual(stub, session.id, "activation-probe/relay", {"question": "Is the tide in?"})
    assert from_struct(turn.runtime_results[0].output) == {"status": "success"}
    assert activation_of(model.of("activation-probe/ask")[0].system) == {"question": "Is the tide in?"}
