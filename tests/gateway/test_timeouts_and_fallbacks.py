"""Every budget, timeout and fallback rule, with timings measured against a real local HTTP server.

The spec's waits are scaled down: the formula's "half the time left" rule makes 1.2 s with
maxRetries 3 give 0.6, 0.3, 0.15, 0.15 s, the same shape as its 120 s table.

Bounds of a whole call's time are exact below. Every other bound allows `lag` besides its margin:
how late this process's event loop ran while the test did (on an idle machine nothing; on a loaded
one the time it was not scheduled). A stall makes a wait look longer, or, when it delays the moment
a request is recorded (or its budget's "time left" shrinks by it), the next gap look shorter.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
import time
from pathlib import Path

import grpc
import pytest

from covel.gateway.v1 import gateway_pb2
from services.gateway.budget import first_token_waits
from tests.conftest import free_addr
from tests.gateway.conftest import collect, running_gateway, user
from tests.gateway.fake_openai import FakeOpenAI, JsonReply, SseReply, completion, delta

STALL_S = 5.0  # longer than any wait in these tests
TOL = 0.1


class LoopLag:
    """Sums how much later than asked a TICK_S sleep of the event loop wakes, while the test runs: only
    wake-ups STALL_AT_S late or more (the timer's usual sub-millisecond lateness adds up to no stall)."""

    TICK_S = 0.01
    STALL_AT_S = 0.005

    def __init__(self) -> None:
        self.total = 0.0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked = loop.time()
            await asyncio.sleep(self.TICK_S)
            late = loop.time() - asked - self.TICK_S
            if late >= self.STALL_AT_S:
                self.total += late


@pytest.fixture
async def lag():
    measured = LoopLag()
    task = asyncio.create_task(measured.run())
    try:
        yield measured
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def request(**extra) -> gateway_pb2.GenerateRequest:
    return gateway_pb2.GenerateRequest(slot="story", messages=[user("hello")], **extra)


def gaps(fake: FakeOpenAI) -> list[float]:
    times = [r.at for r in fake.requests]
    return [later - earlier for earlier, later in zip(times, times[1:])]


def chain_config(tmp_path: Path, primary_url: str, fallback_url: str | None = None) -> Path:
    """Slot story: model "primary" on provider "main", then the fallback "secondary"."""
    fallback_provider = ""
    fallback = "secondary"
    if fallback_url is not None:
        fallback_provider = f"  spare:\n    base_url: {fallback_url}\n"
        fallback = "spare:secondary"
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "providers:\n"
        f"  main:\n    base_url: {primary_url}\n"
        + fallback_provider
        + textwrap.dedent(
            f"""\
            slots:
              story: {{provider: main, model: primary, fallbacks: ["{fallback}"]}}
            """
        )
    )
    return config


def models(fake: FakeOpenAI) -> list[str]:
    return [r.body["model"] for r in fake.requests]


# --- the spec's first-token table ---------------------------------------------------------


def test_the_spec_table_comes_out_of_the_formula() -> None:
    assert first_token_waits(120, 3) == [60, 30, 15, 15]
    assert first_token_waits(240, 1) == [120, 120]
    # The request's own timeoutMs / maxRetries, scaled: same shape.
    assert first_token_waits(1.2, 3) == pytest.approx([0.6, 0.3, 0.15, 0.15])
    assert first_token_waits(2.4, 1) == pytest.approx([1.2, 1.2])


