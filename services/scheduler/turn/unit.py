"""One runtime of a turn, start to finish: PreRuntime, inputs, guard, the handler or agent loop,
PostRuntime and the output contract. The decisions are unit_outcome.py's; this is their I/O."""

from __future__ import annotations

import time

import grpc

from services.scheduler import outages
from services.scheduler.agent.execution import AgentExecution
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.outcome import OutcomeStatus, RuntimeOutcome
from services.scheduler.function.execution import FunctionExecution
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.payloads import PostRuntime, PreRuntime
from services.scheduler.hooks.payloads.base import runtime_manifest
from services.scheduler.hooks.replies import PostRuntimeReply
from services.scheduler.kinds import RuntimeType
from services.scheduler.turn.activity import RUNNING_UNIT
from services.scheduler.turn.state import TurnState
from services.scheduler.turn.stream import TurnStream
from services.scheduler.turn.unit_outcome import (
    apply_post_runtime,
    check_unit_output,
    gate_outcome,
    may_guard,
    post_runtime_result,
    reads_operations,
    without_discarded_writes,
)
from shared.ids import new_id
from shared.manifest import CompiledManifest
from shared.telemetry.tracing import traced


class UnitRunner:
    def __init__(self, hooks: HookBus, functions: FunctionExecution, agents: AgentExecution) -> None:
        self._hooks = hooks
        self._functions = functions
        self._agents = agents

    @traced("covel.runtime", lambda self, runtime, *_: {"covel.runtime_id": runtime.runtime_id, "covel.runtime.type": runtime.type},
            lambda outcome: {"covel.runtime.status": outcome.status})
    async def run(self, runtime: Runtime, scope: ExecutionScope, run: TurnState, stream: TurnStream,
                  manifest: CompiledManifest) -> RuntimeOutcome:
        # Its tool and service calls, nested calls' and subagents' included, are noted against it.
        unit = RUNNING_UNIT.set((run.activity, runtime.runtime_id))
        try:
            return await self._run(runtime, scope, run, stream, manifest)
        finally:
            RUNNING_UNIT.reset(unit)

    async def _run(self, runtime: Runtime, scope: ExecutionScope, run: TurnState, stream: TurnStream,
                   manifest: CompiledManifest) -> RuntimeOutcome:
        started = time.monotonic()
        # Its run id is the execution id every hook of this run (nested and subagent runs' too) is told of.
        run_id = new_id()
        scope = scope.execution(run_id)
        await stream.runtime_started(runtime.runtime_id, runtime.stage)
        with outages.watching() as seen:
            outcome = await self._execute(runtime, scope, run, stream, manifest)
        outcome.run_id = run_id
        # Failed after a peer outage: the failure may pass (outages.py).
        outcome.retryable = outcome.status == OutcomeStatus.FAILED and bool(seen)
        status_before_hooks = outcome.status
        outcome = await self._post_runtime(runtime, scope, outcome, stream, resumed=run.resume is not None)
        if outcome.status != status_before_hooks:
            run.rewritten.add(runtime.runtime_id)  # a setup runtime a hook turned into a success is not complete
        outcome = without_discarded_writes(check_unit_output(runtime, manifest, run.shared.packages[runtime.plugin_id], outcome))
        await stream.runtime_finished(runtime.runtime_id, outcome.status, outcome.reason, int((time.monotonic() - started) * 1000))
        return outcome

    async def _execute(self, runtime: Runtime, scope: ExecutionScope, run: TurnState, stream: TurnStream,
                       manifest: CompiledManifest) -> RuntimeOutcome:
        """PreRuntime, the inputs (bound once, for the guard and the runtime), the guard, then the runtime itself.
        A resumed agent goes on where it stopped: PreRuntime, its inputs and its guard were its first run's."""
        if run.resume is not None:
            return await self._resumed(runtime, scope, run, stream, manifest)
        given = run.runtime_scope(runtime, manifest, scope)
        pre = await self._hooks.dispatch(PreRuntime(runtime.runtime_id, runtime.stage, run.player_message, runtime_manifest(runtime),
                                                    given.player_actions, given.origin, given.activation),
                                         scope, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id)
        await stream.record(pre.trace)
        inputs, input_gate = await self._functions.bind(runtime, scope, given, manifest)
        run.bound_inputs[runtime.runtime_id] = inputs  # a dimension maintainer's receipt keeps them (turn/settlements.py)
        if reads_operations(manifest):
            run.operation_reads[runtime.runtime_id] = run.operation_units()
        guarded = None
        if may_guard(pre.aborted, input_gate, manifest):
            guarded = await self._functions.run_guard(runtime, scope, given, run.player_message, manifest, inputs)
        skipped = gate_outcome(pre.aborted, pre.reason, input_gate)
        if skipped is not None:
            return skipped
        if guarded is not None:
            outcome = guarded
        elif runtime.type == RuntimeType.FUNCTION:
            outcome = await self._functions.run_function(runtime, scope, given, run.player_message, manifest, inputs)
        else:
            try:
                outcome = await self._agents.run(runtime, scope, given, run.player_message, manifest, inputs)
            except grpc.aio.AioRpcError as error:
                outages.note("gateway", error)
                outcome = RuntimeOutcome(OutcomeStatus.FAILED, f"model call failed: {error.code().name}: {error.details()}")
        await stream.record(outcome.trace)  # a function's ctx.tools calls' PreToolUse/PostToolUse, an agent's hooks
        return outcome

    async def _resumed(self, runtime: Runtime, scope: ExecutionScope, run: TurnState, stream: TurnStream, manifest: CompiledManifest) -> RuntimeOutcome:
        """A suspended runtime answered: an agent goes on from its saved conversation; a function's handler runs again
        on its first run's inputs (the answer in ctx.activation["resume"]) and, if it succeeds, what it held commits too."""
        resume = run.resume
        assert resume is not None
        given = run.runtime_scope(runtime, manifest, scope)
        if runtime.type != RuntimeType.FUNCTION:
            return await self._agents.run(runtime, scope, given, run.player_message, manifest, None, resume=resume)
        outcome = await self._functions.run_function(runtime, scope, given, run.player_message, manifest, resume.state.get("inputs") or {})
        if outcome.status == OutcomeStatus.SUCCESS:
            outcome.writes = [*(resume.state.get("writes") or []), *outcome.writes]
            outcome.events = [*(resume.state.get("events") or []), *outcome.events]
            outcome.foreign_writes = [*(resume.state.get("foreign") or []), *outcome.foreign_writes]
        return outcome

    async def _post_runtime(self, runtime: Runtime, scope: ExecutionScope, outcome: RuntimeOutcome, stream: TurnStream,
                            resumed: bool = False) -> RuntimeOutcome:
        """PostRuntime hooks may rewrite the result; the kernel keeps identity and writes (runtime_result.py)."""
        if outcome.status == OutcomeStatus.SUSPENDED:
            return outcome  # PostRuntime fires once, when the resumed run really ends (spec: 挂起时不触发)
        original = post_runtime_result(runtime, outcome, scope.turn_id)
        post = await self._hooks.dispatch(PostRuntime(original, resumed), scope, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id)
        await stream.record(post.trace)
        return apply_post_runtime(runtime, outcome, original, PostRuntimeReply.of(post).result)

