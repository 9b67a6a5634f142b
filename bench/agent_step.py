"""Agent loop overhead per step (issue #8): one step = PreStep, PreLLMCall, the model call,
PostLLMResponse, PreToolUse, the tool, PostToolUse; the model answers at once.

`python -m bench.agent_step`:

- in process: services/scheduler/agent/loop.run_agent with an in-memory gateway (a
  precomputed tool call each step, text once tools are off) and an in-memory hook bus (the
  tool answers a fixed result), once with no loop hook listeners and once with one no-op
  handler on each of the five loop events. This is the loop's own cost: context, payloads,
  tool batching, request building, no serialisation or RPC.
- through the services: five processes, a generated plugin whose system agent
  (`toolChoice: required`, one read-only plugin tool run by the hooks service) takes
  maxSteps steps with the offline scripted model; the plugin's no-op loop hooks are on or off.

Each figure is a slope: (time with N steps - time with 1 step) / (N - 1), so the turn's
and the execution's fixed costs cancel out. Writes bench/results/agent_step.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import create_session, play_turn, plugin_dirs_env, running_services, table, write_observer_plugin, write_result
from covel.gateway.v1 import gateway_pb2
from covel.scheduler.v1 import resources_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2
from services.registry.package_loader import load_package
from services.registry.proto_mapping import package_to_proto
from services.scheduler.agent.loop import run_agent
from services.scheduler.catalogue import Package, Runtime
from services.scheduler.hooks.bus import ExecutionScope, HookOutcome
from shared.grpc_client import open_channel
from shared.structs import to_struct

LOOP_EVENTS = ("PreStep", "PreLLMCall", "PostLLMResponse", "PreToolUse", "PostToolUse")
TOOL = "lookup"
TOOL_SCHEMA = {"type": "object", "required": ["word"], "properties": {"word": {"type": "string"}}}
PLUGIN = "bench-agent"


def _compiled_agent(steps: int) -> Runtime:
    """The benchmark agent of `steps` steps as the registry compiles it (the package write_plugins writes)."""
    with tempfile.TemporaryDirectory() as folder:
        write_plugins(Path(folder), (steps,))
        loaded = load_package(Path(folder) / f"{PLUGIN}-{steps}", source="community")
    return Package.from_proto(package_to_proto(loaded)).runtimes[0]


# -- in process ---------------------------------------------------------------------------------

class InstantGateway:
    """The model: a new tool call each step (new arguments, so no loop detection), text when offered no tools."""

    def __init__(self) -> None:
        self.calls = 0

    async def GenerateOnce(self, request, timeout=None, wait_for_ready=None) -> gateway_pb2.GenerateResponse:
        self.calls += 1
        if not request.tools:
            return gateway_pb2.GenerateResponse(
                message=gateway_pb2.ChatMessage(role="assistant", content="Enough looked up."),
                finish_reason=gateway_pb2.FINISH_REASON_STOP)
        call = gateway_pb2.ToolCall(id=f"call-{self.calls}", name=TOOL, arguments=json.dumps({"word": f"w{self.calls}"}))
        return gateway_pb2.GenerateResponse(message=gateway_pb2.ChatMessage(role="assistant", tool_calls=[call]),
                                            finish_reason=gateway_pb2.FINISH_REASON_TOOL_CALLS)


class InMemoryHookBus:
    """HookBus's interface; `handlers` per event are plain functions, the tool answers at once."""

    def __init__(self, with_handlers: bool) -> None:
        self.handlers = {event: [lambda payload: None] for event in LOOP_EVENTS} if with_handlers else {}
        self.tool_definitions = {TOOL: gateway_pb2.ToolDefinition(name=TOOL, description="Look a word up.",
                                                                   parameters=to_struct(TOOL_SCHEMA))}
        self.dispatched = 0

    async def dispatch(self, record, scope, *, plugin_id="", runtime_id="", timeout_s=60.0) -> HookOutcome:
        payload = record.wire()
        handlers = self.handlers.get(record.event)
        if not handlers:
            return HookOutcome(False, "", payload, sent=payload)
        merged = dict(payload)
        for handler in handlers:
            self.dispatched += 1
            merged.update(handler(merged) or {})
        return HookOutcome(False, "", merged, sent=payload)

    async def tools(self, plugin_id):
        return self.tool_definitions

    def read_only(self, plugin_id, name) -> bool:
        return name == TOOL

    async def call_tool(self, scope, plugin_id, runtime_id, call, writes=None) -> str:
        return json.dumps({"ok": True, "data": {"word": json.loads(call["arguments"])["word"], "meaning": "something"}})


async def _run_in_process(steps: int, with_handlers: bool) -> float:
    runtime = _compiled_agent(steps)
    scope = ExecutionScope(store_pb2.Session(id="s-1", locale="en", active_plugins=[PLUGIN]), "t-1", 1)
    hooks = InMemoryHookBus(with_handlers)

    async def no_stream(piece) -> None:
        return None

    started = time.perf_counter()
    outcome = await run_agent(runtime=runtime, scope=scope, history=[], player_message="Look around.",
                              gateway=InstantGateway(), hooks=hooks, on_narrative=no_stream, history_max_turns=5)
    elapsed = time.perf_counter() - started
    if outcome.status != "success" or outcome.stop_reason != "max-steps":
        raise RuntimeError(f"the in-process agent did not run its {steps} steps: {outcome.status} {outcome.reason}")
    if with_handlers and hooks.dispatched != steps * len(LOOP_EVENTS) + 2:  # the finalizer: PreLLMCall, PostLLMResponse
        raise RuntimeError(f"expected {steps * len(LOOP_EVENTS) + 2} loop hook calls, got {hooks.dispatched}")
    return elapsed * 1e6


