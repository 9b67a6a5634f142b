"""run_model_stream answered piece by piece: PreLLMCall keeps the plugin's stream open (replace.responseStream)
and StreamModelAnswer relays it (services/hooks/plugin_side/model_streams.py, model_answers.py), through a real hooks
service over gRPC with the plugin in process and in its sandbox worker; and the open streams' bounds."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import grpc
import pytest
import pytest_asyncio

from covel.hooks.v1 import hooks_pb2
from services.hooks.plugin_side import model_streams
from services.hooks.plugin_side.model_streams import OpenStreams, PluginStream
from shared.errors import field_violations
from shared.structs import from_struct, to_struct
from tests.support.hooks_service import hooks_with_plugin

pytestmark = pytest.mark.asyncio(loop_scope="session")

MANIFEST = '''---
contributes:
  hooks: [PreLLMCall, PostLLMResponse]
---
'''
STREAMS = '''
import asyncio

from shared.plugin_sdk.hookspecs import StreamEvent, hookimpl


def slowly(*pieces, fail=None, first_after=0.0, gap=0.1):
    async def events():
        await asyncio.sleep(first_after)
        for piece in pieces:
            yield StreamEvent("text", piece)
            await asyncio.sleep(gap)
        if fail:
            raise RuntimeError(fail)
    return events()


class Fallback:
    """Registered first: asked after Streams."""

    @hookimpl
    def run_model_stream(self, prompt, session_id, state):
        return iter(["fallback"]) if prompt[-1]["content"] == "raise-first" else None


class Streams:
    @hookimpl
    def run_model_stream(self, prompt, session_id, state):
        said = prompt[-1]["content"]
        if said == "pieces":
            return slowly("Once ", "upon ", "a time.", gap=0.4)
        if said == "sync":
            return iter(["a", StreamEvent("tool_call", data={"name": "x"}), "b", StreamEvent("final", "whole")])
        if said == "final-only":
            return iter([StreamEvent("final", "at once")])
        if said == "raise-first":
            def broken():
                raise RuntimeError("no model")
                yield "never"
            return broken()
        if said == "raise-later":
            return slowly("x", fail="model bug")
        if said == "slow-first":
            return slowly("late", first_after=1.5)
        if said == "long":
            return slowly(*["tick "] * 50)
        return None


def register(covel):
    covel.register_hookimpls(Fallback())
    covel.register_hookimpls(Streams())
'''


@pytest_asyncio.fixture(scope="module", loop_scope="session", params=["in-process", "sandboxed"])
async def hooks(request, tmp_path_factory):
    """Registry, store and hooks with the `streams` plugin, in the service's process or in its sandbox worker."""
    async with hooks_with_plugin(tmp_path_factory.mktemp("hooks"), "streams", MANIFEST, STREAMS,
                                 sandboxed=request.param == "sandboxed") as stub:
        yield stub


def context(session_id: str = "s1") -> hooks_pb2.HookContext:
    return hooks_pb2.HookContext(session_id=session_id, turn_id="t1", plugin_id="narrator", runtime_id="narrator",
                                 active_plugin_ids=["streams"], approved_plugin_ids=["streams"])


async def pre_llm_call(stub, said: str, session_id: str = "s1") -> dict:
    reply = await stub.Dispatch(hooks_pb2.DispatchRequest(event="PreLLMCall", context=context(session_id), payload=to_struct(
        {"messages": [{"role": "user", "content": said}], "model": "story", "tools": [], "stream": True})))
    assert [entry.status for entry in reply.trace] == ["ok"], reply.trace
    return from_struct(reply.payload)


def read(stub, stream: dict, session_id: str = "s1"):
    return stub.StreamModelAnswer(hooks_pb2.StreamModelAnswerRequest(
        context=context(session_id), plugin_id=stream["plugin"], stream_id=stream["streamId"]))


async def chunks(stub, said: str) -> list[tuple[float, hooks_pb2.StreamModelAnswerChunk]]:
    payload = await pre_llm_call(stub, said)
    assert "response" not in payload and payload["responseStream"]["plugin"] == "streams"
    return [(time.monotonic(), chunk) async for chunk in read(stub, payload["responseStream"])]


