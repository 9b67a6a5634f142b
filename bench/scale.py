"""Scale on paper and in a simulation (bench/scale_sim.py): reproduce bench.concurrency's figures, then predict.

`python -m bench.scale`: first the model against measured figures, each within 20 % or said not to be: the quiet
figures of docs/benchmarks.md (the costs fed in: bench/scale_inputs.py), and, when `make bench` left them, this
run's bench/results/turn_latency.json and job_costs.json (the costs) against its concurrency.json (1/8/32
sessions). Then players who pause between turns (`--think-s`, default 30 s) on a model with latency (`--model-s`:
the demo world's critical path on bench.model_latency's paced model) at 1,000 and 10,000 concurrent players, each
service replica on a core of its own and PostgreSQL as `--db-cores` cores that each store call holds for
`--db-ms-per-call` (an assumption: the benches measure the store's CPU, not the database's); a detached job waits
`--job-model-s` on models, holding one of its replica's workers (sized on paper, at least `--workers`).
`--operations-tables` prints only the tables of docs/operations.md "Scale" (tests/bench/test_scale_tables.py
compares them). Writes bench/results/scale.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import replace

from bench.common import RESULTS, write_result
from bench.scale_inputs import DEMO_WORLD_NOW, DOCUMENTED, NARRATOR, this_run_profiles
from bench.scale_profile import SERVICES, TurnProfile
from bench.scale_render import operations_tables, render
from bench.scale_sim import Deployment, simulate, summary

ONE_MACHINE = Deployment(shared_cores=2)
TOLERANCE = 0.20
# bench.concurrency plays each level for 15 s after one warm-up turn per session.
MEASURED_SECONDS, WARMUP_S = 15.0, 3.0


def compare(profile: TurnProfile, sessions: int, turns_per_s: float, p50_ms: float, seconds: float, measured: dict | None = None) -> dict:
    simulated = summary(simulate(profile, ONE_MACHINE, sessions, seconds=seconds, warmup_s=WARMUP_S))
    error = simulated["turns_per_s"] / turns_per_s - 1 if turns_per_s else math.inf
    p50_error = simulated["p50_ms"] / p50_ms - 1 if p50_ms else math.inf
    # The mean turn of sessions playing back to back, by Little's law: the sessions over the turns they end a second.
    mean_ms = sessions / turns_per_s * 1000 if turns_per_s else math.inf
    return {"profile": profile.name, "sessions": sessions, "measured_turns_per_s": turns_per_s, "measured_p50_ms": p50_ms,
            "simulated_turns_per_s": simulated["turns_per_s"], "simulated_p50_ms": simulated["p50_ms"],
            "turns_per_s_error": error, "p50_error": p50_error, "within": abs(error) <= TOLERANCE and abs(p50_error) <= TOLERANCE,
            "measured_mean_ms": mean_ms, "mean_error": simulated["mean_ms"] / mean_ms - 1 if mean_ms else math.inf,
            "simulated": simulated, "measured": measured or {}}


def this_run(seconds: float) -> list[dict]:
    """The model fed with this run's turn_latency and job_costs against this run's concurrency figures."""
    concurrency = RESULTS / "concurrency.json"
    profiles = this_run_profiles(RESULTS)
    if not (profiles and concurrency.exists()):
        return []
    rows = []
    for level in json.loads(concurrency.read_text())["levels"]:
        if level["plugins"] not in profiles or not level["turns"]:
            continue
        measured = {"cpu_ms_per_turn": sum(level.get("cpu_ms_per_turn", {}).values()), "jobs_at_end": level.get("jobs_at_end", {})}
        rows.append(compare(profiles[level["plugins"]], level["sessions"], level["turns_per_s"], level["turn_ms"].get("p50", 0.0),
                            level["seconds"], measured))
    return rows


def per_core(profile: TurnProfile) -> dict[str, float]:
    """Turns/s one replica on one core carries, each service, a turn's detached jobs included (on paper)."""
    job = profile.job

    def cost(service: str) -> float:
        own = profile.cpu_ms.get(service, 0.0) + profile.sandbox_ms.get(service, 0.0)
        if job is not None:
            own += profile.jobs * (job.cpu_ms.get(service, 0.0) + job.sandbox_ms.get(service, 0.0))
        return own
    return {service: 1000 / cost(service) for service in SERVICES[:4] if cost(service)}


def replicas_for(profile: TurnProfile, turns_per_s: float, headroom: float = 0.7) -> dict[str, int]:
    """Replicas (one core each) that keep every service under `headroom` busy at `turns_per_s`, on paper."""
    carried = per_core(profile)
    return {s: max(1, math.ceil(turns_per_s / carried[s] / headroom)) if s in carried else 1 for s in SERVICES}


