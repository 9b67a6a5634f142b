"""Turn commits per second through the real gRPC store server, on SQLite and PostgreSQL.

`.venv/bin/python -m bench.store_commit`: starts `python -m services.store` as a process on a
free port per backend, plays turns in one session back to back (AcquireTurnLease + CommitTurn
with release, the scheduler's two calls per turn), each turn carrying P proposals: one
narrative.append plus P-1 plugin.data / plugin.data.update writes spread over units of 10.
Reports commits/second (whole turns: acquire + commit) and the CommitTurn latency p50/p95
for P = 10, 100, 1000. Prints a table and writes bench/results/store_commit.json.
PostgreSQL: COVEL_BENCH_POSTGRES_URL (default the local test database), a schema of its own,
dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import grpc
from sqlalchemy import create_engine, text

from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.structs import to_struct

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
POSTGRES_URL = os.environ.get("COVEL_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
# (proposals per turn, turns measured)
SIZES = ((10, 300), (100, 100), (1000, 15))


def free_addr() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def proposals_for(turn: int, count: int) -> list[store_pb2.Proposal]:
    items = [
        store_pb2.Proposal(
            id=str(uuid.uuid4()), type="narrative.append", plugin_id="story", runtime_id="narrator", unit_runtime_id="narrator",
            payload=to_struct({"text": f"Story of turn {turn}."}),
        )
    ]
    for index in range(count - 1):
        unit = f"unit-{index // 10}"
        if index % 2:
            payload = {"namespace": "bench", "key": f"counter-{index}", "operations": [
                {"op": "inc", "path": "/n"}, {"op": "append", "path": "/log", "value": turn}]}
            kind = "plugin.data.update"
        else:
            payload = {"namespace": "bench", "key": f"value-{index}", "value": {"turn": turn, "text": "x" * 64}}
            kind = "plugin.data"
        items.append(store_pb2.Proposal(id=str(uuid.uuid4()), type=kind, plugin_id="bench", runtime_id=unit, unit_runtime_id=unit, payload=to_struct(payload)))
    return items


async def start_store(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], grpc.aio.Channel, store_pb2_grpc.TransactionalStoreStub]:
    addr = free_addr()
    process = subprocess.Popen(
        [sys.executable, "-m", "services.store"], cwd=ROOT,
        env={**os.environ, **env, "COVEL_STORE_ADDR": addr, "COVEL_LOG_LEVEL": "warning"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    channel = grpc.aio.insecure_channel(addr, options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)])
    stub = store_pb2_grpc.TransactionalStoreStub(channel)
    deadline = time.monotonic() + 30
    while True:
        try:
            await stub.GetSession(store_pb2.GetSessionRequest(session_id="probe"), timeout=1)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                return process, channel, stub
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the store did not start") from error
            await asyncio.sleep(0.1)


async def play(stub, session_id: str, count: int, turns: int, offset: int) -> tuple[float, list[float]]:
    latencies = []
    started = time.perf_counter()
    for number in range(offset, offset + turns):
        lease = (await stub.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(session_id=session_id, holder="bench", wait_ms=5000))).lease
        turn = store_pb2.Turn(
            id=lease.turn_id, session_id=session_id, status=store_pb2.TURN_STATUS_COMMITTED, player_message=f"step {number}", origin="player",
            runtime_results=[store_pb2.RuntimeResult(runtime_id="narrator", plugin_id="story", status="success", story=True)],
        )
        request = store_pb2.CommitTurnRequest(
            session_id=session_id, lease_id=lease.lease_id, turn=turn, proposals=proposals_for(number, count), release_lease=True
        )
        commit_started = time.perf_counter()
        reply = await stub.CommitTurn(request)
        latencies.append(time.perf_counter() - commit_started)
        assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED, reply.turn.abort_reason
    return time.perf_counter() - started, latencies


async def measure(backend: str, quick: bool) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as data_dir:
        env = {"COVEL_DATA_DIR": data_dir}
        schema = ""
        if backend == "postgres":
            schema = f"covel_bench_{uuid.uuid4().hex[:10]}"
            env |= {"COVEL_STORE_DATABASE_URL": POSTGRES_URL, "COVEL_STORE_DATABASE_SCHEMA": schema}
        process, channel, stub = await start_store(env)
        try:
            for count, turns in SIZES:
                turns = max(3, turns // 5) if quick else turns
                session_id = (await stub.CreateSession(store_pb2.CreateSessionRequest())).session.id
                await play(stub, session_id, count, max(2, turns // 10), 0)  # warm-up (connections, caches)
                elapsed, latencies = await play(stub, session_id, count, turns, 10_000)
                rows.append({
                    "backend": backend,
                    "proposals": count,
                    "turns": turns,
                    "commits_per_s": round(turns / elapsed, 1),
                    "proposals_per_s": round(turns * count / elapsed),
                    "commit_p50_ms": round(percentile(latencies, 0.5) * 1000, 2),
                    "commit_p95_ms": round(percentile(latencies, 0.95) * 1000, 2),
                    "commit_mean_ms": round(statistics.fmean(latencies) * 1000, 2),
                })
                print(f"  {backend:8} {count:5} proposals: {rows[-1]['commits_per_s']:7.1f} commits/s", flush=True)
        finally:
            await channel.close()
            process.terminate()
            process.wait(timeout=15)
            if schema:
                engine = create_engine(POSTGRES_URL)
                with engine.begin() as connection:
                    connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
                engine.dispose()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--quick", action="store_true", help="a fifth of the turns (a smoke run)")
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    rows = []
    for backend in backends:
        rows += asyncio.run(measure(backend, args.quick))
    header = f"{'backend':8} {'proposals':>9} {'turns':>6} {'commits/s':>10} {'proposals/s':>12} {'p50 ms':>8} {'p95 ms':>8}"
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['backend']:8} {row['proposals']:9} {row['turns']:6} {row['commits_per_s']:10.1f} {row['proposals_per_s']:12} "
              f"{row['commit_p50_ms']:8.2f} {row['commit_p95_ms']:8.2f}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "store_commit.json"
    out.write_text(json.dumps({
        "benchmark": "store_commit",
        "what": "AcquireTurnLease + CommitTurn (release) per turn, one session, sequential, real gRPC store process",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "results": rows,
    }, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