@pytest.mark.parametrize(("timeout_ms", "max_retries", "expected"), [(1200, 3, [0.6, 0.3, 0.15, 0.15]), (2400, 1, [1.2, 1.2])])
async def test_stalls_before_the_first_token_wait_per_the_formula(
    fake_openai: FakeOpenAI, lag: LoopLag, timeout_ms: int, max_retries: int, expected: list[float]
) -> None:
    fake_openai.responses += [SseReply([delta("late")], first_delay_s=STALL_S) for _ in expected]
    settings = {"gateway_openai_base_url": fake_openai.base_url, "gateway_openai_model": "m"}
    async with running_gateway(**settings) as gateway:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await collect(gateway.Generate(request(timeout_ms=timeout_ms, max_retries=max_retries)))
        elapsed = time.monotonic() - started
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert f"maxRetries allowed {max_retries + 1} attempt(s)" in caught.value.details()
    assert len(fake_openai.requests) == len(expected)
    for measured, wanted in zip(gaps(fake_openai), expected):
        assert wanted - 0.02 - lag.total <= measured <= wanted + TOL + lag.total, (gaps(fake_openai), expected, lag.total)
    assert sum(expected) - 0.02 <= elapsed <= sum(expected) + 0.3 + lag.total


async def test_an_explicit_first_token_timeout_is_used_for_every_attempt_and_stalls_never_fall_back(
    fake_openai: FakeOpenAI, lag: LoopLag, tmp_path: Path
) -> None:
    fake_openai.responses += [SseReply([delta("late")], first_delay_s=STALL_S) for _ in range(3)]
    async with running_gateway(gateway_config=chain_config(tmp_path, fake_openai.base_url)) as gateway:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await collect(gateway.Generate(request(first_token_timeout_ms=250, max_retries=2, timeout_ms=10_000)))
        elapsed = time.monotonic() - started
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert models(fake_openai) == ["primary"] * 3
    assert all(0.23 - lag.total <= gap <= 0.25 + TOL + lag.total for gap in gaps(fake_openai))
    assert 0.73 <= elapsed <= 0.75 + 0.3 + lag.total


async def test_the_grpc_deadline_caps_the_waits(fake_openai: FakeOpenAI, lag: LoopLag) -> None:
    fake_openai.responses += [SseReply([delta("late")], first_delay_s=STALL_S) for _ in range(4)]
    settings = {"gateway_openai_base_url": fake_openai.base_url, "gateway_openai_model": "m"}
    async with running_gateway(**settings) as gateway:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await collect(gateway.Generate(request(timeout_ms=60_000), timeout=0.5))
        elapsed = time.monotonic() - started
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert 0.45 <= elapsed <= 0.8 + lag.total
    # The formula ran on the 0.5 s left, not on timeout_ms: 0.25, 0.125, ...
    assert len(fake_openai.requests) >= 3 and 0.23 - lag.total <= gaps(fake_openai)[0] <= 0.25 + TOL + lag.total


# --- time while output streams is not the runtime's ---------------------------------------


async def test_a_slow_but_steady_stream_outlives_timeout_ms(fake_openai: FakeOpenAI) -> None:
    words = [f"w{n} " for n in range(10)]
    fake_openai.responses.append(SseReply([*(delta(w) for w in words), delta(finish="stop")], delay_s=0.1))
    settings = {"gateway_openai_base_url": fake_openai.base_url, "gateway_openai_model": "m"}
    async with running_gateway(**settings) as gateway:
        started = time.monotonic()
        deltas, final = await collect(gateway.Generate(request(timeout_ms=400, max_retries=0, idle_timeout_ms=300)))
        elapsed = time.monotonic() - started
    assert elapsed >= 1.0  # well past timeout_ms
    assert final.finish_reason == gateway_pb2.FINISH_REASON_STOP
    assert final.message.content == "".join(words) == "".join(d.content_delta for d in deltas)
    assert 900 <= final.streamed_ms <= elapsed * 1000
    assert final.attempts == 1


async def test_silence_after_output_counts_against_timeout_ms(fake_openai: FakeOpenAI, lag: LoopLag) -> None:
    fake_openai.responses.append(SseReply([delta("a"), delta("b"), delta(finish="stop")], first_delay_s=0.2, delay_s=STALL_S))
    settings = {"gateway_openai_base_url": fake_openai.base_url, "gateway_openai_model": "m"}
    async with running_gateway(**settings) as gateway:
        started = time.monotonic()
        _, final = await collect(gateway.Generate(request(timeout_ms=500, max_retries=0, idle_timeout_ms=10_000)))
        elapsed = time.monotonic() - started
    assert final.finish_reason == gateway_pb2.FINISH_REASON_INTERRUPTED
    assert final.message.content == "a" and "timeoutMs" in final.error_message
    assert 0.48 <= elapsed <= 0.5 + 0.3 + lag.total


