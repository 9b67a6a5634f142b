"""One turn: lease, plugins, hooks, runtimes stage by stage, one commit.

The turn runs as its own task: a client that disconnects mid-stream does not stop the
commit, so a turn is always either committed whole or not at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import grpc
from google.protobuf import timestamp_pb2
from opentelemetry.trace import Span
from structlog.contextvars import bind_contextvars as bind_turn_to_logs

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from covel.scheduler.v1 import scheduler_pb2
from covel.store.v1 import store_pb2
from services.scheduler.agent.execution import AgentExecution
from services.scheduler.agent.loop import RuntimeOutcome, is_story_runtime
from services.scheduler.agent.story_stream import StreamedPiece
from services.scheduler.catalogue import Package
from services.scheduler.function.dataset_policies import dataset_policies
from services.scheduler.function.execution import FunctionExecution
from services.scheduler.function.plugin_data import PluginDataViews
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.rules import filter_schedule
from services.scheduler.peers import Peers
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.settings import SchedulerSettings
from services.scheduler.turn.compaction import compact_history
from services.scheduler.turn.concealment import conceal_event
from services.scheduler.turn.dependency_graph import Node, dependencies_of, gate_reason, plan_stage
from services.scheduler.turn.idempotent_retry import check_retry
from services.scheduler.turn.output_contracts import SchemaUnavailable, check_output, output_schemas
from services.scheduler.turn.player_input import action_dict, render_player_message
from services.scheduler.turn.runtime_result import apply_replaced_result
from services.scheduler.turn.selection import (
    STAGES,
    TriggerHistory,
    confirmed_plugins_request,
    needs_history,
    scheduled_this_turn,
    setup_due,
    setup_progress,
    sitting_out,
    unavailable_reason,
)
from services.scheduler.turn.speakers import resolve_speakers
from services.scheduler.turn.state import RUNNING_UNIT, RecordingHooks, RunningTurn, TurnState
from services.scheduler.turn.story_output import EmptyStory, normalize_story
from shared.errors import failed_precondition, not_found
from shared.ids import new_id
from shared.logs import get_logger
from shared.manifest import CompiledManifest
from shared.structs import from_struct, to_struct
from shared.telemetry import metrics, tracing
from shared.telemetry.tracing import traced

Emit = Callable[[scheduler_pb2.TurnEvent], Awaitable[None]]
log = get_logger(component="turn_runner")


def settings_with_defaults(session: store_pb2.Session, packages: Iterable[Package]) -> store_pb2.Session | None:
    """A copy of the session whose plugin_settings carry each package's contributes.settings
    defaults under the values the session set; None when no package declares a default it lacks."""
    filled: dict[str, dict] = {}
    for package in packages:
        declared = package.settings_by_key() or {}
        defaults = {key: item.default for key, item in declared.items() if item.default is not None}
        given = from_struct(session.plugin_settings[package.id]) if package.id in session.plugin_settings else {}
        if any(key not in given for key in defaults):
            filled[package.id] = {**defaults, **given}
    if not filled:
        return None
    copy = store_pb2.Session()
    copy.CopyFrom(session)
    for plugin_id, values in filled.items():
        copy.plugin_settings[plugin_id].CopyFrom(to_struct(values))
    return copy


def _now() -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.GetCurrentTime()
    return stamp


@dataclass
class TurnRequest:
    session_id: str
    actions: list[common_pb2.PlayerAction]
    idempotency_key: str
    origin: str = "player"
    # RunManual: the one runtime this execution runs, and what the caller hands it.
    manual_runtime_id: str = ""
    activation: dict | None = None
    # A detached job a worker claimed: this execution runs its runtime on the source turn's snapshot.
    detached_job: store_pb2.DetachedJob | None = None
    # A submit's turns (its own and its continuations): Cancel stops them, even one still taking its lease.
    stop: AdvanceStop | None = None


@dataclass(eq=False)
class AdvanceStop:
    """Set by Cancel while a submit runs: its turn is cancelled and its auto-advance chain starts no more turns."""

    reason: str = ""

    def set(self, reason: str) -> None:
        self.reason = self.reason or reason

    def is_set(self) -> bool:
        return bool(self.reason)


class TurnRunner:
    def __init__(self, peers: Peers, plugins: PluginCache, hooks: HookBus, settings: SchedulerSettings) -> None:
        # Tool and service calls are noted per turn for turn-digest@1 and operations@1.
        # RecordingHooks forwards everything else to the bus (__getattr__), which the checker cannot see.
        hooks = cast(HookBus, RecordingHooks(hooks))
        self._peers = peers
        self._plugins = plugins
        self._hooks = hooks
        self._settings = settings
        # session id -> the turn running on this scheduler, for Cancel.
        self._running: dict[str, RunningTurn] = {}
        # session id -> what the player said while its turn runs; story agents with steering read it.
        self._interjections: dict[str, list[str]] = {}
        # Agents first: a handler's ctx.agents and nested agent runs go through them.
        plugin_data = PluginDataViews(peers.store)
        self._agents = AgentExecution(peers, hooks, plugin_data, settings.scheduler_history_max_turns, self._take_interjections)
        self._functions = FunctionExecution(peers.store, self._running.get, plugin_data, self._agents, hooks, peers.gateway,
                                            stall_resend_min_s=settings.scheduler_stall_resend_min_ms / 1000)

    def running_turn(self, session_id: str) -> str:
        """The id of the session's turn running on this scheduler, or ""."""
        running = self._running.get(session_id)
        return running.turn_id if running is not None else ""

    def interject(self, session_id: str, text: str) -> str:
        """Queue a player interjection for the turn running here; its turn id, or "" when none runs here."""
        running = self._running.get(session_id)
        if running is None:
            return ""
        self._interjections.setdefault(session_id, []).append(text)
        return running.turn_id

    def _take_interjections(self, session_id: str) -> list[str]:
        return self._interjections.pop(session_id, [])

    async def run_observed(self, request: TurnRequest, emit: Emit, span: Span | None = None) -> store_pb2.Turn:
        """`run` in its covel.turn span, the parent of every hop it makes (a detached job's worker passes
        the span it opened as the root of the job's trace), with its latency metric, its turn.finished
        line and the session id on every log line of the turn's task (`run` adds the turn id)."""
        bind_turn_to_logs(session_id=request.session_id)
        started = time.perf_counter()
        status = "error"
        attributes = {"covel.session_id": request.session_id, "covel.turn.origin": request.origin}
        with contextlib.nullcontext(span) if span is not None else tracing.span("covel.turn", attributes) as span:
            try:
                turn = await self.run(request, emit)
                status = store_pb2.TurnStatus.Name(turn.status).removeprefix("TURN_STATUS_").lower()
                span.set_attributes({"covel.turn_id": turn.id, "covel.turn.status": status, "covel.logical_turn": turn.logical_turn})
            finally:
                elapsed = time.perf_counter() - started
                metrics.record_turn(request.origin, status, elapsed)
        log.info("turn.finished", turn_id=turn.id, logical_turn=turn.logical_turn, status=status, duration_ms=round(elapsed * 1000, 1))
        return turn

    async def run(self, request: TurnRequest, emit: Emit) -> store_pb2.Turn:
        lease_reply = await self._peers.store.AcquireTurnLease(
            store_pb2.AcquireTurnLeaseRequest(
                session_id=request.session_id,
                holder=self._settings.scheduler_instance_id,
                ttl_ms=self._settings.scheduler_lease_ttl_ms,
                idempotency_key=request.idempotency_key,
                wait_ms=self._settings.scheduler_lease_wait_ms,
                origin=request.origin,
            ),
            timeout=self._settings.scheduler_lease_wait_ms / 1000 + 10,  # per call: the lease wait is a setting
        )
        if lease_reply.WhichOneof("result") == "existing_turn":
            # A retried submit: answer with the first turn's result, run nothing (if it is the same request).
            check_retry(lease_reply.existing_turn, request)
            return lease_reply.existing_turn
        lease = lease_reply.lease
        session = lease_reply.session
        turn = store_pb2.Turn(
            id=lease.turn_id,
            session_id=session.id,
            logical_turn=lease.logical_turn,
            idempotency_key=request.idempotency_key,
            actions=request.actions,
            player_message=render_player_message([a for a in request.actions if a.source != "system"]),
            origin=request.origin,
            started_at=_now(),
            trace_id=tracing.current_trace_id(),
            source_turn_id=request.detached_job.turn_id if request.detached_job is not None else "",
        )
        renewer = asyncio.create_task(self._keep_lease(lease))
        signals = asyncio.create_task(self._take_signals(lease))
        work = asyncio.create_task(self._run_leased(request, lease, session, turn, emit))
        running = RunningTurn(turn.id, work)
        self._running[session.id] = running
        if request.stop is not None and request.stop.is_set():
            # Cancelled while this turn took its lease: it ends as cancelled, like one cancelled running.
            self.cancel(session.id, turn.id, request.stop.reason)
        try:
            return await asyncio.wait_for(work, self._settings.scheduler_turn_timeout_s)
        except (TimeoutError, asyncio.CancelledError) as error:
            current = asyncio.current_task()
            if isinstance(error, asyncio.CancelledError) and (not running.cancel_reason or (current and current.cancelling())):
                await self._release(lease)
                raise
            # Cancelled on request, or past the turn's time limit: record it, commit nothing of it.
            reason = running.cancel_reason or f"the turn passed its time limit ({self._settings.scheduler_turn_timeout_s:.0f} s)"
            turn.status = store_pb2.TURN_STATUS_FAILED
            turn.abort_reason = reason
            del turn.proposal_outcomes[:]
            return await self._commit(turn, lease, [], emit)
        except BaseException:
            await self._release(lease)
            raise
        finally:
            renewer.cancel()
            signals.cancel()
            if self._running.get(session.id) is running:
                del self._running[session.id]
                # Interjections nobody read before the turn ended do not leak into the next one.
                self._interjections.pop(session.id, None)

    def cancel(self, session_id: str, turn_id: str, reason: str) -> bool:
        """Cancel the session's running turn on this scheduler; its signals reach handlers and model calls."""
        running = self._running.get(session_id)
        if running is None or (turn_id and running.turn_id != turn_id) or running.task.done():
            return False
        running.cancel_reason = reason
        # Signals first, so handlers that catch the cancellation already see why.
        for signal in running.signals:
            signal.abort("cancelled")
        running.task.cancel()
        return True

    async def _release(self, lease: store_pb2.TurnLease) -> None:
        with contextlib.suppress(Exception):
            await self._peers.store.ReleaseTurnLease(
                store_pb2.ReleaseTurnLeaseRequest(session_id=lease.session_id, lease_id=lease.lease_id)
            )

    async def _take_signals(self, lease: store_pb2.TurnLease) -> None:
        """Cancel and Interject that reached another scheduler replica: the store keeps them for this
        lease's holder (SignalTurn), which takes them here and applies them as if asked directly."""
        while True:
            await asyncio.sleep(SIGNAL_POLL_S)
            try:
                reply = await self._peers.store.TakeTurnSignals(
                    store_pb2.TakeTurnSignalsRequest(session_id=lease.session_id, lease_id=lease.lease_id))
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.ABORTED:
                    return  # the lease is gone: so is the turn's chance to be signalled here
                log.warning("signals.take_failed", session_id=lease.session_id, code=error.code().name)
                continue
            for signal in reply.signals:
                if signal.kind == "cancel":
                    self.cancel(lease.session_id, signal.turn_id, signal.reason or "cancelled by request")
                elif signal.kind == "interject":
                    self.interject(lease.session_id, signal.text)

    async def _keep_lease(self, lease: store_pb2.TurnLease) -> None:
        interval = self._settings.scheduler_lease_ttl_ms / 3000
        while True:
            await asyncio.sleep(interval)
            try:
                await self._peers.store.RenewTurnLease(
                    store_pb2.RenewTurnLeaseRequest(
                        session_id=lease.session_id, lease_id=lease.lease_id, ttl_ms=self._settings.scheduler_lease_ttl_ms
                    ),
                    timeout=interval,  # per call: a renewal late by one interval is no use
                )
            except grpc.aio.AioRpcError as error:
                log.warning("lease.renew_failed", session_id=lease.session_id, code=error.code().name)

    async def _run_leased(  # noqa: C901 -- the turn's phases; issue 17 turns it into named phase functions
        self, request: TurnRequest, lease: store_pb2.TurnLease, session: store_pb2.Session, turn: store_pb2.Turn, emit: Emit
    ) -> store_pb2.Turn:
        started = time.monotonic()
        bind_turn_to_logs(turn_id=turn.id, logical_turn=lease.logical_turn)  # this task's log lines (telemetry)
        scope = ExecutionScope(session=session, turn_id=turn.id, logical_turn=lease.logical_turn)
        # The trust gate and the plugins' dependencies, before any plugin code runs (selection.py).
        confirmed = await self._peers.registry.ResolveConfirmedSessionPlugins(confirmed_plugins_request(session))
        for missing in confirmed.unavailable:
            # The session keeps its set; a plugin that cannot run now (removed, broken, not approved) sits this turn out.
            log.warning("plugin.unavailable", session_id=session.id, plugin_id=missing.plugin_id, code=missing.code, reason=missing.reason)
        packages = await self._plugins.packages(list(confirmed.runnable), timeout_s=10, generation=confirmed.generation)
        unavailable = {missing.plugin_id: missing for missing in confirmed.unavailable}
        installed = [plugin_id for plugin_id, missing in unavailable.items() if missing.code != "not-found"]
        sitting = await self._plugins.packages(installed, timeout_s=10) if installed else []
        if list(confirmed.runnable) != list(session.active_plugins):
            # This execution's frozen set: hooks of plugins that cannot run stay silent too.
            frozen = store_pb2.Session()
            frozen.CopyFrom(session)
            del frozen.active_plugins[:]
            frozen.active_plugins.extend(confirmed.runnable)
            scope = ExecutionScope(session=frozen, turn_id=turn.id, logical_turn=lease.logical_turn)
        with_defaults = settings_with_defaults(scope.session, packages)
        if with_defaults is not None:
            # Plugins read their settings' manifest defaults where the session set no value.
            scope = ExecutionScope(session=with_defaults, turn_id=turn.id, logical_turn=lease.logical_turn)
        runtimes = [runtime for package in packages if package.state == registry_pb2.PLUGIN_STATE_LOADED for runtime in package.runtimes]
        manifests = {runtime.runtime_id: runtime.manifest for runtime in runtimes}
        concealed = {rid for rid, manifest in manifests.items() if manifest.io.concealed}
        if concealed:
            emit = _concealing(emit, concealed)
        named = request.detached_job.runtime_id if request.detached_job is not None else request.manual_runtime_id
        gated = next((unavailable[p.id] for p in sitting for r in p.runtimes if r.runtime_id == named), None) if named else None
        if gated is not None:
            raise failed_precondition(f"runtime {named} does not run now: {unavailable_reason(gated)}")
        if request.detached_job is not None:
            manual = _detached_runtime(runtimes, request.detached_job.runtime_id)
        else:
            manual = _manual_runtime(runtimes, manifests, request.manual_runtime_id) if request.manual_runtime_id else None
        await emit(scheduler_pb2.TurnEvent(turn_started=scheduler_pb2.TurnStarted(turn_id=turn.id, logical_turn=turn.logical_turn)))
        if manual is None:
            for skipped in sitting_out(sitting, unavailable.values(), lease.logical_turn):
                turn.runtime_results.append(skipped)
                await emit(scheduler_pb2.TurnEvent(runtime_finished=scheduler_pb2.RuntimeFinished(
                    runtime_id=skipped.runtime_id, status="skipped", reason=skipped.reason)))

        async def record(trace: list[common_pb2.HookTraceEntry]) -> None:
            for entry in trace:
                turn.hook_trace.append(entry)
                await emit(scheduler_pb2.TurnEvent(hook=entry))

        turn_start = await self._hooks.dispatch(
            "TurnStart",
            scope,
            {
                "playerMessage": turn.player_message,
                "actions": [action_dict(action) for action in request.actions],
                "activeRuntimes": [runtime.runtime_id for runtime in runtimes],
            },
        )
        await record(turn_start.trace)
        if turn_start.aborted:
            turn.status = store_pb2.TURN_STATUS_ABORTED
            turn.abort_reason = turn_start.reason
            return await self._commit(turn, lease, [], emit)

        history = None
        if any(needs_history(manifest) for manifest in manifests.values()):
            turns = await self._peers.store.ListTurns(store_pb2.ListTurnsRequest(session_id=session.id))
            history = TriggerHistory.from_turns(turns.turns)
        if manual is not None:
            selected = [manual]
        else:
            selected = [
                runtime for runtime in runtimes
                if scheduled_this_turn(manifests[runtime.runtime_id], runtime.stage, lease.logical_turn, history)
            ]
            # -- setup: only setup runtimes not yet done for their plugin's version; a session in setup runs only them.
            versions = {package.id: package.version for package in packages}
            selected = [r for r in selected if r.stage != "setup"
                        or setup_due(from_struct(session.setup_runtimes[r.runtime_id]) if r.runtime_id in session.setup_runtimes else None,
                                     versions.get(r.plugin_id, ""))]
            if session.phase == "setup" and any(r.stage == "setup" for r in selected):
                selected = [r for r in selected if r.stage == "setup"]
            # -- end setup
        schedule = await self._hooks.dispatch(
            "PreSchedule", scope, {"triggered": [{"name": runtime.runtime_id, "stage": runtime.stage, "visibility": runtime.visibility,
                                                  "pluginId": runtime.plugin_id} for runtime in selected]}
        )
        await record(schedule.trace)
        by_name = {runtime.runtime_id: runtime for runtime in selected}
        selected = [by_name[name] for name in filter_schedule(list(by_name), schedule.payload.get("triggered"))]

        history_reply = await self._peers.store.ListMessages(store_pb2.ListMessagesRequest(session_id=session.id))
        messages = list(history_reply.messages)
        compacted = None
        if not request.manual_runtime_id and request.detached_job is None:
            compacted = await compact_history(
                hooks=self._hooks, scope=scope, packages={p.id: p for p in packages}, history=messages,
                budget_chars=self._settings.scheduler_history_budget_chars, keep_turns=self._settings.scheduler_history_keep_turns)
            await record(compacted.trace)
            messages = compacted.history
        run = TurnState(
            history=messages, packages={p.id: p for p in packages}, actions=list(request.actions),
            player_message=turn.player_message, origin=request.origin, activation=request.activation, manifests=manifests,
            player_input_id=new_id(), started_at=turn.started_at.ToJsonString(),
        )
        run.session = session

        async def send_progress(report: scheduler_pb2.RuntimeProgress) -> None:
            await emit(scheduler_pb2.TurnEvent(progress=report))

        run.send_progress = send_progress
        if compacted is not None and compacted.proposal is not None:
            run.proposals.append(compacted.proposal)
        if request.detached_job is not None:
            run.source_inputs = from_struct(request.detached_job.input).get("inputs") or {}
        if request.manual_runtime_id or request.detached_job is not None:
            if selected:
                await self._run_stage(selected, run, scope, turn, emit, record)
        else:
            detached = [runtime for runtime in selected if is_detached(manifests[runtime.runtime_id])]
            for stage in STAGES:
                in_stage = [runtime for runtime in selected if runtime.stage == stage and runtime not in detached]
                if in_stage:
                    await self._run_stage(in_stage, run, scope, turn, emit, record)
            await self._run_event_chain(runtimes, manifests, run, scope, turn, emit, record)
            await self._queue_detached(detached, run, scope, turn, emit)
        proposals = run.proposals

        duration_ms = int((time.monotonic() - started) * 1000)
        stop = await self._hooks.dispatch(
            "TurnStop",
            scope,
            {
                "runtimeResults": [{"runtimeId": r.runtime_id, "status": r.status} for r in turn.runtime_results],
                "durationMs": duration_ms,
            },
        )
        await record(stop.trace)

        story_ran = [result for result in turn.runtime_results if result.story]
        if story_ran and not any(result.status == "success" for result in story_ran):
            turn.status = store_pb2.TURN_STATUS_FAILED
            failed = next(result for result in story_ran if result.status != "success")
            turn.abort_reason = f"story runtime {failed.runtime_id} {failed.status}: {failed.reason}"
            return await self._commit(turn, lease, [], emit)

        await self._resolve_speakers(session.id, proposals, turn)
        kept: list[store_pb2.Proposal] = []
        # A rejected write takes its whole commit unit (the top-level runtime with its nested calls)
        # down; in a story or setup unit, the whole execution (spec: 提交单元). The store applies
        # the rule: a vetoed proposal goes to it with its REJECTED outcome, like a write it refused.
        story_units = {result.runtime_id for result in turn.runtime_results if result.story or result.setup}
        vetoed_units: set[str] = set()
        for proposal in proposals:
            unit = proposal.unit_runtime_id or proposal.runtime_id or proposal.plugin_id
            if unit in vetoed_units or story_units & vetoed_units:
                # Its unit (or the whole turn) will not commit: nothing to ask the hooks about.
                kept.append(proposal)
                continue
            verdict = await self._hooks.dispatch(
                "PreStateCommit",
                scope,
                {"proposal": {"id": proposal.id, "type": proposal.type, "payload": _payload(proposal)}},
                plugin_id=proposal.plugin_id,
                runtime_id=proposal.runtime_id,
            )
            await record(verdict.trace)
            if verdict.aborted:
                by = next((entry.handler_plugin_id for entry in verdict.trace if entry.status == "abort"), "")
                turn.proposal_outcomes.append(store_pb2.ProposalOutcome(
                    proposal_id=proposal.id, status=store_pb2.PROPOSAL_STATUS_REJECTED, code="hook-aborted",
                    reason=f"PreStateCommit hook{' of ' + by if by else ''} aborted it: {verdict.reason}",
                ))
                vetoed_units.add(unit)
                kept.append(proposal)
                continue
            replaced = verdict.payload.get("proposal", {})
            if isinstance(replaced, dict) and isinstance(replaced.get("payload"), dict):
                # Only the payload may change; type, source and id stay the kernel's.
                proposal.payload.CopyFrom(to_struct(replaced["payload"]))
            kept.append(proposal)
        turn.narrative = "\n\n".join(
            str(_payload(proposal).get("text", "")) for proposal in kept
            if proposal.type == "narrative.append" and (proposal.unit_runtime_id or proposal.runtime_id or proposal.plugin_id) not in vetoed_units
        )
        turn.status = store_pb2.TURN_STATUS_COMMITTED
        committed = await self._commit(turn, lease, kept, emit, run)
        landed = {outcome.proposal_id for outcome in committed.proposal_outcomes if outcome.status == store_pb2.PROPOSAL_STATUS_COMMITTED}
        for proposal in kept:
            if proposal.id not in landed:
                continue
            post = await self._hooks.dispatch(
                "PostStateCommit",
                scope,
                {"proposal": {"id": proposal.id, "type": proposal.type, "payload": _payload(proposal)}, "result": {"committed": True}},
                plugin_id=proposal.plugin_id,
                runtime_id=proposal.runtime_id,
            )
            committed.hook_trace.extend(post.trace)
        return committed

    async def _run_stage(self, in_stage, run: TurnState, scope: ExecutionScope, turn: store_pb2.Turn, emit: Emit, record) -> None:
        """One stage: its dependency graph layer by layer; a layer's runtimes run concurrently."""
        manifests = run.manifests
        by_id = {runtime.runtime_id: runtime for runtime in in_stage}
        nodes = [
            Node(runtime.runtime_id, provides=_output_contracts(manifests[runtime.runtime_id]),
                 dependencies=dependencies_of(manifests[runtime.runtime_id]))
            for runtime in in_stage
        ]
        plan = plan_stage(nodes, frozenset(run.satisfied))
        for runtime_id, reason in plan.skipped.items():
            await self._skip(by_id[runtime_id], reason, run, turn, emit)
        for layer in plan.layers:
            ready = []
            for runtime_id in layer:
                gated = gate_reason(plan, runtime_id, run.statuses, frozenset(run.satisfied))
                if gated:
                    await self._skip(by_id[runtime_id], gated, run, turn, emit)
                else:
                    ready.append(by_id[runtime_id])
            for runtime in ready:
                run.needs[runtime.runtime_id] = {
                    upstream_id for dependency, upstream in plan.upstream.get(runtime.runtime_id, []) if dependency.gate
                    for upstream_id in upstream if run.statuses.get(upstream_id) == "success"
                }
            results = await asyncio.gather(
                *(self._run_runtime(runtime, scope, run, turn.player_message, emit, record, manifests[runtime.runtime_id])
                  for runtime in ready)
            )
            for runtime, outcome in zip(ready, results, strict=True):
                self._record(runtime, outcome, run, turn, manifests[runtime.runtime_id])

    async def _run_event_chain(self, runtimes, manifests, run: TurnState, scope, turn, emit, record) -> None:
        """Event runtimes follow topics that successful producers emitted this turn, one layer after another."""
        followers = {r.runtime_id: r for r in runtimes if _event_topics(manifests[r.runtime_id])}
        seen = 0
        for _ in range(MAX_EVENT_LAYERS):
            fresh = run.emitted[seen:]
            seen = len(run.emitted)
            layer = []
            for runtime_id, runtime in followers.items():
                if runtime_id in run.outcomes:
                    continue
                matched = [event for event in fresh if event["topic"] in _event_topics(manifests[runtime_id])]
                if matched:
                    run.activations[runtime_id] = {"events": matched}
                    layer.append(runtime)
            if not layer:
                return
            await self._run_stage(layer, run, scope, turn, emit, record)

    def _setup_commit(self, turn: store_pb2.Turn, run: TurnState) -> dict:
        """setup_progress of the setup runtimes that ran, and phase "playing" once none is left to do."""
        session = self._session_of(turn, run)
        progress: dict[str, dict] = {}
        for result in turn.runtime_results:
            if not result.setup:
                continue
            outcome = run.outcomes.get(result.runtime_id)
            version = run.packages[result.plugin_id].version
            previous = from_struct(session.setup_runtimes[result.runtime_id]) if result.runtime_id in session.setup_runtimes else None
            completed = outcome is not None and (result.status == "success" or outcome.guard_skipped) and result.runtime_id not in run.rewritten
            recorded = setup_progress(previous, version, result.status, result.reason, completed=completed)
            if recorded is not None:
                progress[result.runtime_id] = recorded
        fields: dict = {"setup_progress": {rid: to_struct(value) for rid, value in progress.items()}} if progress else {}
        if session.phase == "setup":
            setup_ids = [rid for rid, manifest in run.manifests.items() if manifest.schedule.stage == "setup"]
            merged = {rid: from_struct(value) for rid, value in session.setup_runtimes.items()} | progress
            if all((merged.get(rid) or {}).get("state") in ("done", "blocked") for rid in setup_ids):
                fields["phase"] = "playing"
        return fields

    @staticmethod
    def _session_of(turn: store_pb2.Turn, run: TurnState) -> store_pb2.Session:
        return run.session if run.session is not None else store_pb2.Session(id=turn.session_id, phase="playing")

    # -- detached runtimes: queued at commit, run by detached/worker.py --
    async def _queue_detached(self, detached, run: TurnState, scope: ExecutionScope, turn: store_pb2.Turn, emit: Emit) -> None:
        """Detached runtimes do not run in the turn: each becomes a job the commit enqueues (only if the
        turn commits), with its inputs bound now, from the finished turn (the source snapshot)."""
        for runtime in detached:
            manifest = run.manifests[runtime.runtime_id]
            inputs, gate = await self._functions.bind(runtime, scope, run, manifest)
            if gate:
                await self._skip(runtime, gate, run, turn, emit)
                continue
            committed = {b for b, spec in manifest.io.bindings().items() if spec.scope == "committed"}
            options = manifest.schedule.detached
            if options is False:
                continue  # only detached runtimes are queued
            snapshot = {"inputs": {b: v for b, v in inputs.items() if b not in committed}, "sourceTurnId": turn.id,
                        "maxSettleWaitMs": options.max_settle_wait_ms,
                        # The job's trace links to this turn's (detached/worker.py).
                        SOURCE_TRACE: tracing.trace_context()}
            run.detached_jobs.append(store_pb2.DetachedJobSpec(
                plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id, input=to_struct(snapshot),
                # 0: the store's own limits.
                settle=options.settle, max_queue_ms=options.max_queue_ms or 0, max_execution_ms=options.max_execution_ms or 0,
            ))
            await self._skip(runtime, "detached: queued to run after the turn commits", run, turn, emit)
    # -- end detached runtimes

    async def _resolve_speakers(self, session_id: str, proposals: list[store_pb2.Proposal], turn: store_pb2.Turn) -> None:
        """Story speakers and cues.present become the session's characters where a name matches exactly."""
        stories = [p for p in proposals if p.type == "narrative.append"]
        if not stories:
            return
        world = await self._peers.store.GetWorld(store_pb2.GetWorldRequest(session_id=session_id))
        characters = [{**from_struct(c.data), "id": c.id} for c in world.characters]
        if not characters:
            return
        for proposal in stories:
            payload = from_struct(proposal.payload)
            present = (payload.get("cues") or {}).get("present") or []
            resolution = resolve_speakers(payload.get("segments") or [], present, characters)
            payload["segments"] = resolution.segments
            payload["presentCharacterIds"] = resolution.present_character_ids
            proposal.payload.CopyFrom(to_struct(payload))
            for result in turn.runtime_results:
                if result.runtime_id == proposal.runtime_id:
                    output = from_struct(result.output)
                    output["segments"] = resolution.segments
                    output["unresolvedSpeakers"] = resolution.unresolved
                    result.output.CopyFrom(to_struct(output))

    async def _skip(self, runtime, reason: str, run: TurnState, turn: store_pb2.Turn, emit: Emit) -> None:
        outcome = RuntimeOutcome("skipped", reason, run_id=new_id())
        await emit(scheduler_pb2.TurnEvent(runtime_finished=scheduler_pb2.RuntimeFinished(
            runtime_id=runtime.runtime_id, status="skipped", reason=reason)))
        self._record(runtime, outcome, run, turn, run.manifests[runtime.runtime_id])

    def _record(self, runtime, outcome: RuntimeOutcome, run: TurnState, turn: store_pb2.Turn, manifest: CompiledManifest) -> None:
        run.outcomes[runtime.runtime_id] = outcome
        run.statuses[runtime.runtime_id] = outcome.status
        turn.runtime_results.append(
            store_pb2.RuntimeResult(
                runtime_id=runtime.runtime_id, plugin_id=runtime.plugin_id, status=outcome.status, reason=outcome.reason,
                output=to_struct(outcome.output), run_id=outcome.run_id, story=is_story_runtime(runtime), setup=runtime.stage == "setup",
                concealed=manifest.io.concealed,
            )
        )
        if outcome.status == "failed" and manifest.io.concealed:
            # A concealed runtime's real failure goes to the server log only.
            log.warning("concealed.failed", runtime_id=runtime.runtime_id, session_id=turn.session_id, reason=outcome.reason)
        if outcome.status != "success" and not outcome.guard_skipped:
            return
        if runtime.type != "function" or outcome.has_value:
            # Downstream inputs bind the business value: a function's canonicalValue, projected.
            run.outputs[runtime.runtime_id] = outcome.output
        for contract in _output_contracts(manifest):
            run.providers.setdefault(contract, []).append(runtime.runtime_id)
            if outcome.status == "success":
                run.satisfied.add(contract)
        if outcome.story is not None:
            run.proposals.append(self._proposal(runtime, "narrative.append",
                                                {"text": outcome.story.narrative_output, **outcome.story.to_output()}))
        for write in outcome.writes:
            run.proposals.append(self._proposal(runtime, write["type"], write["payload"]))
        for write in outcome.foreign_writes:
            # A write service's staged change: the service's plugin owns it, it commits with this unit.
            proposal = self._proposal(runtime, write["type"], write["payload"])
            proposal.plugin_id = write["pluginId"]
            run.proposals.append(proposal)
        # -- recordAs: the business value, frozen as an export at commit (a function without a value records none).
        record_as = manifest.io.output.record_as
        if record_as and (runtime.type != "function" or outcome.has_value):
            value = outcome.canonical_value if runtime.type == "function" else outcome.output
            run.proposals.append(self._proposal(runtime, "export.record", {"recordAs": record_as, "value": value}))
        # -- end recordAs
        # Upstream units it read buffered plugin data or staged operations (operations@1) of.
        run.read_from[runtime.runtime_id] = set(outcome.read_from) | run.operation_reads.get(runtime.runtime_id, set())
        for event in outcome.events:
            run.emitted.append({**event, "source": runtime.runtime_id})
            run.proposals.append(self._proposal(runtime, "event.emit", {"name": event["topic"], "payload": event.get("payload")}))

    @staticmethod
    def _proposal(runtime, kind: str, payload: dict) -> store_pb2.Proposal:
        return store_pb2.Proposal(
            id=new_id(), type=kind, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
            unit_runtime_id=runtime.runtime_id, payload=to_struct(payload),
        )

    @traced("covel.runtime", lambda self, runtime, *_: {"covel.runtime_id": runtime.runtime_id, "covel.runtime.type": runtime.type},
            lambda outcome: {"covel.runtime.status": outcome.status})
    async def _run_runtime(self, runtime, scope, run: TurnState, player_message, emit, record, manifest) -> RuntimeOutcome:
        # Its tool and service calls, nested calls' and subagents' included, are noted against it.
        unit = RUNNING_UNIT.set((run.activity, runtime.runtime_id))
        try:
            return await self._run_unit(runtime, scope, run, player_message, emit, record, manifest)
        finally:
            RUNNING_UNIT.reset(unit)

    async def _run_unit(self, runtime, scope, run: TurnState, player_message, emit, record, manifest) -> RuntimeOutcome:
        started = time.monotonic()
        # Its run id is the execution id every hook of this run (nested and subagent runs' too) is told of.
        run_id = new_id()
        scope = scope.execution(run_id)
        await emit(scheduler_pb2.TurnEvent(runtime_started=scheduler_pb2.RuntimeStarted(runtime_id=runtime.runtime_id, stage=runtime.stage)))
        pre = await self._hooks.dispatch(
            "PreRuntime", scope, {"manifest": {"runtimeId": runtime.runtime_id, "stage": runtime.stage}, "input": {"playerMessage": player_message}},
            plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
        )
        await record(pre.trace)
        guarded = None
        # Inputs bind once, for the guard and the runtime: a required one that failed its checks gates it.
        inputs, input_gate = await self._functions.bind(runtime, scope, run, manifest)
        if "operations@1" in manifest.io.kernel_inputs():
            run.operation_reads[runtime.runtime_id] = run.operation_units()
        if not pre.aborted and not input_gate and manifest.guard:
            guarded = await self._functions.run_guard(runtime, scope, run, player_message, manifest, inputs)
        if pre.aborted:
            outcome = RuntimeOutcome("skipped", pre.reason)
        elif input_gate:
            outcome = RuntimeOutcome("skipped", input_gate)
        elif guarded is not None:
            outcome = guarded
            await record(outcome.trace)
        elif runtime.type == "function":
            outcome = await self._functions.run_function(runtime, scope, run, player_message, manifest, inputs)
            await record(outcome.trace)  # its ctx.tools calls' PreToolUse/PostToolUse
        else:

            async def on_narrative(piece: StreamedPiece) -> None:
                segment = common_pb2.Segment(kind=piece.kind, speaker=piece.speaker) if piece.kind else None
                await emit(
                    scheduler_pb2.TurnEvent(
                        narrative_delta=scheduler_pb2.NarrativeDelta(
                            runtime_id=runtime.runtime_id, text=piece.text, segment=segment, reset=piece.reset
                        )
                    )
                )

            try:
                outcome = await self._agents.run(runtime, scope, run, player_message, manifest, on_narrative, inputs)
            except grpc.aio.AioRpcError as error:
                outcome = RuntimeOutcome("failed", f"model call failed: {error.code().name}: {error.details()}")
            await record(outcome.trace)
        outcome.run_id = run_id
        status_before_hooks = outcome.status
        outcome = await self._post_runtime(runtime, scope, outcome, record)
        if outcome.status != status_before_hooks:
            run.rewritten.add(runtime.runtime_id)  # a setup runtime a hook turned into a success is not complete
        if (outcome.status == "success" or outcome.guard_skipped) and not is_story_runtime(runtime):
            outcome = self._check_output(runtime, manifest, run, outcome)
        if outcome.status != "success" and not outcome.guard_skipped:
            outcome.writes = []
        duration_ms = int((time.monotonic() - started) * 1000)
        await emit(
            scheduler_pb2.TurnEvent(
                runtime_finished=scheduler_pb2.RuntimeFinished(
                    runtime_id=runtime.runtime_id, status=outcome.status, reason=outcome.reason, duration_ms=duration_ms
                )
            )
        )
        return outcome

    def _check_output(self, runtime, manifest: CompiledManifest, run: TurnState, outcome: RuntimeOutcome) -> RuntimeOutcome:
        """The published contract at the output boundary: a failing result commits nothing."""
        package = run.packages[runtime.plugin_id]
        try:
            schemas = output_schemas(manifest, package.contracts, Path(package.root_dir))
        except SchemaUnavailable as error:
            return RuntimeOutcome("failed", f"output-schema-invalid: {error}", run_id=outcome.run_id, trace=outcome.trace)
        if not schemas:
            return outcome
        if runtime.type == "function" and not outcome.has_value:
            return RuntimeOutcome(
                "failed", "output-schema-invalid: no business value for the output contract (a PostRuntime hook replaced "
                "output without canonicalValue, or the handler returned nothing)", run_id=outcome.run_id, trace=outcome.trace,
            )
        value = outcome.canonical_value if runtime.type == "function" else outcome.output
        problem = check_output(value, schemas)
        if problem:
            return RuntimeOutcome("failed", problem, run_id=outcome.run_id, trace=outcome.trace)
        return outcome

    async def _post_runtime(self, runtime, scope: ExecutionScope, outcome: RuntimeOutcome, record) -> RuntimeOutcome:
        """PostRuntime hooks may rewrite the result; the kernel keeps identity and writes (runtime_result.py)."""
        original = {
            "pluginId": runtime.plugin_id,
            "runtimeId": runtime.runtime_id,
            "runId": outcome.run_id,
            "turnId": scope.turn_id,
            "status": outcome.status,
            "reason": outcome.reason,
            "output": outcome.output,
            "pendingProposals": [{"type": "narrative.append"}] if outcome.story is not None else [],
        }
        if outcome.has_value:
            original["canonicalValue"] = outcome.canonical_value
        post = await self._hooks.dispatch(
            "PostRuntime", scope, {"result": original}, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id
        )
        await record(post.trace)
        replaced = post.payload.get("result")
        if replaced == original:
            return outcome
        result = apply_replaced_result(original, replaced)
        if runtime.type == "function":
            outcome.has_value = "canonicalValue" in result
            outcome.canonical_value = result.get("canonicalValue")
            if isinstance(result.get("output"), dict):
                outcome.output = result["output"]
        outcome.status = str(result.get("status") or outcome.status)
        outcome.reason = str(result.get("reason") or "")
        if result.get("writesDiscarded"):
            outcome.story = None
            kept = result.get("output")
            outcome.output = kept if isinstance(kept, dict) else {}
        elif result.get("output") != original["output"] and outcome.story is not None:
            # A rewritten story is shaped and checked again like the runtime's own.
            try:
                outcome.story = normalize_story(result.get("output") or {})
                outcome.output = outcome.story.to_output()
            except EmptyStory:
                outcome.status, outcome.reason, outcome.story = "failed", "output-schema-invalid: the story has no text", None
        return outcome

    async def _commit(
        self, turn: store_pb2.Turn, lease: store_pb2.TurnLease, proposals: list[store_pb2.Proposal], emit: Emit,
        run: TurnState | None = None,
    ) -> store_pb2.Turn:
        turn.finished_at.CopyFrom(_now())
        dependencies = []
        if run is not None:
            # A unit discarded at commit takes down what needed it or read its data (store: read dependencies).
            for runtime_id in run.outcomes:
                needs, read_from = sorted(run.needs.get(runtime_id, ())), sorted(run.read_from.get(runtime_id, ()))
                if needs or read_from:
                    dependencies.append(store_pb2.UnitDependencies(unit_runtime_id=runtime_id, needs=needs, read_from=read_from))
        reply = await self._peers.store.CommitTurn(
            store_pb2.CommitTurnRequest(
                session_id=turn.session_id, lease_id=lease.lease_id, turn=turn, proposals=proposals, release_lease=True,
                dependencies=dependencies, detached_jobs=run.detached_jobs if run is not None else [],
                datasets=dataset_policies(run.packages, proposals) if run is not None else [],
                **(self._setup_commit(turn, run) if run is not None else {}),
            ),
        )
        committed = reply.turn
        # Outcomes decided before the store (hook vetoes) stay in the record.
        known = {outcome.proposal_id for outcome in committed.proposal_outcomes}
        for outcome in turn.proposal_outcomes:
            if outcome.proposal_id not in known:
                committed.proposal_outcomes.append(outcome)
        for outcome in committed.proposal_outcomes:
            await emit(scheduler_pb2.TurnEvent(proposal=outcome))
        return committed


