"""LLM gateway overhead: a call over gRPC through the gateway versus the same HTTP request direct.

`python -m bench.gateway_overhead`: starts a local OpenAI-compatible HTTP server and the
gateway (`python -m services.gateway`) as separate processes, then measures from this one:

- per call, non-streamed: httpx POST /chat/completions direct vs LlmGateway.GenerateOnce;
- per call, streamed (20 deltas): httpx + SSE direct vs LlmGateway.Generate;
- streaming throughput: the server streams N one-token deltas as fast as it can; deltas per
  second read direct vs through the gateway.

p50/p95 in milliseconds; writes bench/results/gateway_overhead.json.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import platform
import socket
import statistics
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

RESULTS = Path(__file__).parent / "results"
REPO = Path(__file__).resolve().parent.parent
CALLS = int(os.environ.get("BENCH_CALLS", "300"))
WARMUP = 30
SHORT_STREAM = 20
LONG_STREAM = int(os.environ.get("BENCH_STREAM_TOKENS", "5000"))
STREAM_RUNS = 7
REPLY = "The lantern flickers as you step into the hall."


# --- the local OpenAI-compatible server (its own process) ----------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body are written separately: without this, delayed ACKs add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if not body.get("stream"):
            data = json.dumps(
                {
                    "id": "bench",
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": REPLY}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 10, "total_tokens": 22},
                }
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        tokens = int(body["messages"][-1]["content"].split(":")[1])
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for index in range(tokens):
            chunk = {"id": "bench", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": f"t{index % 10} "}, "finish_reason": None}]}
            self._chunk(f"data: {json.dumps(chunk)}\n\n")
        last = {"id": "bench", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self._chunk(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _serve(port_out: Any) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    port_out.put(server.server_address[1])
    server.serve_forever()


# --- measuring -------------------------------------------------------------------------------


def _summary(samples_s: list[float]) -> dict[str, float]:
    ordered = sorted(samples_s)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
        "n": len(ordered),
    }


async def _timed(make_call: Any, count: int) -> list[float]:
    for _ in range(WARMUP):
        await make_call()
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        await make_call()
        samples.append(time.perf_counter() - started)
    return samples


def _body(stream: bool, tokens: int = 0) -> dict[str, Any]:
    content = f"tokens:{tokens}" if stream else "I open the door."
    return {"model": "bench-model", "messages": [{"role": "user", "content": content}], "stream": stream}


async def _run(base_url: str, gateway_addr: str) -> dict[str, Any]:
    from covel.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    url = base_url + "/chat/completions"
    http = httpx.AsyncClient(timeout=30)
    from tests.support.identities import bare_channel_as

    # As the scheduler, over mTLS, the way a turn calls it.
    channel = bare_channel_as(gateway_addr, "scheduler")
    gateway = gateway_pb2_grpc.LlmGatewayStub(channel)

    def request(content: str) -> Any:
        return gateway_pb2.GenerateRequest(slot="story", messages=[gateway_pb2.ChatMessage(role="user", content=content)])

    async def direct_once() -> None:
        response = await http.post(url, json=_body(False))
        assert response.json()["choices"][0]["message"]["content"] == REPLY

    async def gateway_once() -> None:
        reply = await gateway.GenerateOnce(request("I open the door."), timeout=30)
        assert reply.message.content == REPLY

    async def direct_stream(tokens: int) -> int:
        count = 0
        async with aconnect_sse(http, "POST", url, json=_body(True, tokens)) as source:
            async for sse in source.aiter_sse():
                if sse.data == "[DONE]":
                    break
                if json.loads(sse.data)["choices"][0]["delta"].get("content"):
                    count += 1
        return count

    async def gateway_stream(tokens: int) -> int:
        """The provider's deltas that arrived: the gateway sends what is ready at once as one message
        (stream coalescing), so they are counted by their text (`tN ` each), not by message."""
        count = 0
        async for event in gateway.Generate(request(f"tokens:{tokens}"), timeout=60):
            if event.WhichOneof("event") == "content_delta":
                count += len(event.content_delta.split())
        return count

    results: dict[str, Any] = {}
    direct = await _timed(direct_once, CALLS)
    through = await _timed(gateway_once, CALLS)
    results["non_streamed"] = {"direct_httpx": _summary(direct), "via_gateway": _summary(through)}
    direct = await _timed(lambda: direct_stream(SHORT_STREAM), CALLS)
    through = await _timed(lambda: gateway_stream(SHORT_STREAM), CALLS)
    results["streamed_20_deltas"] = {"direct_httpx": _summary(direct), "via_gateway": _summary(through)}
    for name in ("non_streamed", "streamed_20_deltas"):
        row = results[name]
        row["overhead_p50_ms"] = round(row["via_gateway"]["p50_ms"] - row["direct_httpx"]["p50_ms"], 3)
        row["overhead_p95_ms"] = round(row["via_gateway"]["p95_ms"] - row["direct_httpx"]["p95_ms"], 3)

    throughput: dict[str, Any] = {}
    for label, reader in (("direct_httpx", direct_stream), ("via_gateway", gateway_stream)):
        await reader(200)
        rates = []
        for _ in range(STREAM_RUNS):
            started = time.perf_counter()
            got = await reader(LONG_STREAM)
            rates.append(got / (time.perf_counter() - started))
            assert got == LONG_STREAM, got
        ordered = sorted(rates)
        throughput[label] = {
            "p50_deltas_per_s": round(statistics.median(ordered)),
            # p95 of the time per run is the 5th percentile of the rate.
            "p5_deltas_per_s": round(ordered[0] if len(ordered) < 20 else ordered[int(len(ordered) * 0.05)]),
            "runs": len(ordered),
        }
    throughput["tokens_per_stream"] = LONG_STREAM
    results["stream_throughput"] = throughput
    await channel.close()
    await http.aclose()
    return results


async def _start_gateway(base_url: str) -> tuple[asyncio.subprocess.Process, str]:
    from tests.support.identities import issued

    env = {
        **os.environ,
        **issued("gateway").env(),
        "COVEL_GATEWAY_ADDR": "127.0.0.1:0",
        "COVEL_GATEWAY_OPENAI_BASE_URL": base_url,
        "COVEL_GATEWAY_OPENAI_MODEL": "bench-model",
        "COVEL_LOG_FORMAT": "json",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "services.gateway", cwd=REPO, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    line = (await asyncio.wait_for(process.stderr.readline(), 30)).decode()  # type: ignore[union-attr]
    if not line.startswith("COVEL_READY gateway "):
        raise RuntimeError(f"the gateway did not start: {line!r}")
    return process, f"127.0.0.1:{int(line.split()[2])}"


def _table(results: dict[str, Any]) -> str:
    lines = [
        f"{'call':<22}{'direct p50':>12}{'direct p95':>12}{'gateway p50':>13}{'gateway p95':>13}{'overhead p50':>14}{'overhead p95':>14}",
    ]
    for name in ("non_streamed", "streamed_20_deltas"):
        row = results[name]
        d, g = row["direct_httpx"], row["via_gateway"]
        lines.append(
            f"{name:<22}{d['p50_ms']:>10.3f}ms{d['p95_ms']:>10.3f}ms{g['p50_ms']:>11.3f}ms{g['p95_ms']:>11.3f}ms"
            f"{row['overhead_p50_ms']:>12.3f}ms{row['overhead_p95_ms']:>12.3f}ms"
        )
    t = results["stream_throughput"]
    lines.append("")
    lines.append(f"streaming {t['tokens_per_stream']} one-token deltas, {t['direct_httpx']['runs']} runs (deltas/s):")
    for label in ("direct_httpx", "via_gateway"):
        lines.append(f"  {label:<14} p50 {t[label]['p50_deltas_per_s']:>8}   slowest {t[label]['p5_deltas_per_s']:>8}")
    return "\n".join(lines)


async def _main() -> None:
    ports: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(ports,), daemon=True)
    server.start()
    base_url = f"http://127.0.0.1:{ports.get(timeout=10)}/v1"
    gateway, addr = await _start_gateway(base_url)
    try:
        results = await _run(base_url, addr)
    finally:
        gateway.terminate()
        await gateway.wait()
        server.terminate()
        server.join()
    results["setup"] = {
        "calls_per_case": CALLS,
        "warmup": WARMUP,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "note": "HTTP server, gateway and client are three processes on one machine; the gateway logs one info line per call",
    }
    print(_table(results))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gateway_overhead.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {RESULTS / 'gateway_overhead.json'}")


if __name__ == "__main__":
    asyncio.run(_main())
