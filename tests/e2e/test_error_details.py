"""Errors through the real services carry ErrorInfo a program can act on (docs/api.md, shared/error_reasons.py)."""

from __future__ import annotations

import grpc
import pytest

from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from shared.error_reasons import ERROR_DOMAIN
from shared.errors import error_info, field_violations
from shared.grpc_client import open_channel

# Its own sessions only: the session's shared group (tests/e2e/conftest.py).
SHARED_SERVICES = True

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_bad_request_carries_bad_request_and_error_info(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await scheduler_pb2_grpc.SchedulerStub(channel).GetSession(scheduler_pb2.GetSessionRequest(session_id=""), timeout=10)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in field_violations(raised.value)] == ["session_id"]
    assert (error_info(raised.value).reason, error_info(raised.value).domain) == ("INVALID_ARGUMENT", ERROR_DOMAIN)


async def test_cancel_with_no_running_turn_says_so_with_its_reason(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=30)).session
        for call in (stub.Cancel(scheduler_pb2.CancelRequest(session_id=session.id), timeout=30),
                     stub.Interject(scheduler_pb2.InterjectRequest(session_id=session.id, text="Hello?"), timeout=30)):
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await call
            assert raised.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert error_info(raised.value).reason == "NO_RUNNING_TURN"


async def test_run_manual_of_an_unknown_or_unmanual_runtime_names_it(services) -> None:
    async with open_channel(services.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=30)).session
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            async for _ in stub.RunManual(scheduler_pb2.RunManualRequest(session_id=session.id, runtime_id="nobody/nothing"), timeout=30):
                pass
        assert (unknown.value.code(), error_info(unknown.value).reason) == (grpc.StatusCode.NOT_FOUND, "RUNTIME_NOT_FOUND")
        with pytest.raises(grpc.aio.AioRpcError) as story:
            async for _ in stub.RunManual(scheduler_pb2.RunManualRequest(session_id=session.id, runtime_id="narrator"), timeout=30):
                pass
        assert (story.value.code(), error_info(story.value).reason) == (grpc.StatusCode.FAILED_PRECONDITION, "RUNTIME_NOT_MANUAL")
