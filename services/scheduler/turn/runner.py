"""One turn: lease, plugins, hooks, runtimes stage by stage, one commit.

The turn runs as its own task (a client that disconnects does not stop the commit): committed whole or not at all.

`_run_leased` is the turn as its phases, in order; each phase's decisions are pure functions in
the turn/ modules named for them (runnable, schedule, outcome, commit_rules, unit_outcome,
recording, detached_jobs), its stages in stages.py and unit.py, its commit in commit.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from dataclasses import dataclass, field
from typing import cast

from opentelemetry.trace import Span
from structlog.contextvars import bind_contextvars as bind_turn_to_logs

from covel.common.v1 import common_pb2
from covel.hooks.v1 import hooks_pb2
from covel.registry.v1 import registry_pb2
from covel.scheduler.internal.v1 import turn_events_pb2
from covel.store.v1 import store_pb2
from services.scheduler.agent.execution import AgentExecution
from services.scheduler.catalogue import Package, Runtime
from services.scheduler.execution.origins import HEARS_INTERJECTIONS
from services.scheduler.execution.plugin_data import PluginDataViews
from services.scheduler.execution.plugin_data_reads import LastScopes, read_checks, scopes_read
from services.scheduler.execution.plugin_data_reads import seed as seed_plugin_data
from services.scheduler.execution.running_turn import RunningTurn
from services.scheduler.execution.runtime_scope import Emit, unseen_events
from services.scheduler.execution.turn_shared import TurnShared
from services.scheduler.function.execution import FunctionExecution
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.payloads import PreSchedule, TurnStart, TurnStop
from services.scheduler.hooks.replies import PreScheduleReply
from services.scheduler.hooks.rules import filter_schedule
from services.scheduler.kinds import ActionSource, Stage
from services.scheduler.known_sessions import KnownSessions
from services.scheduler.peers import Peers
from services.scheduler.player_message import render_player_message, seat_players
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.settings import SchedulerSettings
from services.scheduler.store_pages import all_messages, all_turns
from services.scheduler.turn.action_kinds import session_catalogue
from services.scheduler.turn.activity import RecordingHooks
from services.scheduler.turn.commit import TurnCommit, now
from services.scheduler.turn.commit_rules import setup_still_pending, turn_narrative
from services.scheduler.turn.compaction import compact_history
from services.scheduler.turn.history_window import LastWindows, covers, player_turns_needed
from services.scheduler.turn.idempotent_retry import check_retry
from services.scheduler.turn.interaction_answers import check_answers
from services.scheduler.turn.lease import LeaseKeeper
from services.scheduler.turn.lease_hold import LeaseHold
from services.scheduler.turn.outcome import runtime_failure_passes, story_failure, story_failure_passes
from services.scheduler.turn.player_input import check_session_actions
from services.scheduler.turn.plugin_actions import run_action
from services.scheduler.turn.request import (
    ActionRun,
    DetachedRun,
    FollowUp,
    ManualRun,
    PlayerTurn,
    ResumeRun,
    SettlementRetry,
    TurnRequest,
    TurnWork,
    named_runtime_id,
)
from services.scheduler.turn.runnable import concealed_runtimes, execution_session, loaded_runtimes, named_runtime
from services.scheduler.turn.schedule import select_runtimes, stage_batches
from services.scheduler.turn.selection import TriggerHistories, TriggerHistory, needs_history, sitting_out
from services.scheduler.turn.settlements import SETTLEMENT_ORIGIN, STORY_ORIGINS, blocked, open_receipts, to_retry
from services.scheduler.turn.stages import StageRunner
from services.scheduler.turn.state import TurnState
from services.scheduler.turn.stream import TurnStream, concealing
from services.scheduler.turn.unit import UnitRunner
from shared.errors import ServiceError
from shared.ids import new_id
from shared.logs import get_logger
from shared.manifest import CompiledManifest
from shared.structs import from_struct
from shared.telemetry import metrics, tracing

log = get_logger(component="turn_runner")


@dataclass
class LeaseReads:
    """What the store answered with the lease (store.proto TurnReads): the world and a window of the log."""

    world: store_pb2.GetWorldResponse
    history: list[common_pb2.Message]
    # The window's HistoryWindow.player_turns (history_window.py).
    player_turns: int
    # The committed plugin data the previous turn read (plugin_data_reads.py).
    plugin_data: list[store_pb2.PluginDataRead] = field(default_factory=list)


@dataclass
class TurnPlugins:
    """What the plugins phase found: the packages that run now, their runtimes, and the ones that sit out."""

    packages: list[Package]
    runtimes: list[Runtime]
    manifests: dict[str, CompiledManifest]
    # Installed packages of plugins that cannot run now, and why (registry RejectedPlugin by plugin id).
    sitting: list[Package]
    unavailable: dict[str, registry_pb2.RejectedPlugin]
    # The execution's scope: only the plugins that run now, settings' defaults filled in.
    scope: ExecutionScope
    # The one runtime RunManual or a detached job runs (None: the turn schedules its own).
    named: Runtime | None


class TurnRunner:
    def __init__(self, peers: Peers, plugins: PluginCache, hooks: HookBus, settings: SchedulerSettings,
                 sessions: KnownSessions | None = None) -> None:
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
                                            settings.scheduler_stall_resend_min_ms / 1000, peers.registry)
        self._stages = StageRunner(UnitRunner(hooks, self._functions, self._agents), self._functions)
        self._lease = LeaseKeeper(peers.store, settings)
        self._commit = TurnCommit(peers.store, hooks)
        # Per session, what its last turn here read and needed (the next one asks for the same with its lease).
        self._windows = LastWindows()
        self._scopes = LastScopes()
        self._trigger_histories = TriggerHistories()
        self.sessions = sessions if sessions is not None else KnownSessions()

    def running_turn(self, session_id: str) -> str:
        """The id of the session's turn running on this scheduler, or ""."""
        running = self._running.get(session_id)
        return running.turn_id if running is not None else ""

    def interject(self, session_id: str, text: str) -> str:
        """Queue a player interjection for the player's turn running here (HEARS_INTERJECTIONS); its id, or "" if none."""
        running = self._running.get(session_id)
        if running is None or running.origin not in HEARS_INTERJECTIONS:
            return ""
        self._interjections.setdefault(session_id, []).append(text)
        return running.turn_id

    def pending_interjections(self, session_id: str) -> int:
        """How many interjections wait for the session's turn running here."""
        return len(self._interjections.get(session_id, ()))

    def _take_interjections(self, session_id: str) -> list[str]:
        return self._interjections.pop(session_id, [])

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
            except Exception as error:
                # A submit steered into the running turn (scheduler/admission.py) made no turn of its own: no error.
                status = getattr(error, "turn_status", "error")
                raise
            finally:
                elapsed = time.perf_counter() - started
                metrics.record_turn(request.origin, status, elapsed)
        log.info("turn.finished", turn_id=turn.id, logical_turn=turn.logical_turn, status=status, duration_ms=round(elapsed * 1000, 1))
        return turn

    # -- phase: lease and signals --
    async def run(self, request: TurnRequest, emit: Emit) -> store_pb2.Turn:
        window = store_pb2.HistoryWindow(player_turns=self._windows.get(_reads_key(request)), without_metadata=True)
        reads = store_pb2.TurnReads(world=True, history=window, plugin_data=self._scopes.get(_reads_key(request)))
        off_lease = request.off_lease and isinstance(request.work, DetachedRun)
        lease_reply = await self._lease.acquire(request.session_id, request.idempotency_key, request.origin, reads,
                                                when_busy=request.when_busy, retry_turn_id=request.retried_turn_id, without_lease=off_lease)
        if lease_reply.WhichOneof("result") == "existing_turn":
            # A retried submit: answer with the first turn's result, run nothing (if it is the same request).
            check_retry(lease_reply.existing_turn, request)
            return lease_reply.existing_turn
        session = lease_reply.session
        # A detached job runs on its snapshot and takes the lease for its commit only (lease_hold.py).
        hold = LeaseHold.for_job(self._lease, session) if off_lease else LeaseHold.taken(self._lease, lease_reply)
        receipts = open_receipts(lease_reply.world) if request.origin in STORY_ORIGINS else []
        if receipts:
            await hold.release()
            return await self._settle_first(request, receipts, emit)
        self.sessions.note(session)
        turn = _new_turn(request, hold.lease, session)
        hold.keep(self.cancel, self.interject)
        read = LeaseReads(world=lease_reply.world, history=list(lease_reply.history), player_turns=reads.history.player_turns,
                          plugin_data=list(lease_reply.plugin_data))
        # The turn's hook calls on one stream, its model calls on another (shared/call_streams.py).
        self._hooks.begin_turn(turn.id)
        self._peers.gateway.turns.begin(turn.id)
        work = asyncio.create_task(self._run_leased(request, hold, session, read, turn, emit))
        running = RunningTurn(turn.id, work, origin=request.origin)
        if not off_lease:  # a player's turn may run beside a job: Cancel and Interject reach the player's
            self._running[session.id] = running
        if request.stop is not None and request.stop.is_set():
            # Cancelled while this turn took its lease: it ends as cancelled, like one cancelled running.
            self.cancel(session.id, turn.id, request.stop.reason)
        try:
            recorded = await asyncio.wait_for(work, self._settings.scheduler_turn_timeout_s)
            self._trigger_histories.recorded(hold.session, recorded)
            return recorded
        except (TimeoutError, asyncio.CancelledError) as error:
            current = asyncio.current_task()
            if isinstance(error, asyncio.CancelledError) and (not running.cancel_reason or (current and current.cancelling())):
                await hold.release()
                raise
            # Cancelled on request, or past the turn's time limit: record it, commit nothing of it.
            reason = running.cancel_reason or f"the turn passed its time limit ({self._settings.scheduler_turn_timeout_s:.0f} s)"
            recorded = await self._end_early(turn, hold, emit, store_pb2.TURN_STATUS_FAILED, reason)
            self._trigger_histories.recorded(hold.session, recorded)
            return recorded
        except BaseException:
            await hold.release()
            raise
        finally:
            hold.stop()
            self._hooks.end_turn(turn.id)  # its stream closes; a turn cancelled or failed midway: its watchers hear nothing more
            self._peers.gateway.turns.end(turn.id)
            if self._running.get(session.id) is running:
                del self._running[session.id]
                # Interjections nobody read before the turn ended do not leak into the next one.
                self._interjections.pop(session.id, None)

    async def _settle_first(self, request: TurnRequest, receipts: list[store_pb2.DimensionSettlement], emit: Emit) -> store_pb2.Turn:
        """Open settlement receipts before a story turn: the kernel retries once those nobody retried yet, then
        plays the turn if that settled them all; else the action waits (FAILED_PRECONDITION saying what to do)."""
        retry = to_retry(receipts)
        if not retry or request.settled_first:
            raise blocked(receipts)
        for receipt in retry:
            key = f"{request.idempotency_key}:settlement:{receipt.source_turn_id}" if request.idempotency_key else ""
            try:
                await self.retry_settlement(request.session_id, receipt, key)
            except ServiceError as error:
                # Its maintainer cannot run now (e.g. its plugin was turned off): the block below says the receipt is open.
                log.warning("settlement.retry_not_run", session_id=request.session_id, runtime_id=receipt.runtime_id, why=error.message)
        return await self.run(dataclasses.replace(request, settled_first=True), emit)

    async def retry_settlement(self, session_id: str, receipt: store_pb2.DimensionSettlement, idempotency_key: str) -> store_pb2.Turn:
        """A turn of origin "settlement": the receipt's maintainer alone, on its source turn's inputs; its commit
        settles the receipt or records why not. Its events reach no client stream."""
        retry = TurnRequest(session_id, idempotency_key, SettlementRetry(receipt), origin=SETTLEMENT_ORIGIN)
        return await self.run_observed(retry, unseen_events)

    async def _run_leased(
        self, request: TurnRequest, hold: LeaseHold, session: store_pb2.Session, read: LeaseReads, turn: store_pb2.Turn,
        emit: Emit,
    ) -> store_pb2.Turn:
        """The turn, phase by phase. A phase that ends it early commits the turn record alone."""
        started = time.monotonic()
        lease = hold.lease
        bind_turn_to_logs(turn_id=turn.id, logical_turn=lease.logical_turn)  # this task's log lines (telemetry)
        plugins = await self._plugins_phase(request, session, turn)
        await self._player_input(request, plugins, session, read, turn)
        stream = TurnStream(turn, concealing(emit, concealed_runtimes(plugins.manifests)))
        await self._announce(stream, plugins, lease.logical_turn, not isinstance(request.work, PlayerTurn))
        aborted = await self._start_hooks(request, plugins, stream)
        if aborted is not None:
            await stream.record(await self._hooks.flush_observed(plugins.scope))
            return await self._end_early(turn, hold, stream.emit, store_pb2.TURN_STATUS_ABORTED, aborted)
        selected = [] if isinstance(request.work, ActionRun) else await self._schedule(plugins, session, lease.logical_turn, stream,
                                                                                      bool(read.world and read.world.dimensions))
        run = await self._compaction(request, plugins, session, read, stream)
        await self._run_stages(request, plugins, selected, run, stream)
        failure = await self._stop_hooks(plugins.scope, stream, started)
        turn.retryable = story_failure_passes(turn.runtime_results) if failure else \
            not isinstance(request.work, PlayerTurn) and runtime_failure_passes(turn.runtime_results, named_runtime_id(request.work))
        if failure:
            return await self._end_early(turn, hold, stream.emit, store_pb2.TURN_STATUS_FAILED, failure)
        self._scopes.note(_reads_key(request), scopes_read(run.shared))
        return await self._commit_phase(hold, session, run, plugins.scope, stream, request.work)

    # -- phase: plugins --
    async def _plugins_phase(self, request: TurnRequest, session: store_pb2.Session, turn: store_pb2.Turn) -> TurnPlugins:
        """The trust gate and the plugins' dependencies, before any plugin code runs (selection.py)."""
        confirmed = await self._plugins.resolve_confirmed(session)
        for missing in confirmed.unavailable:
            # The session keeps its set; a plugin that cannot run now (removed, broken, not approved) sits this turn out.
            log.warning("plugin.unavailable", session_id=session.id, plugin_id=missing.plugin_id, code=missing.code, reason=missing.reason)
        packages = await self._plugins.packages(list(confirmed.runnable), timeout_s=10, generation=confirmed.generation)
        unavailable = {missing.plugin_id: missing for missing in confirmed.unavailable}
        installed = [plugin_id for plugin_id, missing in unavailable.items() if missing.code != "not-found"]
        sitting = await self._plugins.packages(installed, timeout_s=10) if installed else []
        speaks = any(action.source != ActionSource.SYSTEM for action in request.actions)  # its player message is recorded with it
        scope = ExecutionScope(session=execution_session(session, confirmed.runnable, packages), turn_id=turn.id,
                               logical_turn=turn.logical_turn, turn_number=session.player_messages + int(speaks))
        await self._hooks.ensure_loaded(scope.session)  # its approved community plugins, on this scheduler's hooks service
        runtimes = loaded_runtimes(packages)
        manifests = {runtime.runtime_id: runtime.manifest for runtime in runtimes}
        named = named_runtime(named_runtime_id(request.work), detached=isinstance(request.work, FollowUp), runtimes=runtimes, manifests=manifests,
                              sitting=sitting, unavailable=unavailable)
        return TurnPlugins(packages, runtimes, manifests, sitting, unavailable, scope, named)

    # -- phase: player input --
    async def _player_input(self, request: TurnRequest, plugins: TurnPlugins, session: store_pb2.Session, read: LeaseReads,
                            turn: store_pb2.Turn) -> None:
        """The player's actions against the session's action kinds and seats, and their interaction answers against
        the open interactions (INVALID_ARGUMENT, NOT_FOUND or FAILED_PRECONDITION: the lease is released and nothing
        is recorded), then the player message rendered with the kinds' labels and the actors' names."""
        players = [action for action in request.actions if action.source != ActionSource.SYSTEM]
        if not players:
            return
        catalogue = session_catalogue(plugins.packages, session.locale)
        check_session_actions(players, catalogue, list(session.seats))

        async def validate(plugin_id: str, form_id: str, values: dict) -> hooks_pb2.ValidateFormResponse:
            return await self._hooks.validate_form(plugins.scope, plugin_id, form_id, values)

        async def list_all() -> list[store_pb2.InteractionRecord]:
            reply = await self._peers.store.ListInteractions(store_pb2.ListInteractionsRequest(session_id=session.id, include_answered=True))
            return list(reply.interactions)

        await check_answers(players, list(read.world.open_interactions), validate, list_all, resuming=isinstance(request.work, ResumeRun))
        names = {character.id: str(from_struct(character.data).get("name") or character.id) for character in read.world.characters}
        del turn.actions[:]
        turn.actions.extend(request.actions)
        turn.player_message = render_player_message(players, {kind: rule.label for kind, rule in catalogue.items()}, names, seat_players(session))

    async def _announce(self, stream: TurnStream, plugins: TurnPlugins, logical_turn: int, one_runtime: bool) -> None:
        """turn_started, then (a turn that schedules its runtimes) those of plugins sitting it out, as skipped."""
        turn = stream.turn
        await stream.emit(turn_events_pb2.TurnEvent(turn_started=turn_events_pb2.TurnStarted(turn_id=turn.id, logical_turn=turn.logical_turn,
                                                                                            actions=turn.actions)))
        if one_runtime:
            return
        for skipped in sitting_out(plugins.sitting, plugins.unavailable.values(), logical_turn):
            turn.runtime_results.append(skipped)
            await stream.runtime_finished(skipped.runtime_id, "skipped", skipped.reason)

    # -- phase: start hooks --
    async def _start_hooks(self, request: TurnRequest, plugins: TurnPlugins, stream: TurnStream) -> str | None:
        """TurnStart: the abort reason when a hook aborted the turn, else None."""
        turn_start = await self._hooks.dispatch(TurnStart(stream.turn.player_message, request.actions,
                                                          [runtime.runtime_id for runtime in plugins.runtimes]), plugins.scope)
        await stream.record(turn_start.trace)
        return turn_start.reason if turn_start.aborted else None

    # -- phase: schedule --
    async def _schedule(self, plugins: TurnPlugins, session: store_pb2.Session, logical_turn: int, stream: TurnStream,
                        world_has_dimensions: bool) -> list:
        """The runtimes this turn runs: by trigger (schedule.py), then as PreSchedule hooks filter them."""
        if plugins.named is not None:
            selected = [plugins.named]
        else:
            history = None
            if any(needs_history(manifest) for manifest in plugins.manifests.values()):
                history = self._trigger_histories.get(session)
                if history is None:
                    history = TriggerHistory.from_turns(await all_turns(self._peers.store, session.id))
                    self._trigger_histories.remember(session, history)
            versions = {package.id: package.version for package in plugins.packages}
            selected = select_runtimes(plugins.runtimes, plugins.manifests, logical_turn, history, session, versions,
                                       world_has_dimensions=world_has_dimensions)
        schedule = await self._hooks.dispatch(PreSchedule.of(selected), plugins.scope)
        await stream.record(schedule.trace)
        by_name = {runtime.runtime_id: runtime for runtime in selected}
        return [by_name[name] for name in filter_schedule(list(by_name), PreScheduleReply.of(schedule).triggered)]

    # -- phase: compaction --
    async def _compaction(self, request: TurnRequest, plugins: TurnPlugins, session: store_pb2.Session, read: LeaseReads,
                          stream: TurnStream) -> TurnState:
        """The history the turn's runtimes read, compacted when over budget; the state the stages share."""
        messages = await self._history(request, plugins, session.id, read)
        compacted = None
        if isinstance(request.work, PlayerTurn):
            compacted = await compact_history(
                hooks=self._hooks, scope=plugins.scope, packages={p.id: p for p in plugins.packages}, history=messages,
                budget_chars=self._settings.scheduler_history_budget_chars, keep_turns=self._settings.scheduler_history_keep_turns,
                gateway=self._peers.gateway)
            await stream.record(compacted.trace)
            messages = compacted.history
        turn = stream.turn
        shared = TurnShared(history=messages, packages={p.id: p for p in plugins.packages}, manifests=plugins.manifests,
                            session=session, world=read.world, worlds=self._plugins.world)
        seed_plugin_data(shared, read.plugin_data)
        run = TurnState(
            shared, actions=list(request.actions), player_message=turn.player_message, origin=request.origin,
            emit=stream.emit, player_input_id=new_id(), started_at=turn.started_at.ToJsonString(), retry=request.retry,
        )
        if compacted is not None and compacted.proposal is not None:
            run.shared.proposals.append(compacted.proposal)
        match request.work:
            case ManualRun(activation=activation):
                run.activation = activation
            case DetachedRun() as detached:
                run.source_inputs = detached.source_inputs()
                run.activation = detached.activation()
            case ResumeRun(call=call):
                run.resume = call.resume
                # A function's handler runs again: this is how it knows, and what the player answered.
                run.activation = {"resume": {"interactionId": call.record.interaction.id, "answer": call.resume.answer}}
            case SettlementRetry() as retry:
                run.source_inputs = retry.source_inputs()
                run.retry_from_turn_id = retry.source_turn_id
                run.activation = {"retryFromTurnId": retry.source_turn_id}
        return run

    async def _history(self, request: TurnRequest, plugins: TurnPlugins, session_id: str, read: LeaseReads) -> list[common_pb2.Message]:
        """The log window read with the lease, or the whole log when this turn needs more than it (history_window.py). The
        window is noted for the next lease of the same kind (_reads_key): a player's turn that may compact reads the
        log since its summary, a detached job a few turns; noted per session, each made the other's next lease too short."""
        needed = player_turns_needed({p.id: p for p in plugins.packages}, plugins.manifests,
                                     self._settings.scheduler_history_max_turns, compacts=isinstance(request.work, PlayerTurn))
        self._windows.note(_reads_key(request), needed)
        if covers(read.player_turns, needed):
            return read.history
        return await all_messages(self._peers.store, session_id)

    # -- phases: stages, event chain, detached --
    async def _run_stages(self, request: TurnRequest, plugins: TurnPlugins, selected: list, run: TurnState, stream: TurnStream) -> None:
        scope = plugins.scope
        run.scheduled = [runtime.runtime_id for runtime in selected]
        if isinstance(request.work, ActionRun):
            await run_action(self._hooks, request.work.call, scope, run, stream.turn, self._functions)
            return
        if not isinstance(request.work, PlayerTurn):  # a named runtime, alone
            if selected:
                await self._stages.run_stage(selected, run, scope, stream)
            return
        batches = stage_batches(selected, plugins.manifests)
        for batch in batches.stages:
            await self._stages.run_stage(batch, run, scope, stream)
            if batch[0].stage == Stage.SETUP and setup_still_pending(stream.turn.runtime_results, run):
                # The rest of the turn (the opening, the player's first story) waits for the setup to finish:
                # what did not run owes nothing (no settlement duty).
                run.scheduled = [runtime.runtime_id for runtime in batch]
                await self._stages.run_event_chain(plugins.runtimes, run, scope, stream)
                return
        await self._stages.run_event_chain(plugins.runtimes, run, scope, stream)
        await self._stages.queue_detached(batches.detached, run, scope, stream)

    # -- phase: stop hooks --
    async def _stop_hooks(self, scope: ExecutionScope, stream: TurnStream, started: float) -> str:
        """The turn's observer-only events with TurnStop (one call); then why the turn fails ("" when it goes on to commit)."""
        results = stream.turn.runtime_results
        await stream.record(await self._hooks.stop(TurnStop(results, int((time.monotonic() - started) * 1000)), scope))
        return story_failure(results)

    # -- phase: commit --
    async def _commit_phase(self, hold: LeaseHold, session: store_pb2.Session, run: TurnState,
                            scope: ExecutionScope, stream: TurnStream, work: TurnWork) -> store_pb2.Turn:
        """Speakers, PreStateCommit, one store transaction (a detached job's takes the lease and checks what the job
        read), PostStateCommit (commit.py)."""
        turn = stream.turn
        self._commit.resolve_speakers(run.shared.world, run.shared.proposals, turn)
        vetted = await self._commit.vet(run.shared.proposals, scope, stream)
        turn.narrative = turn_narrative(vetted.kept, vetted.vetoed_units)
        turn.status = store_pb2.TURN_STATUS_COMMITTED
        checks = read_checks(run.shared) if hold.off_lease else None
        job = work.job_commit(turn) if isinstance(work, DetachedRun) else None
        reply = await self._commit.commit(turn, hold, vetted.kept, stream.emit, run, checks, job)
        if reply.HasField("completed_job") and isinstance(work, DetachedRun):
            work.ended.append(reply.completed_job)
        await self._commit.after(reply.turn, vetted.kept, scope)
        return reply.turn

    async def _end_early(self, turn: store_pb2.Turn, hold: LeaseHold, emit: Emit,
                         status: store_pb2.TurnStatus.ValueType, reason: str) -> store_pb2.Turn:
        """An aborted, failed, cancelled or timed-out turn: its record commits, nothing it proposed does."""
        turn.status = status
        turn.abort_reason = reason
        del turn.proposal_outcomes[:]
        return (await self._commit.commit(turn, hold, [], emit)).turn


def _reads_key(request: TurnRequest) -> str:
    """Whose plugin data reads the next lease asks for: the session's turns, or one runtime's own runs (a detached
    job's or RunManual's), which read other data than the turns between them."""
    return request.session_id if isinstance(request.work, PlayerTurn) else f"{request.session_id}/{named_runtime_id(request.work)}"


def _new_turn(request: TurnRequest, lease: store_pb2.TurnLease, session: store_pb2.Session) -> store_pb2.Turn:
    return store_pb2.Turn(
        id=lease.turn_id, session_id=session.id, logical_turn=lease.logical_turn, idempotency_key=request.idempotency_key,
        actions=request.actions, player_message=render_player_message([a for a in request.actions if a.source != ActionSource.SYSTEM]),
        origin=request.origin, started_at=now(), trace_id=tracing.current_trace_id(),
        source_turn_id=request.source_turn_id, version_of=request.retry.version_of if request.retry else "",
    )
