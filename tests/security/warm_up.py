"""Wait until a freshly started group's scheduler reaches its peers."""

from __future__ import annotations

import asyncio
import time

import grpc

from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from shared.grpc_client import open_channel


async def until_sessions_open(scheduler_addr: str, token: str | None, timeout_s: float = 20.0) -> None:
    """Services start together, so the scheduler's channel to one that came up last may still be in
    reconnect backoff (its calls fail at once with UNAVAILABLE): create sessions until one is made."""
    deadline = time.monotonic() + timeout_s
    async with open_channel(scheduler_addr, bearer_token=token) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        while True:
            try:
                await stub.CreateSession(scheduler_pb2.CreateSessionRequest(), timeout=10)
                return
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)