async def in_process(steps: int, repeats: int) -> list[dict]:
    rows = []
    for with_handlers in (False, True):
        one = statistics.median([await _run_in_process(1, with_handlers) for _ in range(repeats)])
        many = statistics.median([await _run_in_process(steps, with_handlers) for _ in range(repeats)])
        rows.append({"where": "in process", "loop_hooks": "5 no-op handlers" if with_handlers else "none",
                     "steps": steps, "execution_1_step_ms": one / 1000, "execution_n_steps_ms": many / 1000,
                     "per_step_ms": (many - one) / (steps - 1) / 1000})
    return rows


# -- through the services -----------------------------------------------------------------------

def write_plugins(root: Path, step_counts: tuple[int, ...]) -> None:
    """bench-agent-<n>: one system agent of n steps and the tool; bench-agent-hooks: no-op loop hooks."""
    for steps in step_counts:
        package = root / f"{PLUGIN}-{steps}"
        (package / "runtimes" / "stepper").mkdir(parents=True)
        (package / "server").mkdir()
        (package / "PLUGIN.md").write_text(
            f"---\nversion: 0.1.0\ndescription: benchmark agent of {steps} steps\ncontributes:\n  tools: [{TOOL}]\n---\n")
        (package / "server" / "index.py").write_text(
            "def register(covel):\n"
            f"    covel.register_tool({TOOL!r}, lookup, description='Look a word up.', read_only=True,\n"
            f"                        parameters={TOOL_SCHEMA!r})\n\n\n"
            "def lookup(ctx, args):\n    return {'word': args['word'], 'meaning': 'something'}\n")
        (package / "runtimes" / "stepper" / "RUNTIME.md").write_text(
            "---\nschedule:\n  stage: post-turn\nagent:\n  toolChoice: required\n  tools:\n"
            f"    plugin: [{TOOL}]\n  loop:\n    maxSteps: {steps}\n---\nLook things up until you know enough.\n")
    write_observer_plugin(root / f"{PLUGIN}-hooks", "no-op loop hooks", LOOP_EVENTS)


async def _turns(stub, steps: int, with_hooks: bool, turns: int) -> float:
    plugins = [f"{PLUGIN}-{steps}", *([f"{PLUGIN}-hooks"] if with_hooks else [])]
    session = await create_session(stub, requested_plugins=plugins, approved_plugins=plugins, excluded_plugins=["narrator"])
    timings = []
    for index in range(turns + 1):
        elapsed, _, turn = await play_turn(stub, session.id, f"step {index}")
        result = next(r for r in turn.runtime_results if r.runtime_id == f"{PLUGIN}-{steps}/stepper")
        if result.status != resources_pb2.RUNTIME_STATUS_SUCCESS:
            raise RuntimeError(f"the {steps}-step agent failed: {result.reason}")
        if with_hooks and len([e for e in turn.hook_trace if e.event == "PreStep"]) != steps:
            raise RuntimeError("the loop hooks did not run on every step")
        if index:
            timings.append(elapsed)
    return statistics.median(timings)


async def through_services(steps: int, turns: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as folder:
        write_plugins(Path(folder), (1, steps))
        async with running_services(extra_env=plugin_dirs_env(Path(folder))) as group:
            async with open_channel(group.addrs["scheduler"]) as channel:
                stub = scheduler_pb2_grpc.SchedulerStub(channel)
                rows = []
                for with_hooks in (False, True):
                    one = await _turns(stub, 1, with_hooks, turns)
                    many = await _turns(stub, steps, with_hooks, turns)
                    rows.append({"where": "five services", "loop_hooks": "5 no-op handlers (hooks service)" if with_hooks else "none",
                                 "steps": steps, "execution_1_step_ms": one, "execution_n_steps_ms": many,
                                 "per_step_ms": (many - one) / (steps - 1)})
    return rows


def render(rows: list[dict]) -> str:
    return table(
        ["where", "loop hooks", "N", "1 step ms", "N steps ms", "per step ms", "per step µs"],
        [[r["where"], r["loop_hooks"], r["steps"], r["execution_1_step_ms"], r["execution_n_steps_ms"], r["per_step_ms"],
          f"{r['per_step_ms'] * 1000:.0f}"] for r in rows],
    )


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20, help="N: steps of the long execution (the short one has 1)")
    parser.add_argument("--repeats", type=int, default=30, help="in-process executions per measurement (median)")
    parser.add_argument("--turns", type=int, default=8, help="turns per measurement through the services (median)")
    args = parser.parse_args(argv)
    rows = asyncio.run(in_process(args.steps, args.repeats)) + asyncio.run(through_services(args.steps, args.turns))
    write_result("agent_step", rows)
    print("agent loop overhead per step (tool call each step, model answers at once); 'ms' columns of the services rows are whole turns:")
    print(render(rows))
    return rows


if __name__ == "__main__":
    main()
