"""TurnHooks: a turn's hook calls on one stream (shared/call_streams.py, as the hooks service serves it),
through a real hooks service over gRPC with the plugin in process and in its sandbox worker: answers by id in the
order calls finish, each the unary method's answer; a call's error as its answer with the unary method's details, the
stream going on; timeouts, cancels, bounds, an undecodable message, who may call it."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
import pytest_asyncio
from google.rpc import error_details_pb2  # type: ignore[import-untyped]  # googleapis-common-protos ships no stubs

from covel.hooks.v1 import hooks_pb2, hooks_pb2_grpc
from shared.call_streams import StreamCalls
from shared.errors import error_info, field_violations
from shared.structs import from_struct, json_object, to_json_bytes, to_struct
from tests.support.hooks_service import hooks_with_plugin
from tests.support.identities import channel_as

pytestmark = pytest.mark.asyncio(loop_scope="session")

MANIFEST = '''---
contributes:
  hooks: [TurnStart, PreToolUse]
  extensions: [prompt.segment@1/line]
---
'''
ENTRY = '''
import asyncio


def register(covel):
    covel.on("TurnStart", turn_start, timeout_ms=60_000)
    covel.on("PreToolUse", refuse_rm)
    covel.provide_extension("prompt.segment@1", "line", segment)


async def turn_start(ctx, payload):
    said = payload["playerMessage"]["content"]
    if said.startswith("sleep "):
        await asyncio.sleep(float(said.split()[1]))
    return {"action": "abort", "reason": said.upper()}


def refuse_rm(ctx, payload):
    if payload["toolCall"]["name"] == "rm":
        return {"action": "abort", "reason": "no rm here"}


def segment(ctx, input):
    return {"text": "a line for " + input["runtimeId"]}
'''


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=["in-process", "sandboxed"])
async def hooks(request, tmp_path_factory):
    async with hooks_with_plugin(tmp_path_factory.mktemp("hooks"), "streamed", MANIFEST, ENTRY,
                                 sandboxed=request.param == "sandboxed") as stub:
        yield stub


def context() -> hooks_pb2.HookContext:
    return hooks_pb2.HookContext(session_id="s1", turn_id="t1", plugin_id="narrator", runtime_id="narrator",
                                 active_plugin_ids=["streamed"], approved_plugin_ids=["streamed"])


def turn_start(said: str) -> hooks_pb2.DispatchRequest:
    return hooks_pb2.DispatchRequest(event="TurnStart", context=context(), payload=to_struct(
        {"playerMessage": {"role": "user", "content": said}, "actions": [], "turnNumber": 1}))


def tool_use(name: str) -> hooks_pb2.DispatchRequest:
    return hooks_pb2.DispatchRequest(event="PreToolUse", context=context(), payload=to_struct(
        {"toolCall": {"id": "c1", "name": name, "arguments": {}}}))


async def answers(stream, count: int) -> list[hooks_pb2.TurnHooksResponse]:
    return [await asyncio.wait_for(stream.read(), 30) for _ in range(count)]


async def test_calls_on_one_stream_answer_by_id_as_they_finish_each_as_its_unary_method(hooks) -> None:
    stream = hooks.TurnHooks()
    await stream.write(hooks_pb2.TurnHooksRequest(id=1, dispatch=turn_start("sleep 3")))
    await stream.write(hooks_pb2.TurnHooksRequest(id=2, dispatch=tool_use("rm")))
    await stream.write(hooks_pb2.TurnHooksRequest(id=3, extension=hooks_pb2.CallExtensionRequest(
        context=context(), point="prompt.segment@1", input=to_struct({"runtimeId": "narrator"}))))
    await stream.write(hooks_pb2.TurnHooksRequest(id=4, observed=hooks_pb2.DispatchObservedRequest(events=[tool_use("ls")])))
    got = await answers(stream, 4)
    await stream.done_writing()
    assert await stream.read() == grpc.aio.EOF and await stream.code() == grpc.StatusCode.OK
    assert got[-1].id == 1, [answer.id for answer in got]  # the slow call answered last, the others did not wait for it
    by_id = {answer.id: answer for answer in got}
    unary_slow = await hooks.Dispatch(turn_start("sleep 3"))
    assert by_id[1].dispatch.reason == unary_slow.reason and by_id[1].dispatch.reason.endswith("SLEEP 3")
    assert by_id[2].dispatch.outcome == hooks_pb2.OUTCOME_ABORT and "no rm here" in by_id[2].dispatch.reason, by_id[2].dispatch.trace
    assert by_id[2].dispatch.reason == (await hooks.Dispatch(tool_use("rm"))).reason
    assert [answer.ok for answer in by_id[3].extension.answers] == [True]
    assert from_struct(by_id[3].extension.answers[0].output.struct_value) == {"text": "a line for narrator"}
    assert [entry.event for entry in by_id[4].observed.trace] == ["PreToolUse"]


async def test_a_calls_error_is_its_answer_and_the_stream_goes_on(hooks) -> None:
    stream = hooks.TurnHooks()
    await stream.write(hooks_pb2.TurnHooksRequest(id=7, dispatch=hooks_pb2.DispatchRequest(event="TurnBegins", context=context())))
    await stream.write(hooks_pb2.TurnHooksRequest(id=8))  # names no call
    long_id = hooks_pb2.HookContext(session_id="s" * 300)
    await stream.write(hooks_pb2.TurnHooksRequest(id=9, dispatch=hooks_pb2.DispatchRequest(event="TurnStart", context=long_id)))
    await stream.write(hooks_pb2.TurnHooksRequest(id=10, dispatch=turn_start("fine")))
    by_id = {answer.id: answer for answer in await answers(stream, 4)}
    stream.cancel()
    assert by_id[7].WhichOneof("answer") == "error" and by_id[7].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "unknown hook event 'TurnBegins'" in by_id[7].error.message
    assert by_id[8].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and "name the call" in by_id[8].error.message
    assert by_id[9].error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and "ids are at most" in by_id[9].error.message
    assert by_id[10].dispatch.reason.endswith("FINE")


async def test_a_call_past_its_timeout_or_cancelled_is_stopped_and_answered(hooks) -> None:
    stream = hooks.TurnHooks()
    started = time.monotonic()
    await stream.write(hooks_pb2.TurnHooksRequest(id=1, timeout_ms=300, dispatch=turn_start("sleep 20")))
    await stream.write(hooks_pb2.TurnHooksRequest(id=2, dispatch=turn_start("sleep 20")))
    await stream.write(hooks_pb2.TurnHooksRequest(id=2, cancel=True))
    by_id = {answer.id: answer for answer in await answers(stream, 2)}
    stream.cancel()
    assert time.monotonic() - started < 15, "neither call ran its handler's 20 s"
    assert by_id[1].error.code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
    assert by_id[2].error.code == grpc.StatusCode.CANCELLED.value[0]


async def test_a_message_protobuf_cannot_decode_ends_the_stream_invalid_argument(hooks) -> None:
    channel = hooks.channels["scheduler"]
    stream = channel.stream_stream("/covel.hooks.v1.HookDispatcher/TurnHooks")()
    await stream.write(b"\x22\xff\xff\xff\xff\x0f")  # field 4 (dispatch) claims more bytes than it has
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await asyncio.wait_for(stream.read(), 30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "could not decode" in refused.value.details()


async def test_only_the_scheduler_may_open_a_turns_hook_stream(hooks) -> None:
    async with channel_as(hooks.addr, "gateway") as channel:
        stream = hooks_pb2_grpc.HookDispatcherStub(channel).TurnHooks()
        with pytest.raises(grpc.aio.AioRpcError) as refused:  # at the write, or at the read if the write went first
            await stream.write(hooks_pb2.TurnHooksRequest(id=1, dispatch=turn_start("hi")))
            await asyncio.wait_for(stream.read(), 30)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_the_schedulers_turn_calls_raise_what_the_unary_call_would(hooks) -> None:
    calls = StreamCalls(hooks.TurnHooks, hooks_pb2.TurnHooksRequest)
    slow = asyncio.create_task(calls.call("dispatch", turn_start("sleep 2"), 30))
    fast = await calls.call("dispatch", turn_start("quick"), 30)
    assert not slow.done() and fast.reason.endswith("QUICK")
    assert (await slow).reason.endswith("SLEEP 2")
    with pytest.raises(grpc.aio.AioRpcError) as streamed:
        await calls.call("dispatch", hooks_pb2.DispatchRequest(event="Nope", context=context()), 30)
    with pytest.raises(grpc.aio.AioRpcError) as unary:
        await hooks.Dispatch(hooks_pb2.DispatchRequest(event="Nope", context=context()))
    assert streamed.value.code() == unary.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert streamed.value.details() == unary.value.details()
    assert error_info(streamed.value).reason == error_info(unary.value).reason
    assert field_violations(streamed.value) == field_violations(unary.value)
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await calls.call("dispatch", turn_start("sleep 20"), 0.3)
    assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    waiting = asyncio.create_task(calls.call("dispatch", turn_start("sleep 20"), 30))
    await asyncio.sleep(0.2)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert (await calls.call("dispatch", turn_start("after"), 30)).reason.endswith("AFTER")
    calls.close()


async def test_a_payload_sent_as_json_is_answered_as_json_and_held_to_the_struct_limits(hooks) -> None:
    as_json = hooks_pb2.DispatchRequest(event="TurnStart", context=context(), payload_json=to_json_bytes(
        {"playerMessage": {"role": "user", "content": "json"}, "actions": [], "turnNumber": 1}))
    reply = await hooks.Dispatch(as_json)
    assert reply.reason.endswith("JSON") and not reply.HasField("payload")
    assert json_object(reply.payload_json)["playerMessage"]["content"] == "json"
    deep: dict = {}
    inner = deep
    for _ in range(30):
        inner["k"] = {}
        inner = inner["k"]
    for body, problem in [(b'{"a": NaN}', "is not JSON"), (b"[1, 2]", "send one object"),
                          (to_json_bytes({"playerMessage": deep}), "nests deeper than 24")]:
        stream = hooks.TurnHooks()
        await stream.write(hooks_pb2.TurnHooksRequest(id=1, observed=hooks_pb2.DispatchObservedRequest(events=[
            hooks_pb2.DispatchRequest(event="TurnStart", context=context(), payload_json=body)])))
        answer = await asyncio.wait_for(stream.read(), 30)
        stream.cancel()
        assert answer.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and problem in answer.error.message, answer
        violations = [error_details_pb2.BadRequest.FromString(detail.value) for detail in answer.error.details
                      if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR)]
        assert violations[0].field_violations[0].field == "events[0].payload_json", violations


class EndedStream:
    """A stream call the peer has ended (its connection closed) before the reader noticed: a write fails."""

    async def write(self, message) -> None:
        raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), details="GOAWAY")

    def __aiter__(self):
        return self

    async def __anext__(self):
        await asyncio.Event().wait()  # never answers, never ends (the reader has not noticed yet)


class AnsweringStream(EndedStream):
    def __init__(self) -> None:
        self.answers: asyncio.Queue = asyncio.Queue()

    async def write(self, message) -> None:
        self.answers.put_nowait(hooks_pb2.TurnHooksResponse(id=message.id, dispatch=hooks_pb2.DispatchResponse(reason="fresh")))

    async def __anext__(self):
        return await self.answers.get()


async def test_a_call_whose_stream_ended_before_it_went_out_goes_on_a_new_stream() -> None:
    opened = [EndedStream(), AnsweringStream()]
    calls = StreamCalls(lambda: opened.pop(0), hooks_pb2.TurnHooksRequest)
    answer = await calls.call("dispatch", turn_start("hi"), 10)
    assert answer.reason == "fresh" and opened == [], "the failed send was sent again on a second stream"
