"""bench.scale's tables: its full report, and the tables docs/operations.md "Scale" shows (generated, compared by a test)."""

from __future__ import annotations

from bench.common import table
from bench.scale_profile import SERVICES


def _jobs(row: dict) -> str:
    simulated = row["simulated"]
    if not simulated.get("jobs_done") and not simulated.get("jobs_open_at_end"):
        return "-"
    return f"{simulated['jobs_open_at_end']} open, {simulated['jobs_done']} done, {simulated['job_reruns']} run again"


def checks(rows: list[dict]) -> str:
    body = [[r["profile"], r["sessions"], f"{r['measured_turns_per_s']:.1f} / {r['simulated_turns_per_s']:.1f} ({r['turns_per_s_error']:+.0%})",
             f"{r['measured_p50_ms']:.0f} / {r['simulated_p50_ms']:.0f} ({r['p50_error']:+.0%})",
             f"{r['measured_mean_ms']:.0f} / {r['simulated']['mean_ms']:.0f} ({r['mean_error']:+.0%})",
             f"{r['simulated']['cpu_ms_per_turn']:.0f}", _jobs(r), "yes" if r["within"] else "no"] for r in rows]
    return table(["turn kind", "sessions", "turns/s measured / simulated", "p50 ms measured / simulated",
                  "mean ms measured (Little's law) / simulated", "simulated CPU ms a turn (all processes)", "simulated jobs at the end",
                  "within 20 %"], body)


def misses(rows: list[dict]) -> str:
    """Where the model misses by more than 20 %, and what the spread of its turns says of it."""
    lines = []
    for r in rows:
        if r["within"]:
            continue
        simulated = r["simulated"]
        lines.append(f"- {r['profile']}, {r['sessions']} sessions: turns/s {r['turns_per_s_error']:+.0%}, p50 {r['p50_error']:+.0%}; "
                     f"the mean turn {r['mean_error']:+.0%}, the model's p95 {simulated['p95_ms'] / max(simulated['p50_ms'], 1e-9):.2f}x its p50, "
                     f"the measured p50 {r['measured_p50_ms'] / r['measured_mean_ms']:.2f}x its mean: "
                     + ("the model has the mean, not the spread of turn lengths" if abs(r["mean_error"]) <= 0.2 else "not explained here"))
    return "\n".join(lines)


def carried(result: dict) -> str:
    rows = [[name, *(f"{row.get(s, 0):.0f}" for s in SERVICES[:4]), f"{result['store_calls'][name]:.1f}"]
            for name, row in result["per_core"].items()]
    return table(["turn kind", *(f"{s} turns/s" for s in SERVICES[:4]), "store calls a turn, its jobs' included"], rows)


def predictions(result: dict) -> str:
    rows = [[p["profile"], f"{p['players']:,}", f"{p['offered_turns_per_s']:.0f} / {p['turns_per_s']:.0f}",
             ", ".join(f"{s} {n}" for s, n in p["replicas"].items()) + f"; {p['workers']} job workers a scheduler", f"{p['over_model_p50_ms']:+.0f} ms",
             f"{p['busiest'][0]} {p['busiest'][1]:.0%}", f"{p['db_busy']:.0%} (limit {p['db_turns_per_s_limit']:.0f} turns/s)",
             f"{p['jobs_done']:,} / {p['jobs_open_at_end']:,}" if p["jobs_done"] or p["jobs_open_at_end"] else "-"]
            for p in result["predictions"]]
    return table(["turn kind", "players", "turns/s offered / simulated", "replicas (one core each)", "turn p50 over the model",
                  "busiest", "PostgreSQL busy", "jobs done / open at the end"], rows)


def operations_tables(result: dict) -> str:
    """The three tables of docs/operations.md "Scale", as `python -m bench.scale --operations-tables` prints them."""
    return "\n\n".join([checks(result["documented"]), carried(result), predictions(result)])


def render(result: dict) -> str:
    rows = [*result["documented"], *result["this_run"]]
    missed = misses(rows)
    return (f"the model against measured figures (load {result['load_average']:.1f}):\n{checks(rows)}"
            + (f"\n\nwhere it misses:\n{missed}" if missed else "")
            + f"\n\nturns/s one replica carries on one core (its sandbox and the turn's detached jobs included):\n{carried(result)}"
            f"\n\npredictions ({result['assumptions']}):\n{predictions(result)}")
