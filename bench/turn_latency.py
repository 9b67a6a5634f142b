"""End-to-end wall time of one turn (scripted model) across the five services.

`make bench` (or `python -m bench.turn_latency --turns 50`): starts the services as
processes on free ports, plays N turns in one session, prints p50/p95/mean and writes
bench/results/turn_latency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from covel.common.v1 import common_pb2
from covel.scheduler.v1 import scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import ServiceGroup, free_port_addrs
from shared.grpc_client import open_channel

RESULTS = Path(__file__).parent / "results"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


async def measure(turns: int, warmup: int) -> dict:
    with tempfile.TemporaryDirectory() as data_dir:
        group = ServiceGroup(free_port_addrs(), Path(data_dir), extra_env={"COVEL_LOG_LEVEL": "warning"})
        await group.start()
        try:
            async with open_channel(group.addrs["scheduler"]) as channel:
                stub = scheduler_pb2_grpc.SchedulerStub(channel)
                session = (await stub.CreateSession(scheduler_pb2.CreateSessionRequest())).session
                timings, first_text = [], []
                for index in range(warmup + turns):
                    request = scheduler_pb2.SubmitActionsRequest(
                        session_id=session.id,
                        actions=[common_pb2.PlayerAction(kind="do", text=f"I walk on, step {index}.")],
                    )
                    started = time.perf_counter()
                    first_delta = None
                    async for event in stub.SubmitActions(request):
                        if first_delta is None and event.WhichOneof("event") == "narrative_delta":
                            first_delta = time.perf_counter() - started
                    elapsed = time.perf_counter() - started
                    if index >= warmup:
                        timings.append(elapsed * 1000)
                        first_text.append((first_delta or elapsed) * 1000)
        finally:
            await group.stop()
    return {
        "turns": turns,
        "turn_ms": {"p50": percentile(timings, 0.5), "p95": percentile(timings, 0.95), "mean": statistics.fmean(timings)},
        "first_story_text_ms": {"p50": percentile(first_text, 0.5), "p95": percentile(first_text, 0.95)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    result = asyncio.run(measure(args.turns, args.warmup))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "turn_latency.json").write_text(json.dumps(result, indent=2))
    print(f"one turn end to end, scripted model, {result['turns']} turns (history grows each turn):")
    print(f"  {'':<22}{'p50':>9}{'p95':>9}")
    print(f"  {'turn wall time (ms)':<22}{result['turn_ms']['p50']:>9.1f}{result['turn_ms']['p95']:>9.1f}")
    print(f"  {'first story text (ms)':<22}{result['first_story_text_ms']['p50']:>9.1f}{result['first_story_text_ms']['p95']:>9.1f}")


if __name__ == "__main__":
    main()