async def test_a_stall_mid_stream_ends_at_the_idle_timeout(fake_openai: FakeOpenAI, lag: LoopLag) -> None:
    fake_openai.responses.append(SseReply([delta("a"), delta("b"), delta(finish="stop")], delay_s=STALL_S))
    settings = {"gateway_openai_base_url": fake_openai.base_url, "gateway_openai_model": "m"}
    async with running_gateway(**settings) as gateway:
        arrivals = []
        async for event in gateway.Generate(request(idle_timeout_ms=250)):
            arrivals.append((time.monotonic(), event))
    (first_at, first), (final_at, last) = arrivals
    assert first.content_delta == "a"
    assert last.final.finish_reason == gateway_pb2.FINISH_REASON_INTERRUPTED and "idle" in last.final.error_message
    assert 0.24 - lag.total <= final_at - first_at <= 0.25 + TOL + lag.total
    assert len(fake_openai.requests) == 1


# --- fallbacks: on 429/5xx before output only ---------------------------------------------


async def test_a_drop_mid_way_is_interrupted_with_no_retry_and_no_fallback(fake_openai: FakeOpenAI, lag: LoopLag, tmp_path: Path) -> None:
    fake_openai.responses.append(SseReply([delta("Once "), delta("upon"), delta(" a time")], drop_after=2))
    async with running_gateway(gateway_config=chain_config(tmp_path, fake_openai.base_url)) as gateway:
        started = time.monotonic()
        deltas, final = await collect(gateway.Generate(request()))
        elapsed = time.monotonic() - started
    assert final.finish_reason == gateway_pb2.FINISH_REASON_INTERRUPTED and final.message.content == "Once upon"
    assert models(fake_openai) == ["primary"] and elapsed < 0.5 + lag.total


async def test_429_with_retry_after_past_the_budget_falls_back_at_once(fake_openai: FakeOpenAI, lag: LoopLag, tmp_path: Path) -> None:
    fake_openai.responses += [
        JsonReply(429, {"error": {"message": "quota"}}, headers={"retry-after": "30"}),
        SseReply([delta("from the fallback"), delta(finish="stop")]),
    ]
    async with running_gateway(gateway_config=chain_config(tmp_path, fake_openai.base_url)) as gateway:
        started = time.monotonic()
        _, final = await collect(gateway.Generate(request(timeout_ms=2000)))
        elapsed = time.monotonic() - started
    assert models(fake_openai) == ["primary", "secondary"] and final.model == "secondary"
    assert elapsed < 0.5 + lag.total and gaps(fake_openai)[0] < 0.2 + lag.total


async def test_429_with_retry_after_inside_the_budget_waits_on_the_same_model(fake_openai: FakeOpenAI, lag: LoopLag, tmp_path: Path) -> None:
    fake_openai.responses += [
        JsonReply(429, {"error": {"message": "slow down"}}, headers={"retry-after": "0.5"}),
        JsonReply(body=completion("patience")),
    ]
    async with running_gateway(gateway_config=chain_config(tmp_path, fake_openai.base_url)) as gateway:
        reply = await gateway.GenerateOnce(request(timeout_ms=5000))
    assert models(fake_openai) == ["primary", "primary"] and reply.message.content == "patience"
    assert 0.5 - lag.total <= gaps(fake_openai)[0] <= 0.5 + TOL + lag.total


