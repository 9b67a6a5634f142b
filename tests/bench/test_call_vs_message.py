"""bench.call_vs_message: the weight bench.scale gives a stream message against a unary call."""

from __future__ import annotations

import asyncio

from bench.call_vs_message import measure


def test_a_message_on_an_open_stream_costs_less_than_a_unary_call() -> None:
    result = asyncio.run(measure(calls=200, rounds=2))
    assert result["unary_call_us"] > 0 and result["stream_message_us"] > 0
    assert len(result["unary_rounds_us"]) == len(result["message_rounds_us"]) == 2
    # A unary call sets up and ends an HTTP/2 stream each time; a message on an open one does neither.
    assert result["message_weight"] < 0.9
