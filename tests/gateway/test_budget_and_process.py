"""Wait formulas, Retry-After, and the service as a process (`python -m services.gateway`)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.gateway.budget import backoff_delay, first_token_wait, parse_retry_after
from shared.settings import REPO_ROOT
from tests.support.identities import bare_channel_as, issued


def _waits(total: float, attempts: int) -> list[float]:
    waits, remaining = [], total
    for left in range(attempts, 0, -1):
        wait = first_token_wait(remaining, left)
        waits.append(wait)
        remaining -= wait
    return waits


def test_first_token_waits_follow_the_spec_table() -> None:
    assert _waits(120, 4) == [60, 30, 15, 15]
    assert _waits(240, 2) == [120, 120]


def test_retry_after_and_backoff() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    delays = [backoff_delay(n, 0.5, 8.0) for n in range(8)]
    assert all(0.25 <= d <= 8.0 for d in delays) and delays[-1] >= 4.0


async def test_runs_as_a_process_and_stops_on_sigterm() -> None:
    env = {**os.environ, **issued("gateway").env(), "COVEL_GATEWAY_ADDR": "127.0.0.1:0", "COVEL_LOG_FORMAT": "console"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.gateway", cwd=REPO_ROOT, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    try:
        line = (await asyncio.wait_for(process.stderr.readline(), 20)).decode()
        assert line.startswith("COVEL_READY gateway ")
        port = int(line.split()[2])
        async with bare_channel_as(f"127.0.0.1:{port}", "scheduler") as channel:
            reply = await gateway_pb2_grpc.LlmGatewayStub(channel).GenerateOnce(
                gateway_pb2.GenerateRequest(slot="story", messages=[gateway_pb2.ChatMessage(role="user", content="hi")]),
                timeout=10,
            )
        assert reply.provider == "scripted"
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 15) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