async def test_500s_back_off_with_jitter_then_fall_back(fake_openai: FakeOpenAI, lag: LoopLag, tmp_path: Path) -> None:
    fake_openai.responses += [JsonReply(500, {"error": {"message": "boom"}}) for _ in range(3)]
    fake_openai.responses.append(JsonReply(body=completion("spare")))
    async with running_gateway(
        gateway_config=chain_config(tmp_path, fake_openai.base_url), gateway_retry_base_ms=100, gateway_retry_max_ms=1000
    ) as gateway:
        reply = await gateway.GenerateOnce(request())
    assert models(fake_openai) == ["primary"] * 3 + ["secondary"] and reply.attempts == 4
    first, second, to_fallback = gaps(fake_openai)
    assert 0.05 - lag.total <= first <= 0.1 + TOL + lag.total and 0.1 - lag.total <= second <= 0.2 + TOL + lag.total
    assert to_fallback < 0.05 + TOL + lag.total  # the next model is tried at once


async def test_400_is_answered_at_once_without_retry_or_fallback(fake_openai: FakeOpenAI, lag: LoopLag, tmp_path: Path) -> None:
    fake_openai.responses.append(JsonReply(400, {"error": {"message": "messages: bad role"}}))
    async with running_gateway(gateway_config=chain_config(tmp_path, fake_openai.base_url)) as gateway:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await collect(gateway.Generate(request()))
        elapsed = time.monotonic() - started
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "bad role" in caught.value.details()
    assert models(fake_openai) == ["primary"] and elapsed < 0.3 + lag.total


async def test_connect_errors_are_retried_on_the_same_model_and_never_fall_back(fake_openai: FakeOpenAI, lag: LoopLag, tmp_path: Path) -> None:
    dead = f"http://{free_addr()}/v1"
    config = chain_config(tmp_path, dead, fallback_url=fake_openai.base_url)
    async with running_gateway(gateway_config=config, gateway_max_attempts=4) as gateway:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(request())
        elapsed = time.monotonic() - started
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "cannot reach" in caught.value.details() and "4 HTTP attempts" in caught.value.details()
    assert fake_openai.requests == [] and elapsed < 1.0 + lag.total


async def test_the_8_attempt_budget_is_shared_by_retries_and_fallbacks(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake_openai.responses += [JsonReply(503, {"error": {"message": "down"}}) for _ in range(12)]
    async with running_gateway(gateway_config=chain_config(tmp_path, fake_openai.base_url)) as gateway:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(request())
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "8 HTTP attempts" in caught.value.details()
    assert models(fake_openai) == ["primary"] * 3 + ["secondary"] * 5


async def test_the_time_budget_stops_retries_that_would_pass_it(fake_openai: FakeOpenAI, lag: LoopLag) -> None:
    fake_openai.responses += [JsonReply(500, {"error": {"message": "boom"}}) for _ in range(8)]
    settings = {"gateway_openai_base_url": fake_openai.base_url, "gateway_openai_model": "m"}
    async with running_gateway(**settings, gateway_retry_base_ms=200, gateway_retry_max_ms=200) as gateway:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(request(timeout_ms=500))
        elapsed = time.monotonic() - started
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert 2 <= len(fake_openai.requests) <= 5 and elapsed <= 0.5 + TOL + lag.total


async def test_non_streamed_stalls_end_at_call_timeout_and_share_timeout_ms(fake_openai: FakeOpenAI, lag: LoopLag) -> None:
    # Spec: callTimeoutMs 60 s with timeoutMs 120 s leaves room for one more try (scaled by 1/100).
    fake_openai.responses += [JsonReply(body=completion("late"), delay_s=STALL_S) for _ in range(4)]
    settings = {"gateway_openai_base_url": fake_openai.base_url, "gateway_openai_model": "m"}
    async with running_gateway(**settings) as gateway:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await gateway.GenerateOnce(request(call_timeout_ms=600, timeout_ms=1200, max_retries=3))
        elapsed = time.monotonic() - started
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert len(fake_openai.requests) == 2 and 0.58 - lag.total <= gaps(fake_openai)[0] <= 0.6 + TOL + lag.total
    assert 1.18 <= elapsed <= 1.2 + 0.3 + lag.total