async def test_a_stream_is_relayed_piece_by_piece_as_it_comes(hooks) -> None:
    got = await chunks(hooks, "pieces")
    *pieces, (_, last) = got
    # A chunk per piece as they came (pieces that wait together for a slow reader go in one batch).
    assert "".join(chunk.text for _, chunk in pieces) == "Once upon a time." and len(pieces) >= 2
    assert last.final and last.text == "Once upon a time." and not last.error
    # The pieces reached the reader as they came (0.4 s apart): even if two of them waited together for a slow reader,
    # the first and last chunks are a gap apart.
    assert pieces[-1][0] - pieces[0][0] >= 0.3


async def test_a_final_event_is_the_whole_answer_and_tool_calls_are_skipped(hooks) -> None:
    got = [chunk for _, chunk in await chunks(hooks, "sync")]
    assert "".join(chunk.text for chunk in got[:-1]) == "ab"
    assert got[-1].final and got[-1].text == "whole"


async def test_a_stream_that_ends_at_its_first_event_answers_as_text(hooks) -> None:
    payload = await pre_llm_call(hooks, "final-only")
    assert payload["response"] == {"content": "at once"} and "responseStream" not in payload


async def test_a_stream_that_raises_before_its_first_piece_is_skipped_for_the_next_impl(hooks) -> None:
    got = [chunk for _, chunk in await chunks(hooks, "raise-first")]
    assert got[-1].final and got[-1].text == "fallback"


async def test_a_stream_that_raises_later_ends_with_the_error(hooks) -> None:
    got = [chunk for _, chunk in await chunks(hooks, "raise-later")]
    assert [chunk.text for chunk in got[:-1]] == ["x"]
    assert not got[-1].final and "RuntimeError: model bug" in got[-1].error


async def test_a_slow_first_piece_is_not_waited_for_by_pre_llm_call(hooks) -> None:
    started = time.monotonic()
    payload = await pre_llm_call(hooks, "slow-first")
    assert time.monotonic() - started < 1.4 and "responseStream" in payload
    got = [chunk async for chunk in read(hooks, payload["responseStream"])]
    assert got[-1].final and got[-1].text == "late"


async def test_unknown_and_foreign_streams_are_not_found_naming_the_field(hooks) -> None:
    payload = await pre_llm_call(hooks, "pieces")
    stream = payload["responseStream"]
    cases = [({**stream, "streamId": "nope"}, "s1", "stream_id"), ({**stream, "plugin": "other"}, "s1", "plugin_id"),
             (stream, "another-session", "stream_id")]
    for wrong, session_id, field in cases:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            [chunk async for chunk in read(hooks, wrong, session_id)]
        assert raised.value.code() == grpc.StatusCode.NOT_FOUND and raised.value.details().startswith(f"{field}:"), raised.value
    got = [chunk async for chunk in read(hooks, stream)]
    assert got[-1].final and got[-1].text == "Once upon a time."
    with pytest.raises(grpc.aio.AioRpcError) as again:
        [chunk async for chunk in read(hooks, stream)]
    assert again.value.code() == grpc.StatusCode.NOT_FOUND, "read to its end: closed"
    with pytest.raises(grpc.aio.AioRpcError) as empty:
        [chunk async for chunk in read(hooks, {**stream, "streamId": ""})]
    assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT and [v.field for v in field_violations(empty.value)] == ["stream_id"]


async def test_a_reader_that_goes_away_closes_the_stream(hooks) -> None:
    payload = await pre_llm_call(hooks, "long")
    call = read(hooks, payload["responseStream"])
    assert (await call.read()).text == "tick "
    call.cancel()
    deadline = time.monotonic() + 5
    while True:
        try:
            [chunk async for chunk in read(hooks, payload["responseStream"])]
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND
            assert "is being read" in error.details() or "no open stream" in error.details()
            if "no open stream" in error.details():
                break
        assert time.monotonic() < deadline, "the stream was not closed"
        await asyncio.sleep(0.05)


