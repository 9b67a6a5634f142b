"""The turn's stages: each stage's dependency graph (each runtime once its own upstream finished, stage_flow.py;
layer by layer when one must run alone), the event chain after them, and the detached runtimes queued as jobs.
What runs when is schedule.py's; one runtime is unit.py's."""

from __future__ import annotations

import asyncio

from services.scheduler.catalogue import Runtime
from services.scheduler.execution.outcome import OutcomeStatus, RuntimeOutcome
from services.scheduler.function.execution import FunctionExecution
from services.scheduler.hooks.bus import ExecutionScope
from services.scheduler.turn.dependency_graph import Node, dependencies_of, gate_reason, parallel_safe, plan_stage
from services.scheduler.turn.detached_jobs import BACKGROUND_QUEUED, QUEUED, background_job, detached_job
from services.scheduler.turn.recording import output_contracts, record_outcome
from services.scheduler.turn.schedule import MAX_EVENT_LAYERS, needed_upstream, next_event_layer
from services.scheduler.turn.settle_wait import note_settling
from services.scheduler.turn.stage_flow import StageFlow
from services.scheduler.turn.state import TurnState
from services.scheduler.turn.stream import TurnStream
from services.scheduler.turn.unit import UnitRunner
from shared.ids import new_id
from shared.telemetry import tracing


class StageRunner:
    def __init__(self, units: UnitRunner, functions: FunctionExecution) -> None:
        self._units = units
        self._functions = functions

    async def run_stage(self, in_stage: list, run: TurnState, scope: ExecutionScope, stream: TurnStream) -> None:
        """One stage: each runtime once its upstream finished; with a runtime that must run alone, layer by layer
        (a layer's runtimes run concurrently)."""
        manifests = run.shared.manifests
        by_id = {runtime.runtime_id: runtime for runtime in in_stage}
        nodes = [Node(runtime.runtime_id, provides=output_contracts(manifests[runtime.runtime_id]),
                      dependencies=dependencies_of(manifests[runtime.runtime_id])) for runtime in in_stage]
        plan = plan_stage(nodes, frozenset(run.satisfied))
        for runtime_id, reason in plan.skipped.items():
            await self.skip(by_id[runtime_id], reason, run, stream)
        if all(parallel_safe(manifests[runtime.runtime_id]) for runtime in in_stage):
            # Each runtime starts once its own upstream finished (stage_flow.py).
            await StageFlow(plan, by_id, self._units, run, scope, stream).run()
            return
        # A runtime that must run alone (effects.parallelSafe: false): the stage goes a layer at a time.
        for layer in plan.layers:
            ready = []
            for runtime_id in layer:
                gated = gate_reason(plan, runtime_id, run.statuses, frozenset(run.satisfied))
                if gated:
                    await self.skip(by_id[runtime_id], gated, run, stream)
                else:
                    ready.append(by_id[runtime_id])
            for runtime in ready:
                run.needs[runtime.runtime_id] = needed_upstream(plan, runtime.runtime_id, run.statuses)
            results = await self._run_layer(ready, run, scope, stream)
            for runtime, outcome in zip(ready, results, strict=True):
                record_outcome(runtime, outcome, run, stream.turn, manifests[runtime.runtime_id])

    async def _run_layer(self, ready: list, run: TurnState, scope: ExecutionScope, stream: TurnStream) -> list[RuntimeOutcome]:
        """A layer's runtimes together, but those whose effects.parallelSafe is false one at a time after them, each alone."""
        manifests = run.shared.manifests
        together = [runtime for runtime in ready if parallel_safe(manifests[runtime.runtime_id])]
        outcomes = dict(zip((r.runtime_id for r in together), await asyncio.gather(
            *(self._units.run(runtime, scope, run, stream, manifests[runtime.runtime_id]) for runtime in together)), strict=True))
        for runtime in ready:
            if runtime.runtime_id not in outcomes:
                outcomes[runtime.runtime_id] = await self._units.run(runtime, scope, run, stream, manifests[runtime.runtime_id])
        return [outcomes[runtime.runtime_id] for runtime in ready]

    async def run_event_chain(self, runtimes: list, run: TurnState, scope: ExecutionScope, stream: TurnStream) -> None:
        """Event runtimes follow topics that successful producers emitted this turn, one layer after another."""
        followers = {r.runtime_id: r for r in runtimes if run.shared.manifests[r.runtime_id].schedule.trigger.topics}
        seen = 0
        for _ in range(MAX_EVENT_LAYERS):
            fresh = run.emitted[seen:]
            seen = len(run.emitted)
            layer = next_event_layer(followers, run.shared.manifests, fresh, run.outcomes)
            if not layer:
                return
            in_turn = []
            for runtime_id, matched in layer.items():
                if run.shared.manifests[runtime_id].schedule.background is True:
                    # schedule.background: a job outside the graph, run after the turn commits with its events.
                    run.detached_jobs.append(background_job(followers[runtime_id], {"events": matched}, stream.turn.id,
                                                            tracing.trace_context()))
                    await self.skip(followers[runtime_id], BACKGROUND_QUEUED, run, stream)
                    continue
                run.activations[runtime_id] = {"events": matched}
                in_turn.append(followers[runtime_id])
            await self.run_stage(in_turn, run, scope, stream)

    async def queue_detached(self, detached: list, run: TurnState, scope: ExecutionScope, stream: TurnStream) -> None:
        """Detached runtimes do not run in the turn: each becomes a job the commit enqueues (only if the
        turn commits), with its inputs bound now, from the finished turn (the source snapshot)."""
        for runtime in detached:
            manifest = run.shared.manifests[runtime.runtime_id]
            inputs, gate = await self._functions.bind(runtime, scope, run.runtime_scope(runtime, manifest, scope), manifest)
            if gate:
                await self.skip(runtime, gate, run, stream)
                continue
            options = manifest.schedule.detached
            if options is False:
                continue  # only detached runtimes are queued
            run.detached_jobs.append(detached_job(runtime, options, manifest, inputs, stream.turn.id, tracing.trace_context()))
            if options.settle:
                note_settling(stream.turn.session_id)
            await self.skip(runtime, QUEUED, run, stream)

    async def skip(self, runtime: Runtime, reason: str, run: TurnState, stream: TurnStream) -> None:
        await stream.runtime_finished(runtime.runtime_id, "skipped", reason)
        record_outcome(runtime, RuntimeOutcome(OutcomeStatus.SKIPPED, reason, run_id=new_id()), run, stream.turn, run.shared.manifests[runtime.runtime_id])
