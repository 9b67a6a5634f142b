"""End-to-end wall time of one turn (scripted model, zero latency) across the five services.

`python -m bench.turn_latency --turns 30`: starts the services as five processes on free
loopback ports, plays N turns back to back in one session (the default plugins: the
narrator's story, streamed), prints p50/p95 and writes bench/results/turn_latency.json.
`--mode in-process` / `--transport unix` measure the same turn with the services in one
process or over unix sockets (bench/split_cost.py compares them). Five processes: also CPU ms per
turn of each process, RPCs per turn per method and messages per stream (bench/turn_costs.py; the
services serve /metrics for it, which costs them a few microseconds per RPC). Then the same for a
session in the demo world with its full plugin set (`--demo-turns`, 0 to leave it out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from bench.common import (
    IN_PROCESS,
    PROCESSES,
    TCP,
    UNIX,
    create_session,
    play_counted_turn,
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
from tests.support.builtin_plugins import STORY_WORLD_PLUGINS

DEMO_WORLD = "demo-world"


async def measure(turns: int, warmup: int, mode: str = PROCESSES, transport: str = TCP, world: str = "",
                  excluded: tuple[str, ...] = (), extra_env: dict[str, str] | None = None, drain_s: float = 0.0) -> dict:
    """`world`: a session in that world with its whole plugin set (but `excluded`); else the narrator alone.
    `drain_s`: after the turns, wait up to that long for the session's detached jobs to end, so the costs
    counted are everything the turns caused (bench/job_costs.py)."""
    env, metrics_ports = metrics_env() if mode == PROCESSES else ({}, {})
    env = {**env, **(extra_env or {})}
    costs: dict = {}
    async with running_services(mode, transport, env) as group:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            if world:
                session_id = await world_session(stub, world, excluded_plugins=excluded)
                session = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session_id))).session
            else:
                session = await create_session(stub)
            timings, first_text, messages, hooks_run = [], [], [], 0
            before = None
            client_cpu_s = 0.0
            for index in range(warmup + turns):
                if index == warmup and isinstance(group, ServiceGroup):
                    before = snapshot(group, metrics_ports)
                    client_cpu_s = time.process_time()
                elapsed, first, turn, sent = await play_counted_turn(stub, session.id, f"I walk on, step {index}.")
                if index >= warmup:
                    timings.append(elapsed)
                    first_text.append(first)
                    messages.append(sent)
                    hooks_run = len(turn.hook_trace)
            open_jobs = await drained(stub, session.id, drain_s) if drain_s else 0
            if before is not None and isinstance(group, ServiceGroup):
                # This process, the client: reading the turn's stream (bench.scale feeds it to its model); taken before
                # the services' metrics are read, which is the bench's own work (it counted 10-20 ms a turn in a 20-turn run).
                client_ms = (time.process_time() - client_cpu_s) * 1000 / turns
                costs = per_turn(before, snapshot(group, metrics_ports), turns)
                costs["client_cpu_ms_per_turn"] = client_ms
    if drain_s:
        costs["jobs_left_open"] = open_jobs
    return {
        "mode": mode, "transport": transport, "turns": turns, "plugins": list(session.active_plugins),
        "turn_ms": summarize(timings), "first_story_text_ms": summarize(first_text),
        # Hook handler calls in one turn (the narrator's PostContextAssembly): bench/bub_compare matches it.
        "hook_calls_per_turn": hooks_run,
        # Counted by the client (the scheduler's /metrics would count the same).
        "submit_actions_messages": summarize([float(count) for count in messages]),
        **costs,
    }


OPEN_JOBS = [resources_pb2.DETACHED_JOB_STATUS_QUEUED, resources_pb2.DETACHED_JOB_STATUS_RUNNING]


async def drained(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, timeout_s: float) -> int:
    """Wait until the session has no detached job queued or running (or `timeout_s` passed); the jobs still open."""
    deadline = time.monotonic() + timeout_s
    while True:
        reply = await stub.ListDetachedJobs(scheduler_pb2.ListDetachedJobsRequest(session_id=session_id, statuses=OPEN_JOBS))
        if not reply.jobs or time.monotonic() > deadline:
            return len(reply.jobs)
        await asyncio.sleep(0.2)


def render(result: dict, title: str = "one turn, five processes, scripted model") -> str:
    timing = table(
        [title, "p50 ms", "p95 ms", "mean ms"],
        [["turn wall time", result["turn_ms"]["p50"], result["turn_ms"]["p95"], result["turn_ms"]["mean"]],
         ["first story text", result["first_story_text_ms"]["p50"], result["first_story_text_ms"]["p95"],
          result["first_story_text_ms"]["mean"]]],
    )
    if "cpu_ms_per_turn" not in result:
        return timing
    cpu = result["cpu_ms_per_turn"]
    sandboxes = result.get("sandbox_cpu_ms_per_turn", {})
    cpu_table = table(["CPU per turn", "ms"], [*([name, ms] for name, ms in cpu.items()), ["all five", sum(cpu.values())],
                                               *([f"{name}'s plugin sandbox", ms] for name, ms in sandboxes.items())])
    rpcs = result["rpcs_per_turn"]
    rpc_table = table(["RPCs per turn (server side)", "calls"], [*([m, n] for m, n in rpcs.items()), ["all", sum(rpcs.values())]])
    stream_table = table(["messages per stream", "messages"], [[m, n] for m, n in result["messages_per_stream"].items()])
    return "\n\n".join([timing, cpu_table, rpc_table, stream_table])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--demo-turns", type=int, default=20, help="turns of the demo-world session (0: none)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--mode", choices=(PROCESSES, IN_PROCESS), default=PROCESSES)
    parser.add_argument("--transport", choices=(TCP, UNIX), default=TCP)
    parser.add_argument("--json", action="store_true", help="print only the result as JSON (for bench.split_cost)")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args.turns, args.warmup, args.mode, args.transport))
    if args.json:
        print(json.dumps(result))
        return result
    print(f"{args.turns} turns in one session (history grows each turn), {args.mode} over {args.transport}:")
    print(render(result, "narrator only: one turn, five processes, scripted model"))
    if args.demo_turns:
        # The peer: the same world without its story world (quests, codex, relationships, events, stage, music, ...).
        plain = asyncio.run(measure(args.demo_turns, args.warmup, args.mode, args.transport, world=DEMO_WORLD, excluded=STORY_WORLD_PLUGINS))
        result["demo_world_plain"] = plain
        print(f"\n{args.demo_turns} turns in the demo world without its story world ({', '.join(plain['plugins'])}):")
        print(render(plain, "demo world, story world left out: one turn, five processes, scripted model"))
        demo = asyncio.run(measure(args.demo_turns, args.warmup, args.mode, args.transport, world=DEMO_WORLD))
        result["demo_world"] = demo
        print(f"\n{args.demo_turns} turns in the demo world ({', '.join(demo['plugins'])}):")
        print(render(demo, "demo world: one turn, five processes, scripted model"))
        cpu, plain_cpu = sum(demo.get("cpu_ms_per_turn", {}).values()), sum(plain.get("cpu_ms_per_turn", {}).values())
        print(f"\nthe story world's cost: turn p50 {demo['turn_ms']['p50'] / plain['turn_ms']['p50']:.2f}x"
              + (f", CPU per turn {cpu:.1f} ms against {plain_cpu:.1f} ms ({cpu / plain_cpu:.2f}x)" if plain_cpu else ""))
    write_result("turn_latency", result)
    return result


if __name__ == "__main__":
    main()
