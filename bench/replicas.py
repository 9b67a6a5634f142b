"""Turns per second with two scheduler replicas against one, in one run.

`python -m bench.replicas --seconds 20`: five service processes and a second scheduler on the same
store, registry, hooks and gateway; 32 narrator sessions play back to back, first all on one
scheduler, then half on each (as a Kubernetes Service spreads clients). The machine's cores are
shared by every process, so the second replica can only help as far as the scheduler is the
bottleneck. Writes bench/results/replicas.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from bench.common import create_session, play_back_to_back, play_turn, running_services, summarize, table, write_result
from covel.scheduler.v1 import scheduler_pb2_grpc
from shared.grpc_client import check_health, open_channel
from shared.settings import REPO_ROOT
from tests.conftest import free_addr

SESSIONS = 32


async def play(addrs: list[str], sessions: int, seconds: float) -> dict:
    """`sessions` sessions, session i on addrs[i % len(addrs)], back to back for `seconds`."""
    channels = [open_channel(addrs[index % len(addrs)]) for index in range(sessions)]
    try:
        stubs = [scheduler_pb2_grpc.SchedulerStub(channel) for channel in channels]
        ids = [(await create_session(stub)).id for stub in stubs]
        await asyncio.gather(*(play_turn(stub, session_id, "I wait.") for stub, session_id in zip(stubs, ids, strict=True)))
        latencies = await play_back_to_back(stubs, ids, seconds)
    finally:
        for channel in channels:
            await channel.close()
    return {"replicas": len(addrs), "turns": len(latencies), "turns_per_s": len(latencies) / seconds, "turn_ms": summarize(latencies)}


async def measure(sessions: int, seconds: float) -> dict:
    async with running_services() as group:
        second = free_addr()
        env = {**group.env("scheduler"), "COVEL_SCHEDULER_ADDR": second, "COVEL_SCHEDULER_INSTANCE_ID": "replica-b"}
        process = await asyncio.create_subprocess_exec(sys.executable, "-m", "services.scheduler", env=env, cwd=REPO_ROOT,
                                                       stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        try:
            while await check_health(second, timeout_s=1.0, security=group.security("scheduler")) != "SERVING":
                await asyncio.sleep(0.1)
            one = await play([group.addrs["scheduler"]], sessions, seconds)
            two = await play([group.addrs["scheduler"], second], sessions, seconds)
        finally:
            process.terminate()
            await process.wait()
    return {"cores": os.cpu_count(), "load_average_at_end": os.getloadavg()[0], "sessions": sessions, "seconds": seconds,
            "rows": [one, two], "two_over_one": two["turns_per_s"] / one["turns_per_s"] if one["turns_per_s"] else 0.0}


def render(result: dict) -> str:
    return table(["scheduler replicas", "turns/s", "turn p50 ms", "turn p95 ms", "turns"],
                 [[r["replicas"], r["turns_per_s"], r["turn_ms"]["p50"], r["turn_ms"]["p95"], r["turns"]] for r in result["rows"]])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--sessions", type=int, default=SESSIONS)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.sessions, args.seconds))
    write_result("replicas", result)
    print(f"{args.sessions} narrator sessions back to back for {args.seconds:.0f} s, on one scheduler then on two, "
          f"{result['cores']} cores (load {result['load_average_at_end']:.1f}):")
    print(render(result))
    print(f"two replicas / one: {result['two_over_one']:.2f}x")
    return result


if __name__ == "__main__":
    main()
