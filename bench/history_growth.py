"""Does a turn cost more as the story grows? One session, 200 turns back to back (narrator, scripted
model, five processes): the p50 of turns 176-200 against turns 1-25, as a ratio from the same run
(target: within 10%, issue 19). The turn reads a window of the log with its lease, so what it reads
should not grow with the story.

`python -m bench.history_growth --turns 200 --window 25`. Writes bench/results/history_growth.json.
"""

from __future__ import annotations

import argparse
import asyncio

from bench.common import create_session, percentile, play_turn, running_services, table, write_result
from covel.scheduler.v1 import scheduler_pb2_grpc
from shared.grpc_client import open_channel


async def measure(turns: int) -> list[float]:
    async with running_services() as group, open_channel(group.addrs["scheduler"]) as channel:
        stub = scheduler_pb2_grpc.SchedulerStub(channel)
        session = await create_session(stub)
        timings = []
        for index in range(turns):
            elapsed, _, _ = await play_turn(stub, session.id, f"I walk on along the shore, step {index}.")
            timings.append(elapsed)
        return timings


def summarize(timings: list[float], window: int) -> dict:
    first, last = timings[:window], timings[-window:]
    early, late = percentile(first, 0.5), percentile(last, 0.5)
    return {"turns": len(timings), "window": window, "first_p50_ms": early, "last_p50_ms": late, "last_over_first": late / early}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--window", type=int, default=25)
    args = parser.parse_args(argv)
    result = summarize(asyncio.run(measure(args.turns)), args.window)
    write_result("history_growth", result)
    n, w = result["turns"], result["window"]
    print(f"one session, {n} turns back to back (narrator, five processes):")
    print(table(["turns", "p50 ms"], [[f"1-{w}", result["first_p50_ms"]], [f"{n - w + 1}-{n}", result["last_p50_ms"]],
                                      ["ratio (later / first)", result["last_over_first"]]]))
    return result


if __name__ == "__main__":
    main()
