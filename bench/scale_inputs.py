"""What bench.scale feeds its model: the measured costs of a turn and of a job, and the figures it must reproduce.

Each service's share of a turn's CPU, its RPCs and the calls its streams carried were measured on this tree on
2026-12-08 (2 cores shared with two other engineers' benches, load 3-13): `bench.turn_latency --turns 20
--demo-turns 20` (the narrator; the demo world with its jobs as they ran) and `bench.job_costs --turns 10` (the
demo world's turn without its jobs, and one job). Loaded, a process spends more CPU on the same work, so each
profile is scaled to the quiet totals of docs/benchmarks.md "One stream a turn to each peer" (load 1.1-2.4, the
same day as the concurrency figures below): the narrator's five processes 36.0 ms a turn (50.0 here); the demo
world's 378.5 ms with its jobs as they ran (661.5 here, turn_latency's measure), which scales job_costs' turn
alone and its job alike (the turn and the 1.55 jobs a turn turn_latency ran come to 359 ms, 5 % under 378.5).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from bench.scale_profile import TurnProfile

NARRATOR_SCALE = 36.0 / 50.0
DEMO_SCALE = 378.5 / 661.5


def scaled(values: dict[str, float], factor: float) -> dict[str, float]:
    return {name: value * factor for name, value in values.items()}


# Fitted, not measured (bench.scale says so beside each figure): the CPU a process spends waking for work when it
# was idle, and the share of a turn's CPU its path does not wait for; see docs/operations.md "Scale".
WAKEUP_MS = 1.5
OFF_PATH = 0.3
CROWD_MS = 0.04

NARRATOR = TurnProfile(
    "narrator", cpu_ms=scaled({"scheduler": 18.0, "store": 20.5, "hooks": 5.0, "gateway": 6.0, "registry": 0.5}, NARRATOR_SCALE),
    rpcs={"store": 2.0, "hooks": 1.0, "gateway": 1.0}, messages={"hooks": 1.0}, sandbox_ms=scaled({"hooks": 1.0}, NARRATOR_SCALE),
    client_ms=4.5 * NARRATOR_SCALE, client_messages=4, wakeup_ms=WAKEUP_MS, off_path=OFF_PATH, crowd_ms=CROWD_MS)
DEMO_JOB = TurnProfile(
    "a demo-world job", cpu_ms=scaled({"scheduler": 34.5, "store": 89.5, "hooks": 13.5, "gateway": 8.5}, DEMO_SCALE),
    rpcs={"store": 7.0, "hooks": 1.1, "gateway": 1.15}, messages={"store": 3.4, "hooks": 3.1, "gateway": 1.85},
    sandbox_ms=scaled({"hooks": 3.0, "scheduler": 2.0}, DEMO_SCALE), commit_calls=3)
DEMO_WORLD = TurnProfile(
    "demo world", cpu_ms=scaled({"scheduler": 179.0, "store": 122.0, "hooks": 51.0, "gateway": 48.0, "registry": 2.0}, DEMO_SCALE),
    rpcs={"store": 5.0, "hooks": 1.2, "gateway": 3.0}, messages={"store": 10.1, "hooks": 14.0, "gateway": 10.1},
    sandbox_ms=scaled({"hooks": 18.0, "scheduler": 73.0}, DEMO_SCALE), client_ms=12.9, client_messages=9,
    jobs=2, job=DEMO_JOB, wakeup_ms=WAKEUP_MS, off_path=OFF_PATH, crowd_ms=CROWD_MS)

# The tree now (services/store/job_commits.py, merged after these costs were measured): a job's commit is one call
# that takes the lease, so two store calls fewer a job; their CPU is kept (not measured since). The predictions and
# the per-core figures use it; the checks against measured figures the tree they were measured on.
DEMO_WORLD_NOW = replace(DEMO_WORLD, job=replace(DEMO_JOB, commit_calls=1, rpcs={**DEMO_JOB.rpcs, "store": DEMO_JOB.rpcs["store"] - 2}))

# (profile, sessions) -> (turns/s, p50 ms) measured quiet: bench.concurrency --seconds 15 at load 1.1, 2026-12-07
# (docs/benchmarks.md, "One stream a turn to each peer").
DOCUMENTED = [(NARRATOR, 1, 34.2, 29.0), (NARRATOR, 8, 62.8, 125.0), (NARRATOR, 32, 47.3, 707.0), (DEMO_WORLD, 32, 5.87, 4500.0)]
# The same run: the demo world's 32 sessions spent 298 ms of CPU (five processes) a turn and left 286 jobs queued.
DOCUMENTED_DEMO_CPU_MS, DOCUMENTED_DEMO_QUEUED = 298.0, 286


def _by_service(counts: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for method, count in counts.items():
        service = method.split(".", 1)[0]
        if service != "scheduler":
            out[service] = out.get(service, 0.0) + count
    return out


def profile_from(data: dict, name: str, base: TurnProfile) -> TurnProfile:
    """A profile from one bench.turn_latency result (its `cpu_ms_per_turn`, `rpcs_per_turn`, ...)."""
    sent = data.get("submit_actions_messages", {}).get("mean", base.client_messages)
    return replace(base, name=name, cpu_ms=dict(data["cpu_ms_per_turn"]), rpcs=_by_service(data["rpcs_per_turn"]),
                   messages=_by_service(data.get("stream_calls_per_turn", {})),
                   sandbox_ms=dict(data.get("sandbox_cpu_ms_per_turn", {})),
                   client_ms=data.get("client_cpu_ms_per_turn", 0.0), client_messages=max(1, round(sent)))


def this_run_profiles(results: Path) -> dict[str, TurnProfile]:
    """The profiles of this run's bench/results (turn_latency.json, job_costs.json), unscaled."""
    latency, job_costs = results / "turn_latency.json", results / "job_costs.json"
    if not latency.exists():
        return {}
    profiles = {"narrator": profile_from(json.loads(latency.read_text()), "narrator (this run)", NARRATOR)}
    if job_costs.exists():
        split = json.loads(job_costs.read_text())
        one = split["job"]
        job = replace(DEMO_JOB, cpu_ms=one["cpu_ms"], rpcs={s: n for s, n in one["rpcs"].items() if s != "scheduler"},
                      messages=one.get("messages", DEMO_JOB.messages), sandbox_ms=one["sandbox_ms"], commit_calls=1)  # this tree's
        profiles["demo-world"] = replace(profile_from(split["turn_alone"], "demo world (this run)", DEMO_WORLD), job=job)
    return profiles
