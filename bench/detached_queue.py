"""The detached job queue under load: does it stay bounded, and does it drain?

`python -m bench.detached_queue --seconds 60`: five service processes; 32 sessions in the demo world
(its memory extractor and character tracker queue a detached job each turn) play back to back for
the given time (the issue's figure is 600 s), retrying as clients do when the store holds a turn
back (RESOURCE_EXHAUSTED DETACHED_QUEUE_FULL, docs/retries.md). The queue's depth (queued and
running jobs, read from ListDetachedJobs) is sampled every few seconds; then the players stop and
the time until the queue is empty is measured. Writes bench/results/detached_queue.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from bench.common import UNCAPPED, play_back_to_back, running_services, table, world_session, write_result
from covel.scheduler.v1 import scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from shared.grpc_client import open_channel

SESSIONS = 32
DEMO_WORLD = "demo-world"
ACTIVE = ("queued", "running")


async def queue_depth(store: store_pb2_grpc.TransactionalStoreStub) -> dict[str, int]:
    """Jobs queued and running now, and the most any one session has."""
    counts = {status: 0 for status in ACTIVE}
    per_session: dict[str, int] = {}
    token = ""
    while True:
        page = await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(statuses=list(ACTIVE), page_size=500, page_token=token))
        for job in page.jobs:
            counts[job.status] += 1
            per_session[job.session_id] = per_session.get(job.session_id, 0) + 1
        token = page.next_page_token
        if not token:
            return {**counts, "most_in_a_session": max(per_session.values(), default=0)}


async def count_jobs(store: store_pb2_grpc.TransactionalStoreStub, status: str) -> int:
    counted, token = 0, ""
    while True:
        page = await store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(statuses=[status], page_size=500, page_token=token))
        counted += len(page.jobs)
        if not (token := page.next_page_token):
            return counted


async def measure(sessions: int, seconds: float, sample_s: float, drain_limit_s: float) -> dict:
    async with running_services() as group:
        channels = [open_channel(group.addrs["scheduler"]) for _ in range(sessions)]
        store_channel = group.channel_as("store", "scheduler")
        try:
            store = store_pb2_grpc.TransactionalStoreStub(store_channel)
            stubs = [scheduler_pb2_grpc.SchedulerStub(channel) for channel in channels]
            ids = await asyncio.gather(*(world_session(stub, DEMO_WORLD, UNCAPPED) for stub in stubs))
            end = time.perf_counter() + seconds
            samples: list[dict] = []

            async def sampler() -> None:
                started = time.perf_counter()
                while time.perf_counter() < end:
                    samples.append({"at_s": round(time.perf_counter() - started, 1), **await queue_depth(store)})
                    await asyncio.sleep(sample_s)

            turns, _ = await asyncio.gather(play_back_to_back(stubs, ids, seconds), sampler())
            stopped = time.perf_counter()
            left = await queue_depth(store)
            while left["queued"] + left["running"] and time.perf_counter() - stopped < drain_limit_s:
                await asyncio.sleep(0.5)
                left = await queue_depth(store)
            drained_s = time.perf_counter() - stopped
            finished = {status: await count_jobs(store, status) for status in ("succeeded", "failed", "parked", "timed-out", "superseded")}
        finally:
            for channel in channels:
                await channel.close()
            await store_channel.close()
    return {
        "cores": os.cpu_count(), "load_average_at_end": os.getloadavg()[0], "sessions": sessions, "seconds": seconds,
        "turns": len(turns), "turns_per_s": len(turns) / seconds,
        "max_queued": max((s["queued"] for s in samples), default=0),
        "max_active_in_a_session": max((s["most_in_a_session"] for s in samples), default=0),
        "queued_at_stop": samples[-1]["queued"] if samples else 0,
        "drained": not (left["queued"] + left["running"]), "drained_s": drained_s, "left": left,
        "finished_jobs": finished, "samples": samples,
    }


def render(result: dict) -> str:
    return table(
        ["sessions", "seconds", "turns/s", "max queued", "max active in a session", "drained in s", "jobs succeeded"],
        [[result["sessions"], result["seconds"], result["turns_per_s"], result["max_queued"], result["max_active_in_a_session"],
          result["drained_s"] if result["drained"] else f"not in {result['drained_s']:.0f}", result["finished_jobs"]["succeeded"]]],
    )


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--sessions", type=int, default=SESSIONS)
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between samples of the queue")
    parser.add_argument("--drain-limit", type=float, default=300.0, help="give up waiting for the queue to drain after this")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.sessions, args.seconds, args.sample, args.drain_limit))
    write_result("detached_queue", result)
    print(f"{args.sessions} demo-world sessions playing back to back for {args.seconds:.0f} s, {result['cores']} cores "
          f"(load {result['load_average_at_end']:.1f}); the queue sampled every {args.sample:.0f} s:")
    print(render(result))
    return result


if __name__ == "__main__":
    main()
