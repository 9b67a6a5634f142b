"""Scheduler overhead of a turn of function runtimes (no model), and how it grows.

`python -m bench.scheduler_overhead`: generates a plugin with N trivial function runtimes in
three stages (pre-turn, post-turn, audit; each depending on one of the stage before), starts the
five services with only that plugin in the session (every core plugin excluded), and times turns end to
end for N = 10, 50, 200. Prints per-runtime ms for each N and, from the same run, how it grows: the
per-runtime ratio 200 vs 10 (at most 1 when the overhead is linear: a turn's fixed cost is shared by
more runtimes) and the marginal cost of one more runtime between 10 and 50 and between 50 and 200
(equal when linear; the second larger when super-linear). Writes bench/results/scheduler_overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel
from shared.settings import REPO_ROOT
from tests.support.builtin_plugins import core_plugin_ids

RESULTS = Path(__file__).parent / "results"
STAGES = ("pre-turn", "post-turn", "audit")
COUNTS = (10, 50, 200)


def write_plugin(root: Path, count: int) -> None:
    package = root / "bench-functions"
    (package / "runtimes").mkdir(parents=True)
    (package / "PLUGIN.md").write_text("---\nversion: 0.1.0\ndescription: benchmark runtimes\n---\n")
    for index in range(count):
        stage = STAGES[index * len(STAGES) // count]
        previous_stage = [i for i in range(count) if STAGES[i * len(STAGES) // count] != stage and i < index]
        after = f"\n  after: [bench-functions/r{previous_stage[-1]}]" if previous_stage else ""
        folder = package / "runtimes" / f"r{index}"
        folder.mkdir()
        (folder / "RUNTIME.md").write_text(f"---\nschedule:\n  stage: {stage}{after}\nfunction: {{}}\n---\nBenchmark runtime.\n")
        (folder / "handler.py").write_text("def handler(ctx):\n    return {'n': ctx.logical_turn}\n")


async def measure(count: int, turns: int) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        write_plugin(root / "plugins", count)
        group = ServiceGroup(free_port_addrs(), root / "data", extra_env={
            "COVEL_PLUGIN_DIRS": os.pathsep.join([str(REPO_ROOT / "plugins"), str(root / "plugins")]),
            "COVEL_LOG_LEVEL": "warning",
        })
        await group.start()
        try:
            async with open_channel(group.addrs["scheduler"]) as channel:
                stub = scheduler_pb2_grpc.SchedulerStub(channel)
                session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest(
                    requested_plugins=["bench-functions"], approved_plugins=["bench-functions"], excluded_plugins=list(core_plugin_ids())))).session
                timings = []
                for index in range(turns + 2):
                    request = scheduler_pb2.SubmitActionsRequest(
                        session_id=session.id, actions=[resources_pb2.PlayerAction(text=f"step {index}")])
                    started = time.perf_counter()
                    events = [event async for event in stub.SubmitActions(request)]
                    elapsed = (time.perf_counter() - started) * 1000
                    turn = events[-1].turn_completed
                    assert turn.status == resources_pb2.TURN_STATUS_COMMITTED and len(turn.runtime_results) == count
                    if index >= 2:
                        timings.append(elapsed)
        finally:
            await group.stop()
    timings.sort()
    return {"runtimes": count, "p50_ms": statistics.median(timings), "p95_ms": timings[int(0.95 * (len(timings) - 1))],
            "per_runtime_ms": statistics.median(timings) / count}


def growth(rows: list[dict]) -> dict:
    """How the overhead grows with N, from rows of one run (in COUNTS order)."""
    first, middle, last = rows
    marginal = [(later["p50_ms"] - earlier["p50_ms"]) / (later["runtimes"] - earlier["runtimes"])
                for earlier, later in ((first, middle), (middle, last))]
    return {
        "per_runtime_ratio": last["per_runtime_ms"] / first["per_runtime_ms"],
        "marginal_ms": {f"{first['runtimes']}-{middle['runtimes']}": marginal[0], f"{middle['runtimes']}-{last['runtimes']}": marginal[1]},
        # Linear: 1; super-linear: above 1 (each runtime costs more the more there are).
        "marginal_ratio": marginal[1] / marginal[0] if marginal[0] > 0 else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=15)
    args = parser.parse_args()
    rows = [asyncio.run(measure(count, args.turns)) for count in COUNTS]
    grown = growth(rows)
    load = os.getloadavg()[0]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scheduler_overhead.json").write_text(json.dumps({"rows": rows, **grown, "load_1min": load}, indent=2))
    print(f"turn of N function runtimes in 3 stages, no model, five services (ms; load {load:.1f} on {os.cpu_count()} cores)")
    print(f"  {'N':>5}{'p50':>10}{'p95':>10}{'per runtime':>14}")
    for row in rows:
        print(f"  {row['runtimes']:>5}{row['p50_ms']:>10.1f}{row['p95_ms']:>10.1f}{row['per_runtime_ms']:>14.2f}")
    print(f"per runtime, {COUNTS[-1]} vs {COUNTS[0]}: {grown['per_runtime_ratio']:.2f}x (linear: at most 1)")
    slopes = ", ".join(f"{span}: {ms:.2f} ms" for span, ms in grown["marginal_ms"].items())
    ratio = grown["marginal_ratio"]
    print(f"one more runtime costs {slopes} ({'ratio ' + format(ratio, '.2f') if ratio is not None else 'no ratio'}; linear: about 1)")


if __name__ == "__main__":
    main()
