"""One stage whose runtimes each start as soon as their own upstream finished, not a layer at a time
(spec: 同一阶段里的先后由依赖边决定): a runtime waits for its dependencies and its plugin's runtimes of
earlier layers (dependency_graph.start_after), never for a slow sibling of another plugin.

What a layer promised stays: a runtime's gates and inputs see its upstream's results; its plugin data and
ctx.world see the writes of the runtimes it started after, directly or not, in commit order, fixed as it
starts (TurnState.visible); its kernel inputs list what finished before it (spec: 还没结束的 runtime 不会被
预测为成功). The turn's record and its commit keep the plan's order (per layer: the gated runtimes, then
those that ran), whatever order they finish in."""

from __future__ import annotations

import asyncio

from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.outcome import OutcomeStatus, RuntimeOutcome
from services.scheduler.hooks.bus import ExecutionScope
from services.scheduler.turn.dependency_graph import StagePlan, gate_reason, start_after, upstream_closure
from services.scheduler.turn.recording import file_outcome, note_outcome
from services.scheduler.turn.schedule import needed_upstream
from services.scheduler.turn.state import TurnState
from services.scheduler.turn.stream import TurnStream
from services.scheduler.turn.unit import UnitRunner
from shared.ids import new_id


class StageFlow:
    """One run of one stage's plan (its cycles already skipped)."""

    def __init__(
        self,
        plan: StagePlan,
        by_id: dict[str, Runtime],
        units: UnitRunner,
        run: TurnState,
        scope: ExecutionScope,
        stream: TurnStream,
    ) -> None:
        self._plan, self._by_id, self._units = plan, by_id, units
        self._run, self._scope, self._stream = run, scope, stream
        order = [runtime_id for layer in plan.layers for runtime_id in layer]
        self._position = {runtime_id: index for index, runtime_id in enumerate(order)}
        waits = start_after(plan, {runtime_id: by_id[runtime_id].plugin_id for runtime_id in order})
        self._closure = upstream_closure(waits, order)
        self._pending = {runtime_id: set(upstream) for runtime_id, upstream in waits.items()}
        self._dependents: dict[str, list[str]] = {runtime_id: [] for runtime_id in order}
        for runtime_id in order:
            for upstream in waits[runtime_id]:
                self._dependents[upstream].append(runtime_id)
        # What the stage's runtimes see of the turn before it (earlier stages, event layers, compaction).
        self._before = list(run.shared.proposals)
        # runtime id -> its outcome, whether it was gated (skipped unrun), and what it commits with.
        self._finished: dict[str, tuple[RuntimeOutcome, bool, list[store_pb2.Proposal]]] = {}

    async def run(self) -> None:
        tasks: dict[asyncio.Task[tuple[RuntimeOutcome, bool]], str] = {}
        try:
            self._start([runtime_id for runtime_id in self._position if not self._pending[runtime_id]], tasks)
            while tasks:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                ready: list[str] = []
                for task in sorted(done, key=lambda t: self._position[tasks[t]]):
                    runtime_id = tasks.pop(task)
                    ready.extend(self._finish(runtime_id, *task.result()))
                self._start(sorted(ready, key=self._position.__getitem__), tasks)
        finally:
            # A unit that raised, or the turn cancelled: the others stop with it.
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks)
        self._file()

    def _start(self, ready: list[str], tasks: dict[asyncio.Task[tuple[RuntimeOutcome, bool]], str]) -> None:
        """Each ready runtime, in plan order: skipped if its gates say so now that its upstream finished, else run."""
        run = self._run
        for runtime_id in ready:
            gated = gate_reason(self._plan, runtime_id, run.statuses, frozenset(run.satisfied))
            if gated:
                tasks[asyncio.create_task(self._skip(runtime_id, gated))] = runtime_id
                continue
            run.needs[runtime_id] = needed_upstream(self._plan, runtime_id, run.statuses)
            run.visible[runtime_id] = [
                *self._before,
                *(
                    proposal
                    for upstream in sorted(self._closure[runtime_id], key=self._position.__getitem__)
                    for proposal in self._finished[upstream][2]
                ),
            ]
            tasks[asyncio.create_task(self._unit(runtime_id))] = runtime_id

    async def _unit(self, runtime_id: str) -> tuple[RuntimeOutcome, bool]:
        runtime = self._by_id[runtime_id]
        outcome = await self._units.run(runtime, self._scope, self._run, self._stream, self._run.shared.manifests[runtime_id])
        return outcome, False

    async def _skip(self, runtime_id: str, reason: str) -> tuple[RuntimeOutcome, bool]:
        await self._stream.runtime_finished(runtime_id, "skipped", reason)
        return RuntimeOutcome(OutcomeStatus.SKIPPED, reason, run_id=new_id()), True

    def _finish(self, runtime_id: str, outcome: RuntimeOutcome, gated: bool) -> list[str]:
        """Note what its downstream reads at once; the runtimes it made ready."""
        runtime = self._by_id[runtime_id]
        proposals = note_outcome(runtime, outcome, self._run, self._run.shared.manifests[runtime_id])
        self._finished[runtime_id] = (outcome, gated, proposals)
        self._run.visible.pop(runtime_id, None)
        ready = []
        for dependent in self._dependents[runtime_id]:
            self._pending[dependent].discard(runtime_id)
            if not self._pending[dependent]:
                ready.append(dependent)
        return ready

    def _file(self) -> None:
        """The stage's outcomes onto the turn's record in the plan's order: per layer, the gated, then those that ran."""
        for layer in self._plan.layers:
            for gated in (True, False):
                for runtime_id in layer:
                    outcome, was_gated, proposals = self._finished[runtime_id]
                    if was_gated == gated:
                        runtime = self._by_id[runtime_id]
                        file_outcome(
                            runtime, outcome, self._run, self._stream.turn, self._run.shared.manifests[runtime_id], proposals
                        )
