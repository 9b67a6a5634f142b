"""Turn commits on SQLite and PostgreSQL: through the real gRPC store server, in process, and
with many sessions writing at once.

`.venv/bin/python -m bench.store_commit`, three parts, each turn carrying P proposals: one
narrative.append plus P-1 plugin.data / plugin.data.update writes spread over units of 10 (an
update keeps the last 8 turns in its value, so a value's size does not grow with the turns played).
`--parts in-process` (or grpc, contention; comma-separated) runs only those parts.
- gRPC: starts `python -m services.store` as a process on a free port per backend, plays turns
  in one session back to back (AcquireTurnLease + CommitTurn with release, the scheduler's two
  calls per turn). Commits/second (whole turns) and the CommitTurn latency p50/p95, P = 10, 100, 1000.
- In process: the store's Database in this process, CommitTurn's unit of work alone
  (`Database.write(commit_turn, ...)`, its transaction included, no gRPC), P = 10, 100, 1000, with
  the cost per proposal, and the CPU split into a fixed cost per commit and a marginal cost per
  proposal (from P = 100 and 1000: linear when P = 10 sits on the same line). Target: P = 10 on
  SQLite at most 3 ms.
- Contention: 32 sessions playing 10-proposal turns at once for a few seconds, in process:
  commits/s, latency, and the time writers spent waiting for the write lock (SQLite: in BEGIN
  IMMEDIATE, where its busy handler sleeps while another connection writes; PostgreSQL: the
  session row's SELECT ... FOR UPDATE), and the process's CPU per turn (acquire + commit), which a
  loaded machine's share of the CPU does not skew. SQLite both ways: writers from the pool (as the
  store ran before issue 19) and the store's one writer.
- Calls (`--parts calls`, not in the default run): the store process's CPU per call of AcquireTurnLease with a
  turn's reads, CommitTurn, ClaimDetachedJob, TakeTurnSignals (bench/store_call_costs.py); with `--base-root DIR`
  the same against a store started from another tree, the two alternating (`--rounds`, default 2).
Prints tables and writes bench/results/store_commit.json. PostgreSQL: COVEL_BENCH_POSTGRES_URL
(default the local test database), a schema of its own per run, dropped afterwards.
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
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
from sqlalchemy import Engine, create_engine, event, text

from bench.store_call_costs import call_costs
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.store import leases, sessions
from services.store.database import Database, create_store_engine
from services.store.settings import StoreSettings
from services.store.turn_commit import commit_turn
from shared.structs import to_struct
from tests.support.identities import bare_channel_as, issued

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
POSTGRES_URL = os.environ.get("COVEL_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
# (proposals per turn, turns measured)
SIZES = ((10, 300), (100, 100), (1000, 15))
IN_PROCESS_SIZES = ((10, 500), (100, 150), (1000, 40))
TARGET_10_MS = 3.0
CONTENDING_SESSIONS = 32
CONTENTION_S = 5.0
RECENT = 8
PARTS = ("grpc", "in-process", "contention")
# Asked for by name only: `calls` alternates trees and takes minutes.
EXTRA_PARTS = ("calls",)


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
        payload: dict[str, Any]
        if index % 2:
            # The last RECENT turns, not every turn: a value that grew turn after turn would make a
            # commit's cost depend on how many turns the session had played, not on its proposals.
            payload = {"namespace": "bench", "key": f"counter-{index}", "operations": [
                {"op": "inc", "path": "/n"}, {"op": "upsertItem", "path": "/recent", "key": "slot", "value": {"slot": turn % RECENT, "turn": turn}}]}
            kind = "plugin.data.update"
        else:
            payload = {"namespace": "bench", "key": f"value-{index}", "value": {"turn": turn, "text": "x" * 64}}
            kind = "plugin.data"
        items.append(store_pb2.Proposal(id=str(uuid.uuid4()), type=kind, plugin_id="bench", runtime_id=unit, unit_runtime_id=unit, payload=to_struct(payload)))
    return items


async def start_store(env: dict[str, str], root: Path = ROOT) -> tuple[subprocess.Popen[bytes], grpc.aio.Channel, store_pb2_grpc.TransactionalStoreStub]:
    addr = free_addr()
    process = subprocess.Popen(
        [sys.executable, "-m", "services.store"], cwd=root,
        env={**os.environ, **env, **issued("store").env(), "COVEL_STORE_ADDR": addr, "COVEL_LOG_LEVEL": "warning"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    # As the scheduler, over mTLS, the way a turn commits.
    channel = bare_channel_as(addr, "scheduler", options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)])
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


def turn_request(session_id: str, lease: store_pb2.TurnLease, number: int, count: int) -> store_pb2.CommitTurnRequest:
    turn = store_pb2.Turn(
        id=lease.turn_id, session_id=session_id, status=store_pb2.TURN_STATUS_COMMITTED, player_message=f"step {number}", origin="player",
        runtime_results=[store_pb2.RuntimeResult(runtime_id="narrator", plugin_id="story", status="success", story=True)],
    )
    return store_pb2.CommitTurnRequest(
        session_id=session_id, lease_id=lease.lease_id, turn=turn, proposals=proposals_for(number, count), release_lease=True
    )


async def play(stub: store_pb2_grpc.TransactionalStoreStub, session_id: str, count: int, turns: int, offset: int) -> tuple[float, list[float]]:
    latencies = []
    started = time.perf_counter()
    for number in range(offset, offset + turns):
        lease = (await stub.AcquireTurnLease(store_pb2.AcquireTurnLeaseRequest(session_id=session_id, holder="bench", wait_ms=5000))).lease
        request = turn_request(session_id, lease, number, count)
        commit_started = time.perf_counter()
        reply = await stub.CommitTurn(request)
        latencies.append(time.perf_counter() - commit_started)
        assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED, reply.turn.abort_reason
    return time.perf_counter() - started, latencies


def latency_figures(latencies: list[float]) -> dict[str, float]:
    return {
        "commit_p50_ms": round(percentile(latencies, 0.5) * 1000, 2),
        "commit_p95_ms": round(percentile(latencies, 0.95) * 1000, 2),
        "commit_mean_ms": round(statistics.fmean(latencies) * 1000, 2),
    }


def new_schema() -> str:
    return f"covel_bench_{uuid.uuid4().hex[:10]}"


def drop_schema(schema: str) -> None:
    engine = create_engine(POSTGRES_URL)
    with engine.begin() as connection:
        connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


@asynccontextmanager
async def store_process(backend: str, root: Path = ROOT,
                        ) -> AsyncIterator[tuple[subprocess.Popen[bytes], store_pb2_grpc.TransactionalStoreStub]]:
    """The store as its own process (started from `root`) and its stub, on a fresh SQLite file or PostgreSQL schema;
    stopped (and the schema dropped) after."""
    with tempfile.TemporaryDirectory() as data_dir:
        env = {"COVEL_DATA_DIR": data_dir}
        schema = new_schema() if backend == "postgres" else ""
        if schema:
            env |= {"COVEL_STORE_DATABASE_URL": POSTGRES_URL, "COVEL_STORE_DATABASE_SCHEMA": schema}
        process, channel, stub = await start_store(env, root)
        try:
            yield process, stub
        finally:
            await channel.close()
            process.terminate()
            process.wait(timeout=15)
            if schema:
                drop_schema(schema)


async def measure(backend: str, quick: bool) -> list[dict]:
    rows = []
    async with store_process(backend) as (_, stub):
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
                **latency_figures(latencies),
            })
            print(f"  {backend:8} {count:5} proposals: {rows[-1]['commits_per_s']:7.1f} commits/s", flush=True)
    return rows


class LockWaitMeter:
    """Time write transactions spent taking the write lock: SQLite's BEGIN IMMEDIATE (its busy
    handler sleeps there while another connection writes), PostgreSQL's SELECT ... FOR UPDATE
    of the session row. Uncontended, either takes microseconds (plus the thread's wait for the GIL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.locks = 0
        self.seconds = 0.0
        self.longest_s = 0.0
        self._guard = threading.Lock()
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)

    def _before(self, connection: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if statement.startswith("BEGIN IMMEDIATE") or "FOR UPDATE" in statement:
            connection.info["covel_lock_started"] = time.perf_counter()

    def _after(self, connection: Any, *_rest: Any) -> None:
        started = connection.info.pop("covel_lock_started", None)
        if started is not None:
            waited = time.perf_counter() - started
            with self._guard:
                self.locks += 1
                self.seconds += waited
                self.longest_s = max(self.longest_s, waited)

    def close(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._before)
        event.remove(self.engine, "after_cursor_execute", self._after)


@asynccontextmanager
async def in_process_store(backend: str, single_writer: bool | None = None) -> AsyncIterator[Database]:
    """The store's Database in this process, migrated, on a fresh SQLite file or PostgreSQL schema."""
    with tempfile.TemporaryDirectory() as data_dir:
        schema = new_schema() if backend == "postgres" else ""
        settings = StoreSettings(data_dir=Path(data_dir), store_database_url=POSTGRES_URL if schema else "", store_database_schema=schema)
        engine = create_store_engine(settings.database_url(), schema=schema, pool_size=settings.store_pool_size,
                                     lock_timeout_ms=settings.store_lock_timeout_ms)
        database = Database(engine, settings.store_pool_size, schema, single_writer=single_writer)
        try:
            await database.migrate()
            yield database
        finally:
            await database.close()
            if schema:
                drop_schema(schema)


def store_threads_cpu() -> dict[int, float]:
    """CPU seconds each of the store's database threads (store-db, store-writer) has used so far."""
    used = {}
    for thread in threading.enumerate():
        if thread.name.startswith("store-") and thread.ident is not None:
            used[thread.ident] = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    return used


async def play_in_process(
    database: Database, session_id: str, count: int, turns: int, offset: int, cpu: list[float] | None = None
) -> list[float]:
    """Commit latencies (wall, as awaited); `cpu` gets the CPU the store's threads spent on each
    commit (the whole unit of work: session, BEGIN, statements, COMMIT), which load does not inflate."""
    latencies = []
    for number in range(offset, offset + turns):
        acquired = await database.write(leases.try_acquire, session_id, "bench", 30_000, "")
        assert not isinstance(acquired, leases.Busy), acquired.message
        lease = acquired.lease
        request = turn_request(session_id, lease, number, count)
        before = store_threads_cpu() if cpu is not None else {}
        started = time.perf_counter()
        reply = await database.write(commit_turn, request)
        latencies.append(time.perf_counter() - started)
        if cpu is not None:
            cpu.append(sum(used - before.get(ident, 0.0) for ident, used in store_threads_cpu().items()))
        assert reply.turn.status == store_pb2.TURN_STATUS_COMMITTED, reply.turn.abort_reason
    return latencies


async def new_bench_session(database: Database) -> str:
    return (await database.write(sessions.create_session, store_pb2.Session(phase="playing", locale="en"))).id


async def measure_in_process(backend: str, quick: bool) -> list[dict]:
    rows = []
    async with in_process_store(backend) as database:
        for count, turns in IN_PROCESS_SIZES:
            turns = max(3, turns // 5) if quick else turns
            session_id = await new_bench_session(database)
            await play_in_process(database, session_id, count, max(2, turns // 10), 0)  # warm-up
            cpu: list[float] = []
            latencies = await play_in_process(database, session_id, count, turns, 10_000, cpu)
            figures = latency_figures(latencies)
            cpu_p50_ms = percentile(cpu, 0.5) * 1000
            rows.append({"backend": backend, "proposals": count, "turns": turns, **figures, "cpu_p50_ms": round(cpu_p50_ms, 2),
                         "cpu_us_per_proposal": round(cpu_p50_ms * 1000 / count, 1)})
            print(f"  {backend:8} in process {count:5} proposals: {figures['commit_p50_ms']:8.2f} ms p50, CPU {cpu_p50_ms:.2f} ms", flush=True)
    return rows


async def measure_contention(backend: str, single_writer: bool | None, seconds: float) -> dict:
    async with in_process_store(backend, single_writer) as database:
        session_ids = [await new_bench_session(database) for _ in range(CONTENDING_SESSIONS)]
        for session_id in session_ids:
            await play_in_process(database, session_id, 10, 1, 0)  # warm-up
        meter = LockWaitMeter(database.engine)
        give_up = time.monotonic() + seconds
        latencies: list[float] = []

        async def keep_playing(session_id: str) -> None:
            number = 1
            while time.monotonic() < give_up:
                latencies.extend(await play_in_process(database, session_id, 10, 1, number))
                number += 1

        started, cpu_started = time.perf_counter(), time.process_time()
        await asyncio.gather(*(keep_playing(session_id) for session_id in session_ids))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        meter.close()
    writers = "pool" if single_writer is False else ("one" if database.dialect == "sqlite" else "pool")
    return {
        "backend": backend, "writers": writers, "sessions": CONTENDING_SESSIONS, "seconds": round(elapsed, 1), "turns": len(latencies),
        "commits_per_s": round(len(latencies) / elapsed, 1), **latency_figures(latencies),
        # CPU of this process (every thread) per turn: what a loaded machine's share of the CPU does not skew.
        "cpu_ms_per_turn": round(cpu * 1000 / max(1, len(latencies)), 2),
        "lock_wait_s": round(meter.seconds, 2), "longest_lock_wait_ms": round(meter.longest_s * 1000, 1), "locks": meter.locks,
    }


def verdict(ms: float) -> str:
    return "met" if ms <= TARGET_10_MS else "NOT met"


def cost_line(in_process: list[dict], backend: str) -> dict[str, float] | None:
    """The commit's CPU as fixed ms per commit + µs per proposal, from the 100 and 1000 proposal runs."""
    cpu = {row["proposals"]: row["cpu_p50_ms"] for row in in_process if row["backend"] == backend}
    if 100 not in cpu or 1000 not in cpu:
        return None
    per_proposal_ms = (cpu[1000] - cpu[100]) / 900
    return {"fixed_ms": round(cpu[100] - 100 * per_proposal_ms, 2), "marginal_us_per_proposal": round(per_proposal_ms * 1000, 1)}


def print_tables(rows: list[dict], in_process: list[dict], contention: list[dict]) -> None:
    if rows:
        print_grpc(rows)
    if in_process:
        print_in_process(in_process)
    if contention:
        print_contention(contention)


def print_grpc(rows: list[dict]) -> None:
    header = f"{'backend':8} {'proposals':>9} {'turns':>6} {'commits/s':>10} {'proposals/s':>12} {'p50 ms':>8} {'p95 ms':>8}"
    print("\nThrough gRPC (AcquireTurnLease + CommitTurn, one session)")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['backend']:8} {row['proposals']:9} {row['turns']:6} {row['commits_per_s']:10.1f} {row['proposals_per_s']:12} "
              f"{row['commit_p50_ms']:8.2f} {row['commit_p95_ms']:8.2f}")


def print_in_process(in_process: list[dict]) -> None:
    header = f"{'backend':8} {'proposals':>9} {'turns':>6} {'p50 ms':>8} {'p95 ms':>8} {'CPU p50 ms':>10} {'CPU µs/proposal':>15}"
    print(f"\nIn process (Database.write(commit_turn), its transaction included; CPU: the store's threads); "
          f"target: 10 proposals on SQLite <= {TARGET_10_MS} ms")
    print(header)
    print("-" * len(header))
    for row in in_process:
        print(f"{row['backend']:8} {row['proposals']:9} {row['turns']:6} {row['commit_p50_ms']:8.2f} {row['commit_p95_ms']:8.2f} "
              f"{row['cpu_p50_ms']:10.2f} {row['cpu_us_per_proposal']:15.1f}")
    ten = next((row for row in in_process if row["backend"] == "sqlite" and row["proposals"] == 10), None)
    if ten is not None:
        print(f"10 proposals on SQLite: {ten['commit_p50_ms']:.2f} ms p50 wall (target {verdict(ten['commit_p50_ms'])} at this load), "
              f"{ten['cpu_p50_ms']:.2f} ms CPU (target {verdict(ten['cpu_p50_ms'])})")
    for backend in dict.fromkeys(row["backend"] for row in in_process):
        line = cost_line(in_process, backend)
        if line is not None:
            print(f"{backend} CPU per commit: {line['fixed_ms']:.2f} ms fixed + {line['marginal_us_per_proposal']:.1f} µs per proposal")


def print_contention(contention: list[dict]) -> None:
    header = (f"{'backend':8} {'writers':>7} {'sessions':>8} {'turns':>6} {'commits/s':>10} {'p50 ms':>8} {'p95 ms':>8} "
              f"{'CPU ms/turn':>11} {'lock wait s':>11} {'longest ms':>10}")
    print(f"\nContention ({CONTENDING_SESSIONS} sessions at once, 10 proposals a turn, in process; lock wait: total over all writers)")
    print(header)
    print("-" * len(header))
    for row in contention:
        print(f"{row['backend']:8} {row['writers']:>7} {row['sessions']:8} {row['turns']:6} {row['commits_per_s']:10.1f} "
              f"{row['commit_p50_ms']:8.2f} {row['commit_p95_ms']:8.2f} {row['cpu_ms_per_turn']:11.2f} {row['lock_wait_s']:11.2f} "
              f"{row['longest_lock_wait_ms']:10.1f}")


async def measure_calls(backend: str, root: Path) -> dict[str, float]:
    async with store_process(backend, root) as (process, stub):
        return await call_costs(stub, process)


def run_call_costs(backends: list[str], base_root: Path | None, rounds: int) -> None:
    """Store CPU ms per call, this tree and the base alternating; one line per run, then each tree's mean."""
    trees = {"base": base_root.resolve(), "this": ROOT} if base_root else {"this": ROOT}
    runs: list[dict] = []
    for backend in backends:
        for round_number in range(rounds):
            for tree, root in trees.items():
                load = os.getloadavg()[0]
                costs = asyncio.run(measure_calls(backend, root))
                runs.append({"backend": backend, "tree": tree, "round": round_number, "load": round(load, 2), **costs})
                print(f"  {backend:8} {tree:5} round {round_number} (load {load:.1f}): "
                      + ", ".join(f"{name} {ms:.2f}" for name, ms in costs.items()), flush=True)
    print_call_costs(runs)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "store_calls.json").write_text(json.dumps({"benchmark": "store_commit calls", "cpus": os.cpu_count(), "runs": runs}, indent=2) + "\n")


def print_call_costs(runs: list[dict]) -> None:
    names = [key for key in runs[0] if key not in ("backend", "tree", "round", "load")]
    header = f"{'backend':8} {'tree':5} {'load':>5} " + " ".join(f"{name:>11}" for name in names)
    print("\nStore CPU ms per call (the process's user + system CPU over the calls / calls)")
    print(header)
    print("-" * len(header))
    for run in runs:
        print(f"{run['backend']:8} {run['tree']:5} {run['load']:5.1f} " + " ".join(f"{run[name]:11.2f}" for name in names))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--quick", action="store_true", help="a fifth of the turns (a smoke run)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS + EXTRA_PARTS)} (default: "
                        f"{', '.join(PARTS)})")
    parser.add_argument("--base-root", type=Path, help="calls: also start the store from this tree, alternating with this one")
    parser.add_argument("--rounds", type=int, default=2, help="calls: rounds of each tree")
    args = parser.parse_args()
    parts = args.parts.split(",")
    if not set(parts) <= set(PARTS + EXTRA_PARTS):
        parser.error(f"--parts: use {', '.join(PARTS + EXTRA_PARTS)}")
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if "calls" in parts:
        run_call_costs(backends, args.base_root, args.rounds)
        if parts == ["calls"]:
            return
    load = os.getloadavg()
    rows, in_process, contention = [], [], []
    seconds = CONTENTION_S / 5 if args.quick else CONTENTION_S
    for backend in backends:
        if "grpc" in parts:
            rows += asyncio.run(measure(backend, args.quick))
        if "in-process" in parts:
            in_process += asyncio.run(measure_in_process(backend, args.quick))
        for single_writer in (([False, None] if backend == "sqlite" else [None]) if "contention" in parts else []):
            contention.append(asyncio.run(measure_contention(backend, single_writer, seconds)))
    print_tables(rows, in_process, contention)
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: {' '.join(f'{value:.2f}' for value in os.getloadavg())}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "store_commit.json"
    out.write_text(json.dumps({
        "benchmark": "store_commit",
        "what": "AcquireTurnLease + CommitTurn (release) per turn, one session, sequential, real gRPC store process",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average": [round(value, 2) for value in load],
        "results": rows,
        "in_process": in_process,
        "in_process_target_10_ms": TARGET_10_MS,
        "in_process_cost": {backend: cost_line(in_process, backend) for backend in backends if "in-process" in parts},
        "contention": contention,
    }, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
