"""One table of the headline figures of every benchmark that ran, from bench/results/*.json.

`python -m bench.summary` (the last step of `make bench`): prints the table and writes
bench/results/summary.md with it, followed by each benchmark's own output
(bench/results/<name>.txt, written by `make bench`) when there is one.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator

from bench.common import RESULTS, table

Row = list[object]


def _turn_latency(data: dict) -> Iterator[Row]:
    yield from _turn_rows(data, "turn latency, narrator, 5 processes")
    if "demo_world_plain" in data:
        yield from _turn_rows(data["demo_world_plain"], "turn latency, demo world without its story world, 5 processes")
    if "demo_world" in data:
        yield from _turn_rows(data["demo_world"], "turn latency, demo world, 5 processes")


def _turn_rows(data: dict, name: str) -> Iterator[Row]:
    turn, first = data["turn_ms"], data["first_story_text_ms"]
    yield [name, "turn p50 / p95 ms", f"{turn['p50']:.1f} / {turn['p95']:.1f}"]
    yield [name, "first story text p50 / p95 ms", f"{first['p50']:.1f} / {first['p95']:.1f}"]
    if "cpu_ms_per_turn" in data:
        cpu = data["cpu_ms_per_turn"]
        yield [name, "CPU ms per turn (all five; " + ", ".join(cpu) + ")",
               f"{sum(cpu.values()):.1f} (" + " / ".join(f"{ms:.1f}" for ms in cpu.values()) + ")"]
        yield [name, "RPCs per turn", f"{sum(data['rpcs_per_turn'].values()):.1f}"]
        streams = data["messages_per_stream"]
        yield [name, "messages per Generate / SubmitActions stream",
               f"{streams.get('gateway.Generate', 0):.1f} / {streams.get('scheduler.SubmitActions', 0):.1f}"]


def _web_player(data: dict) -> Iterator[Row]:
    grpc_ms, page_ms, weight = data["grpc_first_text_ms"], data["page_first_text_ms"], data["page_weight"]
    yield ["player page vs gRPC client, narrator", "first story text p50 ms (page / gRPC = ratio)",
           f"{page_ms['p50']:.1f} / {grpc_ms['p50']:.1f} = {data['page_over_grpc']:.2f}"]
    yield ["player page", "weight bytes raw / gzipped; requests to start", f"{weight['bytes']} / {weight['gzip_bytes']}; {weight['requests_to_start']}"]


def _concurrency(data: dict) -> Iterator[Row]:
    for level in data["levels"]:
        ms = level["turn_ms"]
        failed = f", {level['failed_turns']} failed" if level["failed_turns"] else ""
        yield [f"concurrency, {level['sessions']} sessions, {level.get('plugins', 'narrator')}", "turns/s; turn p50 / p95 ms",
               f"{level['turns_per_s']:.1f}; {ms.get('p50', 0):.0f} / {ms.get('p95', 0):.0f}{failed}"]


def _history_growth(data: dict) -> Iterator[Row]:
    yield [f"history growth, {data['turns']} turns", f"p50 last {data['window']} / first {data['window']} turns",
           f"{data['last_over_first']:.2f} ({data['last_p50_ms']:.1f} / {data['first_p50_ms']:.1f} ms)"]


def _split_cost(data: list) -> Iterator[Row]:
    for row in data:
        yield [f"split cost, {row['mode']} over {row['transport']}", "turn p50 / p95 ms",
               f"{row['turn_ms']['p50']:.1f} / {row['turn_ms']['p95']:.1f}"]


def _agent_step(data: list) -> Iterator[Row]:
    for row in data:
        yield [f"agent step, {row['where']}, loop hooks: {row['loop_hooks']}", "per step µs",
               f"{row['per_step_ms'] * 1000:.0f}"]


def _bub_compare(data: dict) -> Iterator[Row]:
    for row in data["rows"]:
        yield [f"vs Bub: {row['framework']} (py {row['python']}), {row['plugin_hooks']} plugin hooks", "turn p50 / p95 ms",
               f"{row['turn_ms']['p50']:.2f} / {row['turn_ms']['p95']:.2f}"]
    if data.get("bub_skipped"):
        yield ["vs Bub", "skipped", data["bub_skipped"]]


def _scheduler_overhead(data: dict) -> Iterator[Row]:
    for row in data["rows"]:
        yield [f"scheduler overhead, {row['runtimes']} function runtimes", "turn p50 ms; per runtime ms",
               f"{row['p50_ms']:.1f}; {row['per_runtime_ms']:.2f}"]
    marginal = ", ".join(f"{span}: {ms:.2f}" for span, ms in data["marginal_ms"].items())
    yield ["scheduler overhead, growth", "per runtime 200 vs 10; ms per added runtime",
           f"{data['per_runtime_ratio']:.2f}x; {marginal}"]


def _hook_dispatch(data: dict) -> Iterator[Row]:
    bub = data.get("bub") or {}
    bub_us = f"; Bub {bub['before_tool_call_us']:.2f}" if isinstance(bub, dict) and bub.get("before_tool_call_us") else ""
    yield ["hook dispatch, PreToolUse, 5 async handlers", "in process per event µs (pluggy; Bub)",
           f"{data['pre_tool_use_event_us']:.2f} ({data['pre_tool_use_pluggy_call_us']:.2f}{bub_us})"]
    yield ["hook dispatch, 5 plain-function handlers", "sequential per event µs (each in a thread)", f"{data['sequential_event_us']:.0f}"]
    if "hookspec_adapter_call_us" in data:
        yield ["hookspec call through the adapter, 5 hookimpls", "per call µs: plain def; async def (pluggy)",
               f"{data['hookspec_adapter_call_us']:.0f}; {data['hookspec_adapter_async_call_us']:.2f} ({data['hookspec_pluggy_call_us']:.2f})"]
    yield ["hook dispatch, 5 handlers", "gRPC Dispatch round trip µs", f"{data['grpc_dispatch_round_trip_us']:.0f}"]


def _sandbox_cost(data: dict) -> Iterator[Row]:
    yield ["plugin sandbox", "added per hook call µs (sequential ratio)",
           f"{data['hook_call_added_us']:.0f} ({data['sandboxed_TurnStart_us'] / data['local_TurnStart_us']:.1f}x)"]
    yield ["plugin sandbox", "added per function runtime µs (ratio)",
           f"{data['function_added_us']:.0f} ({data['sandboxed_handler_us'] / data['local_handler_us']:.1f}x)"]
    yield ["plugin sandbox", "fresh worker p50 ms", f"{data['worker_start_ms']['p50']:.1f}"]


def _event_hops(data: dict) -> Iterator[Row]:
    full = data["rows"][-1]["event_us"]
    yield ["one hook event waited for, its hops alone", "p50 µs; 5 events ms", f"{full['p50']:.0f}; {data['floor_ms_for_5_events']:.2f}"]


def _gateway_overhead(data: dict) -> Iterator[Row]:
    for case in ("non_streamed", "streamed_20_deltas"):
        if case in data:
            yield [f"gateway overhead, {case.replace('_', ' ')}", "added p50 / p95 ms",
                   f"{data[case]['overhead_p50_ms']:.2f} / {data[case]['overhead_p95_ms']:.2f}"]


def _store_commit(data: dict) -> Iterator[Row]:
    for row in data["results"]:
        yield [f"store commit, {row['backend']}, {row['proposals']} proposals", "commits/s; p50 ms",
               f"{row['commits_per_s']:.1f}; {row['commit_p50_ms']:.1f}"]


def _validate_plugins(data: dict) -> Iterator[Row]:
    yield ["plugin validation", "ms per package", f"{data['all_ms_per_package']:.2f}"]


def _memory_recall(data: dict) -> Iterator[Row]:
    recall = data["recall"]
    yield ["memory-search top-5 recall, all queries", "BM25 / hybrid", f"{recall['all']['bm25']:.2f} / {recall['all']['hybrid']:.2f}"]
    yield ["memory-search top-5 recall, paraphrases by word forms", "BM25 / hybrid",
           f"{recall['word forms']['bm25']:.2f} / {recall['word forms']['hybrid']:.2f}"]


def _recovery(data: dict) -> Iterator[Row]:
    stuck = ", ".join(f"{row['service']} {row['stuck_s']:.2f}" if row["stuck_s"] is not None else f"{row['service']} never" for row in data["rows"])
    yield [f"recovery, each service killed mid-turn, {data['backend']}", "stuck window s (longest: per service); submits lost",
           f"{data['longest_stuck_s']:.2f} ({stuck}); {data['lost']}"]


def _detached_queue(data: dict) -> Iterator[Row]:
    drained = f"{data['drained_s']:.0f} s" if data["drained"] else f"not in {data['drained_s']:.0f} s"
    yield [f"detached queue, {data['sessions']} demo sessions for {data['seconds']:.0f} s", "max queued; max in a session; drained in",
           f"{data['max_queued']}; {data['max_active_in_a_session']}; {drained}"]


def _model_latency(data: dict) -> Iterator[Row]:
    name = f"demo world on a paced model ({data['ttft_ms']:.0f} ms to first token, {data['tokens_per_s']:.0f} tokens/s)"
    first, turn = data["first_text_ms"], data["turn_ms"]
    yield [name, "first story text p50 ms (critical path; over it)",
           f"{first['p50']:.0f} ({data['path_first_text_ms']['p50']:.0f}; {data['over_path_first_text_ms']['p50']:+.0f})"]
    yield [name, "turn p50 ms (critical path; over it)",
           f"{turn['p50']:.0f} ({data['path_turn_ms']['p50']:.0f}; {data['over_path_turn_ms']['p50']:+.0f})"]
    if "started_over_path_first_text_ms" in data:
        yield [name, "from the turn's start (lease taken), over its path p50 ms: first story text; turn",
               f"{data['started_over_path_first_text_ms']['p50']:+.0f}; {data['started_over_path_turn_ms']['p50']:+.0f}"]
    totals = data["totals"]
    yield [name, "model calls; prompt / completion tokens per turn; prompt prefix reused",
           f"{totals['calls']:.1f}; {totals['prompt_tokens']:.0f} / {totals['completion_tokens']:.0f}; {totals['prefix_reuse']:.0%}"]
    unread = ", ".join(data["unread_on_story_path"]) or "none"
    yield [name, "agents on the story's path it does not read", unread]


def _job_costs(data: dict) -> Iterator[Row]:
    alone, job = data["turn_alone"]["cpu_ms_per_turn"], data["job"]
    yield ["demo world, a turn without its detached jobs / one job", "CPU ms, five processes; RPCs of a job",
           f"{sum(alone.values()):.0f} / {sum(job['cpu_ms'].values()):.0f}; {sum(job['rpcs'].values()):.1f}"]


def _scale(data: dict) -> Iterator[Row]:
    for row in [*data["documented"], *data["this_run"]]:
        yield [f"scale model vs measured, {row['profile']}, {row['sessions']} sessions", "turns/s; p50 ms (model error)",
               f"{row['simulated_turns_per_s']:.1f} vs {row['measured_turns_per_s']:.1f} ({row['turns_per_s_error']:+.0%}); "
               f"{row['simulated_p50_ms']:.0f} vs {row['measured_p50_ms']:.0f} ({row['p50_error']:+.0%})"]
    for row in data["predictions"]:
        replicas = " ".join(f"{service} {n}" for service, n in row["replicas"].items())
        yield [f"scale model, {row['profile']}, {row['players']} players", "turns/s; replicas; p50 over the model ms",
               f"{row['turns_per_s']:.0f}; {replicas}; {row['over_model_p50_ms']:+.0f}"]


def _replicas(data: dict) -> Iterator[Row]:
    one, two = data["rows"]
    yield [f"scheduler replicas, {data['sessions']} narrator sessions", "turns/s two replicas / one (ratio)",
           f"{two['turns_per_s']:.1f} / {one['turns_per_s']:.1f} = {data['two_over_one']:.2f}"]


# In `make bench` order; a benchmark whose JSON is missing or of another shape is listed as such.
HEADLINES: dict[str, Callable[[object], Iterator[Row]]] = {
    "turn_latency": _turn_latency, "concurrency": _concurrency, "history_growth": _history_growth, "split_cost": _split_cost, "agent_step": _agent_step,
    "bub_compare": _bub_compare, "scheduler_overhead": _scheduler_overhead, "hook_dispatch": _hook_dispatch,
    "sandbox_cost": _sandbox_cost, "event_hops": _event_hops, "gateway_overhead": _gateway_overhead, "store_commit": _store_commit, "validate_plugins": _validate_plugins,
    "web_player": _web_player, "recovery": _recovery, "detached_queue": _detached_queue,
    "replicas": _replicas, "memory_recall": _memory_recall, "model_latency": _model_latency,
    "job_costs": _job_costs, "scale": _scale,
}


def summary_rows() -> list[Row]:
    rows: list[Row] = []
    for name, headline in HEADLINES.items():
        path = RESULTS / f"{name}.json"
        if not path.exists():
            rows.append([name, "not run", f"no {path.name}"])
            continue
        try:
            rows.extend(headline(json.loads(path.read_text())))
        except (KeyError, TypeError, ValueError) as error:
            rows.append([name, "unreadable", f"{path.name}: {type(error).__name__} {error}"])
    return rows


def main() -> str:
    header = (f"Covel benchmarks, {time.strftime('%Y-%m-%d %H:%M')}, Python {sys.version.split()[0]}, "
              f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
              "scripted model with zero latency throughout, but model_latency's paced model.")
    summary = table(["benchmark", "measure", "figure"], summary_rows())
    print(header)
    print(summary)
    details = [f"## {name}\n\n```\n{(RESULTS / f'{name}.txt').read_text().strip()}\n```"
               for name in HEADLINES if (RESULTS / f"{name}.txt").exists()]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "summary.md").write_text("\n\n".join([f"# Benchmarks\n\n{header}", summary, *details]) + "\n")
    print(f"\nwrote {RESULTS / 'summary.md'}")
    return summary


if __name__ == "__main__":
    main()
