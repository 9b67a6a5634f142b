"""The floor under one hook event that waits for its answer: the same hops as a plugin hook's, with nothing of Covel's.

`python -m bench.event_hops`: a hook event the scheduler must wait for (a plain handler may abort or replace) crosses
scheduler -> hooks service (a message on the turn's gRPC stream) -> the plugin's sandbox worker (a frame on a unix
socket) -> a plain `def` handler run in a thread, and back. This bench times those hops alone, in three processes
like the services' (this one as the scheduler, a grpc.aio server as the hooks service, an asyncio unix-socket server
as the worker), one event at a time, a 2 KB payload each way:

- `stream`: a message each way on an open grpc.aio bidirectional stream (client and server processes);
- `stream + worker`: the server also sends each message to the worker process and waits for its echo;
- `stream + worker + thread`: the worker answers from a thread (`asyncio.to_thread`), as for a plain handler.

Then the same against bench.bub_compare's figure: 5 such events are what `6 plugin hooks against 1` adds at least
on this machine, with no check, trace, timeout or payload handling. Writes bench/results/event_hops.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from bench.common import summarize, table, write_result

METHOD = "/bench.Hops/Events"
PAYLOAD = b"x" * 2048
EVENTS_OVER_ONE_HOOK = 5  # bench.bub_compare: the 6-hook turn's five more events, each waited for


def _identity(data: bytes) -> bytes:
    return data


async def _worker(path: str, threaded: bool) -> None:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                size = struct.unpack(">I", await reader.readexactly(4))[0]
            except asyncio.IncompleteReadError:
                return
            body = await reader.readexactly(size)
            if threaded:
                body = await asyncio.to_thread(_identity, body)
            writer.write(struct.pack(">I", len(body)) + body)

    server = await asyncio.start_unix_server(serve, path)
    async with server:
        await server.serve_forever()


async def _hooks(port_file: str, worker_path: str) -> None:
    forward = None
    if worker_path:
        for _ in range(200):
            try:
                forward = await asyncio.open_unix_connection(worker_path)
                break
            except OSError:
                await asyncio.sleep(0.05)

    async def events(requests, context):
        async for request in requests:
            if forward is not None:
                reader, writer = forward
                writer.write(struct.pack(">I", len(request)) + request)
                size = struct.unpack(">I", await reader.readexactly(4))[0]
                request = await reader.readexactly(size)
            yield request

    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler("bench.Hops", {
        "Events": grpc.stream_stream_rpc_method_handler(events, request_deserializer=_identity, response_serializer=_identity)})
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    Path(port_file).write_text(str(port))
    await server.wait_for_termination()


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench.event_hops", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _round_trips(port: int, events: int) -> list[float]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream(METHOD, request_serializer=_identity, response_deserializer=_identity)()
        timings = []
        for index in range(events + 200):  # the first 200 warm up
            started = time.perf_counter()
            await call.write(PAYLOAD)
            await call.read()
            if index >= 200:
                timings.append((time.perf_counter() - started) * 1e6)
        await call.done_writing()
        return timings


async def measure(mode: str, events: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        port_file, worker_path = os.path.join(folder, "port"), os.path.join(folder, "worker.sock") if mode != "stream" else ""
        started = []
        if worker_path:
            started.append(_spawn("--serve-worker", worker_path, *(["--threaded"] if mode.endswith("thread") else [])))
        started.append(_spawn("--serve-hooks", port_file, "--worker", worker_path))
        try:
            for _ in range(400):
                if Path(port_file).exists() and Path(port_file).read_text():
                    break
                await asyncio.sleep(0.05)
            timings = await _round_trips(int(Path(port_file).read_text()), events)
        finally:
            for process in started:
                process.terminate()
                process.wait()
    return {"mode": mode, "event_us": summarize(timings)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--serve-worker", help=argparse.SUPPRESS)
    parser.add_argument("--threaded", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-hooks", help=argparse.SUPPRESS)
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_worker:
        asyncio.run(_worker(args.serve_worker, args.threaded))
        return {}
    if args.serve_hooks:
        asyncio.run(_hooks(args.serve_hooks, args.worker))
        return {}
    rows = [asyncio.run(measure(mode, args.events)) for mode in ("stream", "stream + worker", "stream + worker + thread")]
    full = rows[-1]["event_us"]["p50"]
    result = {"events": args.events, "payload_bytes": len(PAYLOAD), "rows": rows, "load": os.getloadavg()[0],
              "floor_ms_for_5_events": round(full * EVENTS_OVER_ONE_HOOK / 1000, 2)}
    print(f"one hook event waited for, its hops alone ({args.events} events, {len(PAYLOAD)} B each way, load {result['load']:.1f}):")
    print(table(["hops", "p50 µs", "p95 µs", "mean µs"],
                [[row["mode"], row["event_us"]["p50"], row["event_us"]["p95"], row["event_us"]["mean"]] for row in rows]))
    print(f"\n{EVENTS_OVER_ONE_HOOK} such events (bench.bub_compare's 6 hooks against 1): at least {result['floor_ms_for_5_events']} ms a turn")
    write_result("event_hops", result)
    return result


if __name__ == "__main__":
    main()
