"""Aggregate turns per second with 1, 8 and 32 concurrent sessions (scripted model, zero latency).

`python -m bench.concurrency --seconds 15`: five service processes on loopback TCP; for each
concurrency level, that many sessions each play turns back to back (one client channel each,
as separate clients would) for the given time; turns/s counts the turns that completed in the
window. Then 32 sessions in the demo world with its full plugin set (`--world-levels`).
Writes bench/results/concurrency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from bench.common import (
    create_session,
    play_back_to_back,
    play_turn,
    running_services,
    summarize,
    table,
    world_session,
    write_result,
)
from bench.turn_costs import metrics_env, per_turn, snapshot
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import ServiceGroup
from shared.grpc_client import open_channel

LEVELS = (1, 8, 32)
WORLD_LEVELS = (32,)
DEMO_WORLD = "demo-world"


async def start_session(stub: scheduler_pb2_grpc.SchedulerStub, world: str) -> str:
    if world:
        return await world_session(stub, world)
    return (await create_session(stub)).id


async def sessions_play(scheduler_addr: str, sessions: int, seconds: float, world: str = "",
                        counted: tuple[ServiceGroup, dict[str, int]] | None = None) -> dict:
    """`counted`: the group and its metrics ports, to add the CPU each process spent per turn while they played."""
    latencies: list[float] = []
    costs: dict = {}
    failures: list[str] = []
    channels = [open_channel(scheduler_addr) for _ in range(sessions)]
    try:
        stubs = [scheduler_pb2_grpc.SchedulerStub(channel) for channel in channels]
        ids = [await start_session(stub, world) for stub in stubs]
        # One warm-up turn each (connections up, caches filled), then everyone starts at once.
        await asyncio.gather(*(play_turn(stub, session_id, "I wait.") for stub, session_id in zip(stubs, ids)))
        before = snapshot(*counted) if counted else None
        conflicts = read_conflicts(counted[0]) if counted else 0
        client_cpu_s = time.process_time()
        latencies += await play_back_to_back(stubs, ids, seconds, failures)
        if counted and before is not None:
            # Over the turns that ended in the window (each session's last turn, ended after it, adds a little).
            costs = per_turn(before, snapshot(*counted), max(1, len(latencies)))
            # This process, every session's client: sending the actions and reading the turns' streams (bench.scale).
            costs["client_cpu_ms_per_turn"] = (time.process_time() - client_cpu_s) * 1000 / max(1, len(latencies))
        jobs = await job_statuses(stubs[0], ids)
        conflicts = read_conflicts(counted[0]) - conflicts if counted else 0
    finally:
        for channel in channels:
            await channel.close()
    return {
        "sessions": sessions, "plugins": world or "narrator", "seconds": seconds, "turns": len(latencies),
        "turns_per_s": len(latencies) / seconds, "turn_ms": summarize(latencies) if latencies else {},
        "failed_turns": len(failures), "failures": failures[:5], "jobs_at_end": jobs, "read_conflicts": conflicts,
        **({key: costs[key] for key in ("cpu_ms_per_turn", "sandbox_cpu_ms_per_turn", "client_cpu_ms_per_turn", "rpcs_per_turn",
                                         "stream_calls_per_turn")} if costs else {}),
    }


async def measure(levels: tuple[int, ...], seconds: float, world_levels: tuple[int, ...] = ()) -> dict:
    env, ports = metrics_env()
    async with running_services(extra_env=env) as group:
        assert isinstance(group, ServiceGroup)
        cases = [(level, "") for level in levels] + [(level, DEMO_WORLD) for level in world_levels]
        rows = [await sessions_play(group.addrs["scheduler"], level, seconds, world, (group, ports)) for level, world in cases]
    return {"cores": os.cpu_count(), "load_average_at_end": os.getloadavg()[0], "levels": rows}




def read_conflicts(group: ServiceGroup) -> int:
    """The detached jobs' runs a player's commit refused so far (READ_CONFLICT: each ran again), from the scheduler's log."""
    log = group.data_dir / "logs" / "scheduler.log"
    return log.read_text(errors="replace").count("detached.read_conflict") if log.exists() else 0


async def job_statuses(stub: scheduler_pb2_grpc.SchedulerStub, session_ids: list[str]) -> dict[str, int]:
    """The sessions' detached jobs by status once the window ended: queued and running ones are the queue's depth."""
    counts: dict[str, int] = {}
    for session_id in session_ids:
        for job in (await stub.ListDetachedJobs(scheduler_pb2.ListDetachedJobsRequest(session_id=session_id, page_size=500))).jobs:
            status = resources_pb2.DetachedJobStatus.Name(job.status).removeprefix("DETACHED_JOB_STATUS_").lower()
            counts[status] = counts.get(status, 0) + 1
    return counts


def render(result: dict) -> str:
    return table(
        ["concurrent sessions", "plugins", "turns/s", "turn p50 ms", "turn p95 ms", "turns", "failed", "CPU ms a turn, five processes",
         "jobs queued / running / done at the end", "job runs refused (read conflicts)"],
        [[r["sessions"], r.get("plugins", "narrator"), r["turns_per_s"], r["turn_ms"].get("p50", 0.0), r["turn_ms"].get("p95", 0.0), r["turns"],
          r["failed_turns"], sum(r.get("cpu_ms_per_turn", {}).values()), _jobs(r.get("jobs_at_end", {})), r.get("read_conflicts", 0)]
         for r in result["levels"]],
    )


def _jobs(counts: dict[str, int]) -> str:
    done = sum(n for status, n in counts.items() if status not in ("queued", "running"))
    return f"{counts.get('queued', 0)} / {counts.get('running', 0)} / {done}" if counts else "-"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--levels", type=int, nargs="+", default=list(LEVELS))
    parser.add_argument("--world-levels", type=int, nargs="*", default=list(WORLD_LEVELS), help="sessions in the demo world")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(tuple(args.levels), args.seconds, tuple(args.world_levels)))
    write_result("concurrency", result)
    print(f"sessions playing turns back to back for {args.seconds:.0f} s each, five processes, {result['cores']} cores:")
    print(render(result))
    return result


if __name__ == "__main__":
    main()
