"""The demo world's turn on a model with a real model's latency, against the turn's critical path.

`python -m bench.model_latency --turns 8`: the paced model server (bench/paced_model.py: 400 ms to the first
token, 50 tokens/s by default) serves every slot; the five services run as processes; one session in the demo
world plays N turns. Per turn: the time to the first story text and to the turn's end, each against its critical
path (bench/critical_path.py: the longest chain of model time the stage and dependency rules force, from the
runtimes the turn ran, its manifests' dependencies and its calls at the model's pace), and what is left over
(waiting the rules do not force). Over the run: model calls, prompt and completion tokens per turn by runtime
(detached jobs' calls included), the share of each prompt that repeats the runtime's previous prompt, and the
agents that sit on the path to the story's first text though the story reads none of their output.
Writes bench/results/model_latency.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from dataclasses import dataclass, field

from bench.common import after_retry_info, running_services, summarize, table, world_session, write_result
from bench.critical_path import TurnPaths, turn_paths
from bench.model_usage import by_runtime, totals
from bench.paced_model import CallRecord, PacedModel, serving
from bench.paced_wire import tokens
from bench.turn_costs import metrics_env, per_turn, snapshot
from bench.turn_latency import drained
from covel.registry.v1 import registry_pb2, registry_pb2_grpc
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel_cli.launcher import ServiceGroup
from shared.grpc_client import open_channel
from shared.manifest import CompiledManifest, parse_manifest
from shared.structs import from_struct

DEMO_WORLD = "demo-world"
STAGES = {resources_pb2.RUNTIME_STAGE_SETUP: "setup", resources_pb2.RUNTIME_STAGE_PRE_TURN: "pre-turn",
          resources_pb2.RUNTIME_STAGE_NARRATIVE: "narrative", resources_pb2.RUNTIME_STAGE_POST_TURN: "post-turn",
          resources_pb2.RUNTIME_STAGE_AUDIT: "audit"}
TEXT_START = '"text": "'
# How far a call may lie outside the run the stream reported (its events are coalesced, so they arrive a little late).
SLACK_S = 0.05
# How long to wait after the turns for the session's detached jobs.
DRAIN_S = 120.0
# What waiting for them asks (and the store call it makes): left out of the RPCs per turn.
DRAIN_POLLS = ("scheduler.ListDetachedJobs", "store.ListDetachedJobs")


@dataclass
class PlayedTurn:
    started: float
    first_text: float
    finished: float
    ran: dict[str, str] = field(default_factory=dict)
    story: str = ""
    # When the turn took the session's lease (after any wait for the session's detached jobs).
    turn_started: float = 0.0
    # runtime id -> [started, finished] as the stream told them
    windows: dict[str, list[float]] = field(default_factory=dict)


async def play(stub: scheduler_pb2_grpc.SchedulerStub, session_id: str, text: str) -> PlayedTurn:
    request = scheduler_pb2.SubmitActionsRequest(session_id=session_id, actions=[resources_pb2.PlayerAction(kind="do", text=text)],
                                                 idempotency_key=uuid.uuid4().hex)
    played = PlayedTurn(time.monotonic(), 0.0, 0.0)
    # The session's lease may be held (its detached jobs run as turns of it): again after RetryInfo, as a client does.
    last = await after_retry_info(lambda: _follow(stub, request, played))
    played.finished = time.monotonic()
    if last is None or last.WhichOneof("event") != "turn_completed" or last.turn_completed.status != resources_pb2.TURN_STATUS_COMMITTED:
        raise RuntimeError(f"the turn did not commit: {last}")
    played.story = next((r.runtime_id for r in last.turn_completed.runtime_results if r.story), "")
    played.first_text = played.first_text or played.finished
    return played


async def _follow(stub: scheduler_pb2_grpc.SchedulerStub, request: scheduler_pb2.SubmitActionsRequest, played: PlayedTurn
                  ) -> scheduler_pb2.TurnEvent | None:
    """One attempt's stream: the runtimes' stages and runs, the first story text; its last event."""
    last = None
    async for event in stub.SubmitActions(request):
        kind = event.WhichOneof("event")
        if kind == "turn_started":
            played.turn_started = time.monotonic()
        elif kind == "runtime_started":
            played.ran.setdefault(event.runtime_started.runtime_id, STAGES.get(event.runtime_started.stage, ""))
            played.windows.setdefault(event.runtime_started.runtime_id, [time.monotonic(), 0.0])
        elif kind == "runtime_finished" and event.runtime_finished.runtime_id in played.windows:
            played.windows[event.runtime_finished.runtime_id][1] = time.monotonic()
        elif kind == "narrative_delta" and not played.first_text:
            played.first_text = time.monotonic()
        last = event
    return last


def place_function_calls(played: PlayedTurn, calls: list[CallRecord], agents: set[str]) -> None:
    """A function runtime's own model calls (ctx.gateway) carry no runtime preamble: each unnamed call of the
    turn goes to the function runtime that ran around it (the shortest such run when several did)."""
    functions = {r: w for r, w in played.windows.items() if r not in agents and w[1]}
    for call in calls:
        if call.runtime_id or not played.started <= call.started <= played.finished:
            continue
        around = [(w[1] - w[0], r) for r, w in functions.items() if w[0] - SLACK_S <= call.started and call.finished <= w[1] + SLACK_S]
        if around:
            call.runtime_id = min(around)[1]


def story_first_text_s(calls: list[CallRecord], model: PacedModel) -> float:
    """The story runtime's model seconds up to its first segment text: its earlier calls whole, then the reply's
    time to first token and the tokens before the first `"text": "`."""
    spent = 0.0
    for call in calls:
        at = call.completion.find(TEXT_START)
        if at >= 0 or call is calls[-1]:
            before = len(tokens(call.completion[: at + len(TEXT_START)])) if at >= 0 else 0
            return spent + model.ttft_s + before / model.tokens_per_s
        spent += call.floor_s
    return spent


def turn_figures(played: PlayedTurn, calls: list[CallRecord], model: PacedModel,
                 manifests: dict[str, CompiledManifest], agents: set[str]) -> tuple[dict, TurnPaths]:
    mine = [c for c in calls if played.started <= c.started <= played.finished and c.runtime_id in played.ran]
    weight: dict[str, float] = {}
    for call in mine:
        weight[call.runtime_id] = weight.get(call.runtime_id, 0.0) + call.floor_s
    story_calls = [c for c in mine if c.runtime_id == played.story]
    paths = turn_paths(played.ran, manifests, weight, played.story, story_first_text_s(story_calls, model), agents)
    first_ms, turn_ms = (played.first_text - played.started) * 1000, (played.finished - played.started) * 1000
    waited_ms = (max(played.turn_started, played.started) - played.started) * 1000
    path_first_ms, path_turn_ms = paths.first_text.seconds * 1000, paths.turn.seconds * 1000
    return {"first_text_ms": first_ms, "turn_ms": turn_ms, "waited_for_session_ms": waited_ms, "path_first_text_ms": path_first_ms,
            "path_turn_ms": path_turn_ms, "model_calls": len(mine),
            # What the turn itself adds over its path, once it holds the session's lease (the scheduler's part).
            "started_over_path_first_text_ms": first_ms - waited_ms - path_first_ms,
            "started_over_path_turn_ms": turn_ms - waited_ms - path_turn_ms}, paths


async def session_manifests(group: ServiceGroup, plugin_ids: list[str]) -> tuple[dict[str, CompiledManifest], set[str]]:
    async with group.channel_as("registry", "operator") as channel:
        reply = await registry_pb2_grpc.PluginRegistryStub(channel).GetPlugins(registry_pb2.GetPluginsRequest(plugin_ids=plugin_ids))
    runtimes = [runtime for package in reply.plugins for runtime in package.runtimes]
    return ({r.runtime_id: parse_manifest(from_struct(r.manifest)) for r in runtimes},
            {r.runtime_id for r in runtimes if r.type == "agent"})


async def measure(turns: int, warmup: int, ttft_ms: float, tokens_per_s: float) -> dict:
    model = PacedModel(ttft_ms / 1000, tokens_per_s)
    env, metrics_ports = metrics_env()
    async with serving(model) as base_url, running_services(extra_env={**model.gateway_env(base_url), **env}) as group:
        async with open_channel(group.addrs["scheduler"]) as channel:
            stub = scheduler_pb2_grpc.SchedulerStub(channel)
            session_id = await world_session(stub, DEMO_WORLD)
            session = (await stub.GetSession(scheduler_pb2.GetSessionRequest(session_id=session_id))).session
            assert isinstance(group, ServiceGroup)
            manifests, agents = await session_manifests(group, list(session.active_plugins))
            for index in range(warmup):
                await play(stub, session_id, f"I walk on, step {index}.")
            before = snapshot(group, metrics_ports)
            played = [await play(stub, session_id, f"I walk on, step {index}.") for index in range(warmup, warmup + turns)]
            # The detached jobs the turns queued: their calls count too (everything the turns cause).
            jobs_left_open = await drained(stub, session_id, DRAIN_S)
            # CPU and RPCs over the turns and their jobs (the warmup's jobs may run among them).
            costs = per_turn(before, snapshot(group, metrics_ports), turns)
    # The bench's own polls while it waits for the jobs (drained) are not the turns'.
    costs["rpcs_per_turn"] = {method: count for method, count in costs["rpcs_per_turn"].items() if method not in DRAIN_POLLS}
    for turn in played:
        place_function_calls(turn, model.calls, agents)
    calls = [c for c in model.calls if c.started >= played[0].started]
    rows: list[dict] = []
    unread: dict[str, list[float]] = {}
    for turn in played:
        figures, paths = turn_figures(turn, model.calls, model, manifests, agents)
        rows.append(figures)
        for runtime, seconds in paths.unread_on_story_path:
            unread.setdefault(runtime, []).append(seconds * 1000)
    runtimes = by_runtime(calls, len(played))
    return {
        "ttft_ms": ttft_ms, "tokens_per_s": tokens_per_s, "turns": len(played), "load_average": os.getloadavg()[0],
        "cores": os.cpu_count(), "plugins": list(session.active_plugins), "jobs_left_open": jobs_left_open,
        **{key: summarize([row[key] for row in rows]) for key in rows[0]},
        "over_path_first_text_ms": summarize([r["first_text_ms"] - r["path_first_text_ms"] for r in rows]),
        "over_path_turn_ms": summarize([r["turn_ms"] - r["path_turn_ms"] for r in rows]),
        "cpu_ms_per_turn": costs["cpu_ms_per_turn"], "rpcs_per_turn": costs["rpcs_per_turn"],
        "by_runtime": runtimes, "totals": totals(runtimes), "embedding_calls_per_turn": model.embeddings / max(1, len(played)),
        "unread_on_story_path": {r: {"turns": len(ms), "model_ms": sum(ms) / len(ms)} for r, ms in unread.items()},
        # What the calls no runtime's system prompt names begin with (to tell what they are).
        "unattributed_prompt_heads": sorted({c.prompt[:160] for c in calls if not c.runtime_id})[:8],
        "example_path": {"first_text": paths.first_text.chain, "turn": paths.turn.chain},
    }


def render(result: dict) -> str:
    timing = table(
        [f"demo world, model {result['ttft_ms']:.0f} ms to first token, {result['tokens_per_s']:.0f} tokens/s", "p50 ms", "p95 ms"],
        [[name, result[key]["p50"], result[key]["p95"]] for name, key in (
            ("first story text", "first_text_ms"), ("its critical path", "path_first_text_ms"),
            ("first story text over its path", "over_path_first_text_ms"), ("turn completed", "turn_ms"),
            ("its critical path", "path_turn_ms"), ("turn over its path", "over_path_turn_ms"),
            ("of it, waiting for the session's lease (its detached jobs)", "waited_for_session_ms"),
            ("from the turn's start (the lease taken): first story text over its path", "started_over_path_first_text_ms"),
            ("from the turn's start: turn completed over its path", "started_over_path_turn_ms"))])
    usage = table(["per turn, by runtime", "calls", "prompt tokens", "completion tokens", "prompt prefix reused"],
                  [[name, row["calls"], row["prompt_tokens"], row["completion_tokens"], f"{row['prefix_reuse']:.0%}"]
                   for name, row in [*result["by_runtime"].items(), ("all", result["totals"])]])
    chain = " -> ".join(f"{runtime} {seconds * 1000:.0f}" for runtime, seconds in result["example_path"]["first_text"] if seconds)
    rpcs = result["rpcs_per_turn"]
    costs = (f"per turn, its detached jobs included: CPU {sum(result['cpu_ms_per_turn'].values()):.0f} ms in the five processes "
             f"({', '.join(f'{name} {ms:.0f}' for name, ms in result['cpu_ms_per_turn'].items())}); {sum(rpcs.values()):.1f} RPCs "
             f"({', '.join(f'{method} {count:.1f}' for method, count in sorted(rpcs.items(), key=lambda item: -item[1])[:6])}, ...; "
             "the bench's own polls for the jobs left out)")
    lines = [timing, usage, costs, f"path to the first story text (last turn, model ms): {chain or '(none)'}"]
    for runtime, seen in result["unread_on_story_path"].items():
        lines.append(f"on the story's critical path without need: {runtime} ({seen['model_ms']:.0f} ms of model time, "
                     f"{seen['turns']} of {result['turns']} turns): the story reads none of its output through its inputs")
    if result["jobs_left_open"]:
        lines.append(f"{result['jobs_left_open']} detached jobs were still open after {DRAIN_S:.0f} s: their calls are not counted")
    if not result["unread_on_story_path"]:
        lines.append("no agent sits on the story's critical path without the story reading its output")
    return "\n\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--ttft-ms", type=float, default=400.0)
    parser.add_argument("--tokens-per-s", type=float, default=50.0)
    args = parser.parse_args(argv)
    if args.turns < 1 or args.warmup < 0:
        parser.error("--turns must be at least 1 and --warmup at least 0")
    result = asyncio.run(measure(args.turns, args.warmup, args.ttft_ms, args.tokens_per_s))
    print(f"{result['turns']} turns in the demo world ({len(result['plugins'])} plugins), five processes, "
          f"{result['cores']} cores, load {result['load_average']:.1f}:")
    print(render(result))
    write_result("model_latency", result)
    return result


if __name__ == "__main__":
    main()