def _concealing(emit: Emit, concealed: set[str]) -> Emit:
    async def emit_shown(event: scheduler_pb2.TurnEvent) -> None:
        shown = conceal_event(event, concealed)
        if shown is not None:
            await emit(shown)

    return emit_shown


def _manual_runtime(runtimes, manifests: dict[str, CompiledManifest], runtime_id: str):
    """The runtime RunManual names: in the session's plugins, and triggered manually."""
    runtime = next((r for r in runtimes if r.runtime_id == runtime_id), None)
    if runtime is None:
        raise not_found(f"runtime {runtime_id} is not in this session's plugins")
    trigger = manifests[runtime_id].schedule.trigger.type
    if trigger != "manual" or manifests[runtime_id].schedule.subagent_only:
        raise failed_precondition(
            f"runtime {runtime_id} is triggered by {trigger}; only schedule.trigger.type: manual runtimes run on request"
        )
    return runtime


def is_detached(manifest: CompiledManifest) -> bool:
    return manifest.is_detached


# The job snapshot's key for the W3C trace context of the turn that queued the job.
SOURCE_TRACE = "sourceTrace"


def _detached_runtime(runtimes, runtime_id: str):
    """The runtime a detached job names, if its plugin still runs in the session."""
    runtime = next((r for r in runtimes if r.runtime_id == runtime_id), None)
    if runtime is None:
        raise failed_precondition(f"runtime {runtime_id} of this detached job is no longer in the session's runnable plugins")
    return runtime


def requests_advance(turn: store_pb2.Turn) -> bool:
    """Exactly one committed top-level story, and it yields `continue`."""
    if turn.status != store_pb2.TURN_STATUS_COMMITTED:
        return False
    stories = [message for message in turn.messages if message.role == "story"]
    return len(stories) == 1 and from_struct(stories[0].metadata).get("yield") == "continue"


MAX_EVENT_LAYERS = 8
# How often the lease holder asks the store for Cancel / Interject sent to another replica.
SIGNAL_POLL_S = 0.25


def _event_topics(manifest: CompiledManifest) -> set[str]:
    return manifest.schedule.trigger.topics


def _output_contracts(manifest: CompiledManifest) -> tuple[str, ...]:
    contract = manifest.io.output.contract
    return (contract,) if contract else ()


def _payload(proposal: store_pb2.Proposal) -> dict:
    return from_struct(proposal.payload)
