"""What a call costs as a unary RPC and as a message on an open stream (grpc.aio, both ends), for bench.scale's model.

`python -m bench.call_vs_message --calls 2000`: one process holds a server and its client on loopback TCP, the
way the services talk (shared/call_streams.py carries a turn's hook and model calls as messages on one stream per
turn). It makes `--calls` unary calls one after another, then as many request/answer messages on one bidirectional
stream, each answered before the next goes, and takes the CPU (`time.process_time`) of both ends per call. The
ratio, message over call, is the weight bench.scale_sim gives a stream message against a call. Rounds alternate
(`--rounds`), the best of each kind kept. Writes bench/results/call_vs_message.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import AsyncIterator

import grpc

from bench.common import table, write_result

SERVICE = "bench.Echo"
PAYLOAD = b"x" * 200


def _handlers() -> grpc.GenericRpcHandler:
    async def unary(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return request

    async def stream(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request

    return grpc.method_handlers_generic_handler(SERVICE, {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.stream_stream_rpc_method_handler(stream),
    })


async def _unary_cpu(channel: grpc.aio.Channel, calls: int) -> float:
    call = channel.unary_unary(f"/{SERVICE}/Unary")
    started = time.process_time()
    for _ in range(calls):
        await call(PAYLOAD)
    return (time.process_time() - started) / calls


async def _stream_cpu(channel: grpc.aio.Channel, calls: int) -> float:
    stream = channel.stream_stream(f"/{SERVICE}/Stream")()
    await stream.write(PAYLOAD)
    await stream.read()  # the stream is open before the clock starts: a turn opens it once
    started = time.process_time()
    for _ in range(calls):
        await stream.write(PAYLOAD)
        await stream.read()
    spent = (time.process_time() - started) / calls
    await stream.done_writing()
    return spent


async def measure(calls: int, rounds: int) -> dict:
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((_handlers(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    unary, message = [], []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await _unary_cpu(channel, 50)  # warm: the connection up
            for _ in range(rounds):
                unary.append(await _unary_cpu(channel, calls))
                message.append(await _stream_cpu(channel, calls))
    finally:
        await server.stop(None)
    call_us, message_us = min(unary) * 1e6, min(message) * 1e6
    return {"calls": calls, "rounds": rounds, "load_average": os.getloadavg()[0], "unary_call_us": call_us,
            "stream_message_us": message_us, "message_weight": message_us / call_us,
            "unary_rounds_us": [u * 1e6 for u in unary], "message_rounds_us": [m * 1e6 for m in message]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    result = asyncio.run(measure(args.calls, args.rounds))
    print(f"CPU of both ends per call, best of {args.rounds} rounds of {args.calls}, load {result['load_average']:.1f}:")
    print(table(["a call as", "µs CPU"], [["a unary RPC", result["unary_call_us"]], ["a message each way on an open stream",
                                                                                result["stream_message_us"]],
                                         ["message / call", result["message_weight"]]]))
    write_result("call_vs_message", result)
    return result


if __name__ == "__main__":
    main()
