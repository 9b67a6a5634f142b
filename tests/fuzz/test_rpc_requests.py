"""Every public RPC of the five services, with requests generated from the proto descriptors, sent
to real running servers: no call ends INTERNAL or UNKNOWN, none outlives its deadline, no status
message echoes input in full, and every service still serves afterwards."""

from __future__ import annotations

import asyncio
import re
import time

import grpc
import pytest
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from hypothesis import event, given, reject
from hypothesis import strategies as st

from shared.errors import ECHO_MAX_CHARS, MESSAGE_MAX_CHARS
from shared.grpc_client import SERVICE_FILES, check_health, deadline_of
from tests.fuzz.conftest import FuzzTarget
from tests.fuzz.profiles import fuzzed
from tests.fuzz.proto_strategies import Palette, message_strategy

METHODS: list[MethodDescriptor] = [
    method
    for file in SERVICE_FILES
    if file.package.startswith("covel.")
    for service in file.services_by_name.values()
    for method in service.methods
]
# Calls the table leaves to their caller (turns, model calls, waits a request asks for) get this.
CALLER_SET_DEADLINE_S = 30.0
# A server's answer to an expired deadline, and the scheduling of a loaded machine, come a little late.
LATE_SLACK_S = 5.0
# Streams that last as long as their watcher: the first message (or an error) is the answer.
ENDLESS_STREAMS = {"covel.registry.v1.PluginRegistry.WatchCatalogue"}
# Endless streams that say nothing until something happens (WatchSession: the session's next turn): a request they
# accept is one still open, without an error, after this long.
SILENT_STREAMS = {"covel.scheduler.v1.Scheduler.WatchSession"}
SILENT_ACCEPTED_S = 3.0
CALLERS_FAULT = "INTERNAL or UNKNOWN answers a caller's bad request"
_LONG_RUN = re.compile(rf"\S{{{ECHO_MAX_CHARS + 1},}}")


def service_of(method: MethodDescriptor) -> str:
    """"covel.store.v1.TransactionalStore" -> "store"."""
    return method.containing_service.full_name.split(".")[1]


def timeout_of(method: MethodDescriptor) -> float:
    seconds = deadline_of(method.containing_service.full_name, method.name).seconds
    return CALLER_SET_DEADLINE_S if seconds is None else seconds


async def call(target: FuzzTarget, method: MethodDescriptor, body: bytes, timeout_s: float) -> grpc.StatusCode:
    """Send `body` as `method`'s request; the call's status (streams: read to their end)."""
    path = f"/{method.containing_service.full_name}/{method.name}"
    channel = target.channel(service_of(method), path)
    try:
        if not method.server_streaming:
            await channel.unary_unary(path)(body, timeout=timeout_s)
            return grpc.StatusCode.OK
        stream = channel.unary_stream(path)(body, timeout=timeout_s)
        if method.full_name in SILENT_STREAMS:
            try:
                await asyncio.wait_for(stream.read(), SILENT_ACCEPTED_S)
            except TimeoutError:
                pass  # still open, no error: the request was accepted
            stream.cancel()
            return grpc.StatusCode.OK
        async for _ in stream:
            if method.full_name in ENDLESS_STREAMS:
                stream.cancel()
                break
        return grpc.StatusCode.OK
    except grpc.aio.AioRpcError as error:
        details = error.details() or ""
        assert len(details) <= MESSAGE_MAX_CHARS and not _LONG_RUN.search(details), f"{error.code().name} echoes input: {details[:300]}"
        assert error.code() not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), f"{CALLERS_FAULT}: {error.code().name} {details}"
        return error.code()


async def assert_answered_in_time(target: FuzzTarget, method: MethodDescriptor, body: bytes) -> grpc.StatusCode:
    timeout_s = timeout_of(method)
    started = time.monotonic()
    code = await call(target, method, body, timeout_s)
    took = time.monotonic() - started
    event(f"status {code.name}")  # --hypothesis-show-statistics: how far the requests got
    assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, f"{method.full_name} did not answer within {timeout_s} s"
    assert took <= timeout_s + LATE_SLACK_S, f"{method.full_name} took {took:.1f} s, its deadline is {timeout_s} s"
    process = target.group.processes[service_of(method)]
    assert process.returncode is None, f"{service_of(method)} exited ({process.returncode}):\n{target.group.log_tail(service_of(method))}"
    return code


def _serialized(request: Message) -> bytes:
    try:
        return request.SerializeToString()
    except Exception:  # noqa: BLE001 -- protobuf could not encode it: nothing a client can send
        reject()


@pytest.mark.parametrize("method", METHODS, ids=lambda method: f"{service_of(method)}.{method.name}")
@fuzzed(short=4, long=300)
@given(data=st.data())
async def test_generated_requests_get_a_clear_status_in_time(fuzz_target: FuzzTarget, method: MethodDescriptor, data) -> None:
    palette = Palette(fuzz_target.pools, hostile=data.draw(st.booleans(), label="hostile"))
    request = data.draw(message_strategy(method.input_type, palette), label="request")
    await assert_answered_in_time(fuzz_target, method, _serialized(request))


def _undecodable(valid: bytes, cut: int, junk: bytes) -> bytes:
    """A request cut short and/or followed by bytes that are no field."""
    return valid[: max(1, len(valid) * cut // 100)] + junk


@fuzzed(short=12, long=1000)
@given(data=st.data())
async def test_bytes_that_are_no_request_get_a_clear_status(fuzz_target: FuzzTarget, data) -> None:
    method = data.draw(st.sampled_from(METHODS), label="method")
    valid = _serialized(data.draw(message_strategy(method.input_type, Palette(fuzz_target.pools)), label="request"))
    body = data.draw(st.one_of(
        st.binary(min_size=1, max_size=200),
        st.builds(_undecodable, st.just(valid), st.integers(1, 99), st.binary(max_size=8)),
        st.just(valid + b"\xff\xff\xff\xff\x0f"),
    ), label="body")
    await assert_answered_in_time(fuzz_target, method, body)


async def test_every_service_still_serves_after_the_fuzzing(fuzz_target: FuzzTarget) -> None:
    for name, addr in fuzz_target.group.addrs.items():
        assert await check_health(addr, timeout_s=10, security=fuzz_target.group.security(name)) == "SERVING", fuzz_target.group.log_tail(name)