def workers_for(profile: TurnProfile, turns_per_s: float, schedulers: int, least: int, headroom: float = 0.7) -> int:
    """Detached workers a scheduler replica runs so that its jobs keep up, on paper: a job holds its worker for its
    wait on models and its CPU (at most 64, the setting's bound)."""
    job = profile.job
    if job is None or not profile.jobs:
        return least
    held_s = job.model_s + sum(job.cpu_ms.values()) / 1000
    return min(64, max(least, math.ceil(turns_per_s * profile.jobs * held_s / schedulers / headroom)))


def store_calls(profile: TurnProfile) -> float:
    """Store calls a turn causes (RPCs and hook-state messages), its detached jobs' included: each a transaction."""
    def own(p: TurnProfile) -> float:
        return p.rpcs.get("store", 0.0) + p.messages.get("store", 0.0)
    return own(profile) + (profile.jobs * own(profile.job) if profile.job else 0.0)


def predict(profile: TurnProfile, players: int, args: argparse.Namespace) -> dict:
    think_s, model_s, db_cores, db_ms = args.think_s, args.model_s, args.db_cores, args.db_ms_per_call
    # One session's CPU per turn, no wakeup shared: a deployment's replicas are sized as if every call woke its process.
    job = replace(profile.job, model_s=args.job_model_s) if profile.job is not None else None
    played = replace(profile, model_s=model_s, client_ms=0.0, wakeup_ms=0.0, job=job)
    offered = players / (think_s + model_s + 0.5)
    replicas = replicas_for(played, offered)
    workers = workers_for(played, offered, replicas["scheduler"], args.workers)
    deployment = Deployment(shared_cores=None, replicas=replicas, detached_workers=workers, db_cores=db_cores, db_ms_per_call=db_ms)
    result = simulate(played, deployment, players, think_s=think_s, seconds=args.seconds, warmup_s=think_s + model_s)
    return {"profile": profile.name, "players": players, "offered_turns_per_s": offered, "replicas": replicas, "workers": workers,
            **summary(result), "over_model_p50_ms": result.p(0.5) - model_s * 1000,
            "busiest": max(result.busy.items(), key=lambda item: item[1]), "db_busy": result.busy["db"],
            "db_turns_per_s_limit": db_cores / (store_calls(profile) * db_ms / 1000) if db_ms else math.inf}


def forecast(args: argparse.Namespace) -> dict:
    return {
        "per_core": {profile.name: per_core(profile) for profile in (NARRATOR, DEMO_WORLD_NOW)},
        "store_calls": {profile.name: store_calls(profile) for profile in (NARRATOR, DEMO_WORLD_NOW)},
        "assumptions": f"{args.think_s:.0f} s between turns, {args.model_s:.1f} s on models a turn and {args.job_model_s:.1f} s a job, "
                       f"at least {args.workers} job workers a scheduler replica, PostgreSQL {args.db_cores} cores at {args.db_ms_per_call} ms a store call",
        "predictions": [predict(profile, players, args) for profile in (NARRATOR, DEMO_WORLD_NOW) for players in args.players],
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="simulated seconds measured per prediction")
    parser.add_argument("--players", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--think-s", type=float, default=30.0)
    parser.add_argument("--model-s", type=float, default=6.4, help="the turn's wait on models (model_latency's critical path)")
    parser.add_argument("--job-model-s", type=float, default=2.8,
                        help="a detached job's wait on models (model_latency: 1.6 s a call; memory extraction 2.5 calls, the tracker 1)")
    parser.add_argument("--workers", type=int, default=2, help="detached workers a scheduler replica at least (scheduler_detached_workers)")
    parser.add_argument("--db-cores", type=int, default=8)
    parser.add_argument("--db-ms-per-call", type=float, default=0.3)
    parser.add_argument("--operations-tables", action="store_true", help="print only docs/operations.md's tables")
    args = parser.parse_args(argv)
    if (args.seconds <= 0 or args.think_s < 0 or args.model_s < 0 or args.job_model_s < 0 or args.db_cores < 1 or args.workers < 1
            or any(p < 1 for p in args.players)):
        parser.error("--seconds, --db-cores and --workers must be positive, --think-s and the model waits not negative, players at least 1")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    result = {"load_average": os.getloadavg()[0],
              "documented": [compare(profile, sessions, tps, p50, MEASURED_SECONDS) for profile, sessions, tps, p50 in DOCUMENTED],
              **forecast(args)}
    if args.operations_tables:
        print(operations_tables(result))
        return result
    result["this_run"] = this_run(args.seconds)
    print(render(result))
    write_result("scale", result)
    return result


if __name__ == "__main__":
    main()
