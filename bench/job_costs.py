"""What a demo-world turn costs without its detached jobs, and what one job costs (for bench.scale's model).

`python -m bench.job_costs --turns 10`: the demo world twice, one session each, scripted model. First with no
detached worker (the jobs stay queued; the per-session cap lifted so the turns go on): the turn alone. Then with
the two workers, waiting after the turns until the session's jobs are done: the turn and everything it caused.
The difference over the jobs a turn queues is one job's CPU per process and its RPCs. Writes
bench/results/job_costs.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from bench.common import table, write_result
from bench.turn_latency import DEMO_WORLD, measure

UNCAPPED = {"COVEL_STORE_DETACHED_MAX_PER_SESSION": "100000"}
# Each turn of the demo world queues one job for each of its detached runtimes (memory/extract, char-creator's tracker).
JOBS_PER_TURN = 2


def job_costs(alone: dict, caused: dict, jobs_per_turn: int) -> dict:
    """One job's CPU per process, its sandboxes', its RPCs and stream messages per service: (everything - the turn) / jobs."""
    def per_job(key: str) -> dict[str, float]:
        return {name: max(0.0, (caused[key].get(name, 0.0) - alone[key].get(name, 0.0)) / jobs_per_turn)
                for name in caused.get(key, {})}

    def by_service(key: str) -> dict[str, float]:
        counts: dict[str, float] = {}
        for method, count in per_job(key).items():
            service = method.split(".", 1)[0]
            counts[service] = counts.get(service, 0.0) + count
        return counts

    # "messages": the calls a job's call streams carried (its hook and model calls, its handlers' ctx.state).
    return {"cpu_ms": per_job("cpu_ms_per_turn"), "sandbox_ms": per_job("sandbox_cpu_ms_per_turn"), "rpcs": by_service("rpcs_per_turn"),
            "messages": by_service("stream_calls_per_turn")}


async def run(turns: int, warmup: int, drain_s: float) -> dict:
    alone = await measure(turns, warmup, world=DEMO_WORLD, extra_env={**UNCAPPED, "COVEL_SCHEDULER_DETACHED_WORKERS": "0"})
    caused = await measure(turns, warmup, world=DEMO_WORLD, extra_env=UNCAPPED, drain_s=drain_s)
    return {"turns": turns, "load_average": os.getloadavg()[0], "jobs_per_turn": JOBS_PER_TURN, "turn_alone": alone,
            "turn_and_jobs": caused, "job": job_costs(alone, caused, JOBS_PER_TURN)}


def render(result: dict) -> str:
    alone, caused, job = result["turn_alone"], result["turn_and_jobs"], result["job"]
    rows = [[name, alone["cpu_ms_per_turn"][name], caused["cpu_ms_per_turn"][name], job["cpu_ms"][name]] for name in caused["cpu_ms_per_turn"]]
    rows += [[f"{name}'s plugin sandbox", alone.get("sandbox_cpu_ms_per_turn", {}).get(name, 0.0), ms, job["sandbox_ms"].get(name, 0.0)]
             for name, ms in caused.get("sandbox_cpu_ms_per_turn", {}).items()]
    rows.append(["RPCs", sum(alone["rpcs_per_turn"].values()), sum(caused["rpcs_per_turn"].values()), sum(job["rpcs"].values())])
    left = caused.get("jobs_left_open", 0)
    return (table(["CPU ms", "a turn alone", "a turn and its jobs", "one job"], rows)
            + (f"\n{left} jobs were still open when the wait ended: the job's figures are low" if left else ""))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--drain-s", type=float, default=120.0)
    args = parser.parse_args(argv)
    if args.turns < 1 or args.warmup < 0 or args.drain_s <= 0:
        parser.error("--turns must be at least 1, --warmup not negative, --drain-s positive")
    result = asyncio.run(run(args.turns, args.warmup, args.drain_s))
    print(f"the demo world, {args.turns} turns a run, {os.cpu_count()} cores, load {result['load_average']:.1f}:")
    print(render(result))
    write_result("job_costs", result)
    return result


if __name__ == "__main__":
    main()
