"""Hook handlers' session state (ctx.state): per session and plugin, atomic adds, bounded, gone with the session."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from covel.store.v1 import store_pb2
from services.store.hook_state import KEYS_MAX
from shared.call_streams import StreamCalls
from shared.structs import from_value, to_value
from tests.store.helpers import expect_error, new_session


def state(session_id: str, op: str, key: str, value=None, plugin_id: str = "cost-gate") -> store_pb2.AccessHookStateRequest:
    return store_pb2.AccessHookStateRequest(session_id=session_id, plugin_id=plugin_id, op=op, key=key,
                                            value=to_value(value) if value is not None else None)


async def test_state_round_trip_and_concurrent_adds_from_replicas(stub, hooks):
    session = await new_session(stub)
    assert not (await hooks.AccessHookState(state(session.id, "get", "usedTokens"))).found
    await hooks.AccessHookState(state(session.id, "set", "receipt", {"turnId": "t1", "checks": [{"roll": 3}]}))
    got = await hooks.AccessHookState(state(session.id, "get", "receipt"))
    assert got.found and from_value(got.value) == {"turnId": "t1", "checks": [{"roll": 3}]}
    assert not (await hooks.AccessHookState(state(session.id, "get", "receipt", plugin_id="dice-check"))).found, "per plugin"
    # Twenty adds at once, as several hooks replicas would: none lost.
    await asyncio.gather(*(hooks.AccessHookState(state(session.id, "add", "usedTokens", 5)) for _ in range(20)))
    assert from_value((await hooks.AccessHookState(state(session.id, "get", "usedTokens"))).value) == 100
    await hooks.AccessHookState(state(session.id, "delete", "usedTokens"))
    assert not (await hooks.AccessHookState(state(session.id, "get", "usedTokens"))).found


async def test_mistakes_are_refused_by_field(stub, hooks):
    session = await new_session(stub)
    for request, field in ((state(session.id, "pop", "k"), "op"), (state(session.id, "get", ""), "key"),
                           (state(session.id, "get", "k" * 201), "key"), (state(session.id, "add", "k", "many"), "value"),
                           (state(session.id, "set", "k", "x" * 70_000), "value"), (state(session.id, "get", "k", plugin_id=""), "plugin_id")):
        error = await expect_error(grpc.StatusCode.INVALID_ARGUMENT, hooks.AccessHookState(request))
        assert error.details().startswith(f"{field}:"), error.details()
    await hooks.AccessHookState(state(session.id, "set", "word", "hello"))
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, hooks.AccessHookState(state(session.id, "add", "word", 1)))
    assert "not a number" in error.details()
    for index in range(KEYS_MAX - 1):
        await hooks.AccessHookState(state(session.id, "set", f"k{index}", index))
    error = await expect_error(grpc.StatusCode.FAILED_PRECONDITION, hooks.AccessHookState(state(session.id, "set", "one-more", 1)))
    assert f"holds {KEYS_MAX} keys" in error.details()
    # The scheduler may not touch a plugin's state (hook state is the hooks service's), only the kernel's own
    # (`framework`: the lorebook's timers), which hook handlers may not touch.
    refused = await expect_error(grpc.StatusCode.PERMISSION_DENIED, stub.AccessHookState(state(session.id, "get", "word")))
    assert "hooks service's only" in refused.details()
    await stub.AccessHookState(state(session.id, "set", "lorebook.timers", {"turn": 1}, plugin_id="framework"))
    kernels = await expect_error(grpc.StatusCode.PERMISSION_DENIED, hooks.AccessHookState(state(session.id, "get", "lorebook.timers",
                                                                                                plugin_id="framework")))
    assert "kernel's own" in kernels.details()


async def test_the_hooks_services_stream_answers_each_access_as_accesshookstate(stub, hooks):
    """HookStateCalls (the hooks service's open stream, shared/call_streams.py): the same answers, atomic adds and
    refusals by field as AccessHookState's, each call answered by its id; the scheduler may not open it."""
    session = await new_session(stub)
    calls = StreamCalls(hooks.HookStateCalls, store_pb2.HookStateCallsRequest)
    await asyncio.gather(*(calls.call("access", state(session.id, "add", "usedTokens", 5), 10) for _ in range(20)))
    got = await calls.call("access", state(session.id, "get", "usedTokens"), 10)
    assert got.found and from_value(got.value) == 100
    assert from_value((await hooks.AccessHookState(state(session.id, "get", "usedTokens"))).value) == 100
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await calls.call("access", state(session.id, "pop", "k"), 10)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and refused.value.details().startswith("op:")
    with pytest.raises(grpc.aio.AioRpcError) as kernels:
        await calls.call("access", state(session.id, "get", "lorebook.timers", plugin_id="framework"), 10)
    assert kernels.value.code() == grpc.StatusCode.PERMISSION_DENIED and "kernel's own" in kernels.value.details()
    calls.close()
    scheduler = stub.HookStateCalls()
    with pytest.raises(grpc.aio.AioRpcError) as not_hooks:  # at the write, or at the read if the write went first
        await scheduler.write(store_pb2.HookStateCallsRequest(id=1, access=state(session.id, "get", "usedTokens")))
        await asyncio.wait_for(scheduler.read(), 30)
    assert not_hooks.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_writes_that_arrive_together_commit_together_each_answered_as_alone(stub, hooks):
    """Writes gathered while the store writes hook state share the next transaction (hook_state_writes.py), each in its
    own savepoint: every add returns its own running total, and a write the key limit refuses fails alone."""
    session = await new_session(stub)
    for index in range(KEYS_MAX - 2):  # two keys short of the limit, "count" among them
        await hooks.AccessHookState(state(session.id, "set", "count" if index == 0 else f"k{index}", 0))
    adds = [hooks.AccessHookState(state(session.id, "add", "count", 1)) for _ in range(12)]
    news = [hooks.AccessHookState(state(session.id, "set", f"new{index}", index)) for index in range(4)]
    answers = await asyncio.gather(*adds, *news, return_exceptions=True)
    totals = sorted(from_value(answer.value) for answer in answers[:12])
    assert totals == list(range(1, 13)), "each add saw the ones before it, none lost"
    refused = [answer for answer in answers[12:] if isinstance(answer, grpc.aio.AioRpcError)]
    assert len(refused) == 2 and all(error.code() == grpc.StatusCode.FAILED_PRECONDITION and f"holds {KEYS_MAX} keys" in error.details()
                                     for error in refused), answers[12:]
    kept = [index for index in range(4) if (await hooks.AccessHookState(state(session.id, "get", f"new{index}"))).found]
    assert len(kept) == 2, "the two writes under the limit were kept, the refused ones rolled back alone"
    assert from_value((await hooks.AccessHookState(state(session.id, "get", "count"))).value) == 12