# ----- the open streams' bounds (model_streams.OpenStreams), in this process


def open_stream(pieces, session_id: str = "s") -> PluginStream:
    hooks = SimpleNamespace(plugin_id="p", on_raised=None, wrong_type=lambda *args: None)

    async def events():
        for piece in pieces:
            yield piece
            await asyncio.sleep(0.01)
    return PluginStream(hooks, SimpleNamespace(plugin_name="p#0"), session_id, events())  # type: ignore[arg-type]


async def test_the_oldest_unread_stream_makes_room_and_read_ones_are_kept(monkeypatch) -> None:
    monkeypatch.setattr(model_streams, "MAX_OPEN_PER_PLUGIN", 2)
    streams = OpenStreams()
    first, second, third = (streams.keep(open_stream(["a"])) for _ in range(3))
    assert first and second and third and len(streams) == 2
    assert "missing" in await streams.next_batch("p", first.stream_id, session_id="s", claim=True, wait_s=1)
    # Both open ones being read: a new one is refused (its impl is skipped).
    for kept in (second, third):
        assert (await streams.next_batch("p", kept.stream_id, session_id="s", claim=True, wait_s=1))["pieces"] == ["a"]
    assert streams.keep(open_stream(["b"])) is None


async def test_an_unread_stream_is_closed_after_its_timeout(monkeypatch) -> None:
    monkeypatch.setattr(model_streams, "UNCLAIMED_TIMEOUT_S", 0.1)
    streams = OpenStreams()
    kept = streams.keep(open_stream(["a"]))
    assert kept is not None and len(streams) == 1
    await asyncio.sleep(0.2)
    assert len(streams) == 0
    assert "missing" in await streams.next_batch("p", kept.stream_id, session_id="s", claim=True, wait_s=1)


async def test_a_stalled_stream_fails_after_its_wait() -> None:
    streams = OpenStreams()

    async def stalls():
        yield "a"
        await asyncio.sleep(30)
        yield "never"
    hooks = SimpleNamespace(plugin_id="p", on_raised=None, wrong_type=lambda *args: None)
    kept = streams.keep(PluginStream(hooks, SimpleNamespace(plugin_name="p#0"), "s", stalls()))  # type: ignore[arg-type]
    assert kept is not None
    assert (await streams.next_batch("p", kept.stream_id, session_id="s", claim=True, wait_s=1))["pieces"] == ["a"]
    started = time.monotonic()
    batch = await streams.next_batch("p", kept.stream_id, session_id="s", claim=False, wait_s=0.2)
    assert "stalled" in batch["error"] and time.monotonic() - started < 1 and len(streams) == 0


async def test_pieces_waiting_are_taken_in_one_batch() -> None:
    streams = OpenStreams()
    stream = open_stream(["a", "b", "c"])
    kept = streams.keep(stream)
    assert kept is not None
    await asyncio.sleep(0.2)
    assert await streams.next_batch("p", kept.stream_id, session_id="s", claim=True, wait_s=1) == {"pieces": ["a", "b", "c"], "final": "abc"}


async def test_what_a_stream_raises_is_reported_to_the_plugins_on_error() -> None:
    heard = []

    async def on_raised(name, error):
        heard.append((name, str(error)))

    async def events():
        yield "a"
        raise RuntimeError("model bug")
    hooks = SimpleNamespace(plugin_id="p", on_raised=on_raised, wrong_type=lambda *args: None)
    streams = OpenStreams()
    kept = streams.keep(PluginStream(hooks, SimpleNamespace(plugin_name="p#0"), "s", events()))  # type: ignore[arg-type]
    assert kept is not None
    await asyncio.sleep(0.05)
    batch = await streams.next_batch("p", kept.stream_id, session_id="s", claim=True, wait_s=1)
    assert batch == {"pieces": ["a"], "error": "RuntimeError: model bug"} and heard == [("run_model_stream", "model bug")]
