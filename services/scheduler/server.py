"""The scheduler's public gRPC service: what clients in any language call."""

from __future__ import annotations

import asyncio
import contextlib
import re
from dataclasses import dataclass

import grpc

from covel.common.v1 import common_pb2
from covel.registry.v1 import registry_pb2
from covel.scheduler.internal.v1 import turn_events_pb2
from covel.scheduler.v1 import resources_pb2, scheduler_pb2, scheduler_pb2_grpc
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler import session_plugins
from services.scheduler.admission import Steered, SubmitAdmission
from services.scheduler.agent.context import configure_instruction_locale
from services.scheduler.detached.worker import DetachedWorker
from services.scheduler.execution.outcome import Resume
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.event_keys import SchedulerEventKeys, public_cfg, restart
from services.scheduler.known_sessions import KnownSessions
from services.scheduler.panels import check_location, session_panels
from services.scheduler.peers import Peers
from services.scheduler.plugin_cache import PluginCache
from services.scheduler.public_api import convert, from_request, request_text, request_texts, respond
from services.scheduler.session_access import SessionAccess
from services.scheduler.settings import SchedulerSettings
from services.scheduler.turn.action_kinds import kind_to_proto, session_catalogue
from services.scheduler.turn.concealment import conceal_turn
from services.scheduler.turn.event_coalescing import how_held, is_story_text, join_story_text
from services.scheduler.turn.interaction_answers import ResumeCall, answer_action
from services.scheduler.turn.outcome import requests_advance
from services.scheduler.turn.player_input import IMPLICIT_SEAT, validate_actions
from services.scheduler.turn.plugin_actions import (
    ACTION_ORIGIN,
    ActionCall,
    check_action,
    command_context,
    parse_command,
    session_commands,
)
from services.scheduler.turn.request import AdvanceStop, TurnRequest
from services.scheduler.turn.runner import TurnRunner, unseen_events
from services.scheduler.turn.setting_values import FRAMEWORK, check_plugin_settings
from services.scheduler.turn.settlements import RETRY, check_open, check_resolution, find_receipt
from services.scheduler.turn_watch import TurnWatch, replay
from services.scheduler.world_sessions import default_seats, fetch_world, import_world_data, world_start
from shared.errors import failed_precondition, invalid_argument, not_found, permission_denied, require, rpc, unavailable
from shared.grpc_client import open_channel
from shared.grpc_server import RunningServer, start_server
from shared.logs import get_logger
from shared.lorebook import check_entry as check_lorebook_entry
from shared.page_tokens import pages
from shared.seats import check_seats
from shared.security.auth import caller, client_api_interceptors
from shared.stream_coalescing import Channel, Coalescer
from shared.structs import from_struct, to_struct
from shared.telemetry.tracing import configure_tracing

LOCALES = ("en", "zh")
# The lorebook entries the client API writes: the player's own (the world's and plugins' are read-only there).
PLAYER_OWNER = "player"
IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
MAX_INTERJECTION = 4000
log = get_logger(component="scheduler")
# A Cancel or Interject for a session with no turn running here waits this long for one to take the lease on
# any replica: the next turn of an auto-advance chain starts a few milliseconds after the last one committed.
CHAIN_GAP_WAIT_MS = 1_000
# How often WatchTurn on a replica that does not run the turn looks for its record.
WATCH_POLL_S = 0.25


@dataclass(frozen=True)
class Scheduler:
    """The scheduler's objects, built in one place (`compose`), each given its collaborators."""

    service: SchedulerService
    runner: TurnRunner
    events: SchedulerEventKeys
    plugins: PluginCache


def compose(peers: Peers, settings: SchedulerSettings) -> Scheduler:
    # Gateway event keys (hooks/event_keys.py); the bus carries them to context assembly and compaction.
    sessions = KnownSessions()
    events = SchedulerEventKeys(peers.hooks, peers.store, public_cfg(settings), sessions=sessions)
    hooks = HookBus(peers.hooks, events)
    plugins = PluginCache(peers.registry)
    runner = TurnRunner(peers, plugins, hooks, settings, sessions)
    service = SchedulerService(peers, settings, hooks=hooks, events=events, plugins=plugins, runner=runner)
    return Scheduler(service, runner, events, plugins)


class SchedulerService(scheduler_pb2_grpc.SchedulerServicer):
    def __init__(self, peers: Peers, settings: SchedulerSettings, *, hooks: HookBus, events: SchedulerEventKeys,
                 plugins: PluginCache, runner: TurnRunner) -> None:
        self._peers = peers
        self._settings = settings
        self._hooks = hooks
        self.events = events
        self._plugins = plugins
        self._runner = runner
        # Turns keep running when their client goes away; shutdown waits for them.
        self.turns_in_flight: set[asyncio.Task] = set()
        self.watch = TurnWatch()
        # session id -> the stop flags of its auto-advance chains: Cancel sets them (the player stops advancing).
        self._advance_chains: dict[str, set[AdvanceStop]] = {}
        # A submit meeting a running turn: queued, steered into it or refused (admit_message hookspecs).
        self._admission = SubmitAdmission(peers.store, hooks, runner)

    @rpc
    async def CreateSession(self, request: scheduler_pb2.CreateSessionRequest, context) -> scheduler_pb2.CreateSessionResponse:
        return await self._create_session(request)

    @rpc
    async def ResetSession(self, request: scheduler_pb2.ResetSessionRequest, context) -> scheduler_pb2.ResetSessionResponse:
        require(request.session_id, "session_id", "the session to start over")
        previous = (await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        if previous.status != store_pb2.SESSION_STATUS_ACTIVE:
            raise failed_precondition(f"session {previous.id} has ended; create a new session instead")
        if self._runner.running_turn(previous.id):
            raise failed_precondition(f"session {previous.id} has a turn running; Cancel it first, then reset")
        # The successor keeps what the player chose: plugins, approvals, settings, language, world.
        created = await self._create_session(scheduler_pb2.CreateSessionRequest(
            requested_plugins=list(previous.requested_plugins), excluded_plugins=list(previous.excluded_plugins),
            locale=previous.locale, world_id=previous.world_id, title=previous.title,
            plugin_settings=dict(previous.plugin_settings), approved_plugins=list(previous.approved_plugins),
        ), command="reset", previous=previous)
        ended = await self.EndSession(scheduler_pb2.EndSessionRequest(session_id=previous.id, reason=resources_pb2.SESSION_ENDING_ENDED), context)
        return respond(scheduler_pb2.ResetSessionResponse, session=created.session, previous_session=ended.session,
                       rejected=created.rejected, unavailable=created.unavailable)

    async def _create_session(self, request: scheduler_pb2.CreateSessionRequest, *, command: str = "new",
                              previous: store_pb2.Session | None = None) -> scheduler_pb2.CreateSessionResponse:
        locale = request.locale or "en"
        if locale not in LOCALES:
            raise invalid_argument("locale", f"is {request.locale!r}; use one of {', '.join(LOCALES)}")
        parent = await self._parent_session(request)
        # -- world: the world package's plugins, contracts, presets and starting state (world_sessions.py)
        world = await world_start(self._peers.registry, request, locale)
        if world is not None:
            request = world.request
        resolved = await self._peers.registry.ResolveSessionPlugins(
            registry_pb2.ResolveSessionPluginsRequest(
                requested=list(request.requested_plugins), excluded=list(request.excluded_plugins),
                approved=list(request.approved_plugins), approvals_known=True,
                required_contracts=list(request.required_contracts),
            ),
        )
        _refuse_rejected_requests(request.requested_plugins, resolved)
        # activePlugins keeps the plugins stopped by a missing dependency: they come back with it.
        active = list(resolved.session_plugins)
        for index, plugin_id in enumerate(request.approved_plugins):
            if plugin_id not in active:
                raise invalid_argument(
                    f"approved_plugins[{index}]", f"plugin {plugin_id!r} is not enabled in this session; request it too"
                )
        await self._check_plugin_settings(request.plugin_settings, active)
        seats = [from_request(seat, store_pb2.Seat, f"seats[{index}]") for index, seat in enumerate(request.seats)]
        check_seats(seats, {c.id for c in world.session_world.characters} if world is not None else set())
        if world is not None:
            await import_world_data(self._peers.registry, self._plugins, world, list(resolved.active), locale)
        created = await self._peers.store.CreateSession(
            store_pb2.CreateSessionRequest(
                session=store_pb2.Session(
                    locale=locale,
                    world_id=request.world_id,
                    title=request.title,
                    # A session belongs to its creator; a reset one stays its owner's (session_access.py).
                    owner=(previous.owner if previous is not None else "") or caller().name,
                    seats=seats or default_seats(world.world if world is not None else None),
                    active_plugins=active,
                    approved_plugins=list(request.approved_plugins),
                    requested_plugins=list(request.requested_plugins),
                    excluded_plugins=list(request.excluded_plugins),
                    plugin_settings=dict(request.plugin_settings),
                    # -- setup: plugins with setup runtimes start the session in its setup phase
                    **await self._setup_fields(list(resolved.active)),
                ),
                world=world.session_world if world is not None else None,
            ),
        )
        session = created.session
        # Hooks of plugins that do not run now (stopped by a missing dependency) stay silent.
        running = store_pb2.Session()
        running.CopyFrom(session)
        del running.active_plugins[:]
        running.active_plugins.extend(resolved.active)
        started = await self._hooks.dispatch(
            "SessionStart", ExecutionScope(session=running, turn_id="", logical_turn=0),
            {"sessionId": session.id, **({"worldId": session.world_id} if session.world_id else {})},
        )
        _log_hook_failures(started.trace)
        if command == "reset" and previous is not None:
            await self.events.command_reset(running, previous)
        elif parent is not None:
            # command:new only for a new-session command from an existing session (spec: emitCommandHooks).
            await self.events.command_new(running, parent)
        return respond(
            scheduler_pb2.CreateSessionResponse,
            session=session,
            rejected=[*(world.left_out if world is not None else []), *(r for r in resolved.rejected if r.plugin_id not in active)],
            unavailable=resolved.unavailable, unmet_requirements=resolved.unmet,
        )

    async def _parent_session(self, request: scheduler_pb2.CreateSessionRequest) -> store_pb2.Session | None:
        """The session a /new command came from, when the caller asks for command hooks."""
        if not request.emit_command_hooks:
            return None
        require(request.parent_session_id, "parent_session_id", "the session the new-session command was given in (emit_command_hooks)")
        try:
            reply = await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=request.parent_session_id))
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.NOT_FOUND:
                raise invalid_argument("parent_session_id", f"no session {request.parent_session_id!r}; name an existing session") from error
            raise
        return reply.session

    async def _check_plugin_settings(self, settings, active: list[str]) -> None:
        """INVALID_ARGUMENT (nothing created) for a setting value its package's contributes.settings refuses."""
        if not settings:
            return
        named = [plugin_id for plugin_id in settings if plugin_id != FRAMEWORK]
        packages = {p.id: p for p in await self._plugins.packages([p for p in named if p in active], timeout_s=10)}
        for plugin_id in named:
            if plugin_id in packages:
                continue
            try:  # installed but not enabled in this session: its values are still checked
                packages.update({p.id: p for p in await self._plugins.packages([plugin_id], timeout_s=10)})
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.NOT_FOUND:
                    raise
        check_plugin_settings(settings, packages)

    async def _setup_fields(self, active: list[str]) -> dict:
        packages = await self._plugins.packages(active, timeout_s=10)
        pending = {r.runtime_id: to_struct({"state": "pending"}) for p in packages for r in p.runtimes if r.stage == "setup"}
        return {"phase": "setup", "setup_runtimes": pending} if pending else {}
    # -- end setup

    @rpc
    async def GetSession(self, request: scheduler_pb2.GetSessionRequest, context) -> scheduler_pb2.GetSessionResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        reply = await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))
        return respond(scheduler_pb2.GetSessionResponse, session=reply.session)

    @rpc
    async def EndSession(self, request: scheduler_pb2.EndSessionRequest, context) -> scheduler_pb2.EndSessionResponse:
        require(request.session_id, "session_id", "the session to end")
        reason = request_text(request, "reason") or "ended"
        before = (await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        reply = await self._peers.store.EndSession(
            store_pb2.EndSessionRequest(session_id=request.session_id, reason=reason)
        )
        running = self._runner.running_turn(request.session_id)
        if running:
            # Only a detached job's execution can still run here (the store refuses to end a player's turn):
            # stop it now rather than at its next lease renewal.
            self._runner.cancel(request.session_id, running, "the session ended")
        if reply.changed:
            ended = await self._hooks.dispatch(
                "SessionEnd", ExecutionScope(session=before, turn_id="", logical_turn=0),
                {"sessionId": before.id, "reason": reason},
            )
            _log_hook_failures(ended.trace)
        return respond(scheduler_pb2.EndSessionResponse, session=reply.session)

    @rpc
    async def SubmitActions(self, request: scheduler_pb2.SubmitActionsRequest, context):
        require(request.session_id, "session_id", "the id CreateSession returned")
        _check_idempotency_key(request.idempotency_key)
        async for event in self._submit(request, validate_actions([from_request(action, common_pb2.PlayerAction, f"actions[{index}]")
                                                             for index, action in enumerate(request.actions)])):
            yield event

    @rpc
    async def SubmitInteraction(self, request: scheduler_pb2.SubmitInteractionRequest, context):
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.interaction_id, "interaction_id", "an open interaction's id, as ListInteractions shows it")
        _check_idempotency_key(request.idempotency_key)
        reply = await self._peers.store.ListInteractions(store_pb2.ListInteractionsRequest(session_id=request.session_id, include_answered=True))
        record, action = answer_action(request, list(reply.interactions))
        submit = scheduler_pb2.SubmitActionsRequest(session_id=request.session_id, idempotency_key=request.idempotency_key)
        if not record.interaction.resumes:
            async for event in self._submit(submit, validate_actions([action])):
                yield event
            return
        # A suspended agent asked it: the answer resumes that agent from what its turn saved.
        asked = (await self._peers.store.GetTurn(store_pb2.GetTurnRequest(session_id=request.session_id, turn_id=record.turn_id))).turn
        saved = next((r.suspension for r in asked.runtime_results if r.runtime_id == record.interaction.runtime_id and r.HasField("suspension")), None)
        if saved is None:
            raise failed_precondition(f"interaction_id: the run that asked {request.interaction_id} left nothing to resume")
        resume = ResumeCall(record, Resume(from_struct(saved), from_struct(request.values)))
        turn_request = TurnRequest(request.session_id, validate_actions([action]), request.idempotency_key, origin="resume", resume=resume)

        async def work(emit) -> None:
            turn = await self._run_turn(turn_request, emit)
            await _completed(emit, turn)

        async for event in self._stream(work, session_id=request.session_id):
            yield event

    @rpc
    @pages("interactions")
    async def ListInteractions(self, request: scheduler_pb2.ListInteractionsRequest, context) -> scheduler_pb2.ListInteractionsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        reply = await self._peers.store.ListInteractions(
            store_pb2.ListInteractionsRequest(session_id=request.session_id, include_answered=request.include_answered))
        return respond(scheduler_pb2.ListInteractionsResponse, interactions=reply.interactions)

    @rpc
    async def InvokeAction(self, request: scheduler_pb2.InvokeActionRequest, context) -> scheduler_pb2.InvokeActionResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.plugin_id, "plugin_id", "the running plugin whose action to call")
        require(request.action, "action", "an action of the plugin's contributes.actions")
        _check_idempotency_key(request.idempotency_key)
        check_action(await self._running_packages(request.session_id), request.plugin_id, request.action)
        return await self._invoke(request.session_id, ActionCall(request.plugin_id, request.action, from_struct(request.payload)),
                                  request.idempotency_key)

    @rpc
    @pages("commands")
    async def ListCommands(self, request: scheduler_pb2.ListCommandsRequest, context) -> scheduler_pb2.ListCommandsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        return respond(scheduler_pb2.ListCommandsResponse, commands=session_commands(await self._running_packages(request.session_id)))

    @rpc
    async def ListSessions(self, request: scheduler_pb2.ListSessionsRequest, context) -> scheduler_pb2.ListSessionsResponse:
        principal = caller()
        if request.owner and request.owner != principal.name and not principal.is_operator:
            raise permission_denied("owner: only an operator lists another principal's sessions; leave it empty for your own")
        reply = await self._peers.store.ListSessions(store_pb2.ListSessionsRequest(
            owner=request.owner or principal.name, page_size=request.page_size, page_token=request.page_token,
            include_ended=request.include_ended))
        return respond(scheduler_pb2.ListSessionsResponse, sessions=reply.sessions, next_page_token=reply.next_page_token)

    @rpc
    async def ListDetachedJobs(self, request: scheduler_pb2.ListDetachedJobsRequest, context) -> scheduler_pb2.ListDetachedJobsResponse:
        # A named session is checked like every session-scoped call (its owner or an operator).
        if not request.session_id and not caller().is_operator:
            raise permission_denied("session_id: only an operator lists every session's jobs; name one of your sessions")
        reply = await self._peers.store.ListDetachedJobs(store_pb2.ListDetachedJobsRequest(
            session_id=request.session_id, statuses=request_texts(request, "statuses"), page_size=request.page_size, page_token=request.page_token))
        return respond(scheduler_pb2.ListDetachedJobsResponse, jobs=reply.jobs, next_page_token=reply.next_page_token)

    @rpc
    async def RequeueDetachedJob(self, request: scheduler_pb2.RequeueDetachedJobRequest, context) -> scheduler_pb2.RequeueDetachedJobResponse:
        if not caller().is_operator:
            raise permission_denied("only an operator queues a detached job again")
        require(request.job_id, "job_id", "a job's id, as ListDetachedJobs shows it")
        reply = await self._peers.store.RequeueDetachedJob(store_pb2.RequeueDetachedJobRequest(job_id=request.job_id))
        return respond(scheduler_pb2.RequeueDetachedJobResponse, job=reply.job)

    @rpc
    @pages("panels")
    async def ListPanels(self, request: scheduler_pb2.ListPanelsRequest, context) -> scheduler_pb2.ListPanelsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        location = request_text(request, "location")
        check_location(location)
        session = (await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        packages = [p for p in await self._running_packages(request.session_id, session) if p.ui_panels]
        if not packages:
            return scheduler_pb2.ListPanelsResponse()
        world, *replies = await asyncio.gather(
            self._peers.store.GetWorld(store_pb2.GetWorldRequest(session_id=request.session_id)),
            *(self._peers.store.ListPluginData(store_pb2.ListPluginDataRequest(session_id=request.session_id, plugin_id=package.id))
              for package in packages))
        entries = [entry for reply in replies for entry in reply.entries]
        return respond(scheduler_pb2.ListPanelsResponse, panels=session_panels(packages, session, world, entries, location))

    @rpc
    async def RunCommand(self, request: scheduler_pb2.RunCommandRequest, context) -> scheduler_pb2.InvokeActionResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.text, "text", "the command line, e.g. /roll 2d6")
        _check_idempotency_key(request.idempotency_key)
        session = (await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        packages = await self._running_packages(request.session_id, session)
        command, args = parse_command(request.text.strip(), session_commands(packages))
        payload: dict = {"args": args, "context": command_context(request_texts(command, "context"), session, packages)}
        return await self._invoke(request.session_id, ActionCall(command.plugin_id, command.action, payload), request.idempotency_key)

    async def _invoke(self, session_id: str, call: ActionCall, idempotency_key: str) -> scheduler_pb2.InvokeActionResponse:
        turn = await self._runner.run_observed(TurnRequest(session_id, [], idempotency_key, origin=ACTION_ORIGIN, action=call), unseen_events)
        return respond(scheduler_pb2.InvokeActionResponse, result_json=call.result_json, turn=conceal_turn(turn))

    async def _running_packages(self, session_id: str, session: store_pb2.Session | None = None) -> list:
        """The packages of the session's plugins that run now."""
        if session is None:
            session = (await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session
        confirmed = await self._plugins.resolve_confirmed(session)
        return await self._plugins.packages(list(confirmed.runnable), timeout_s=10, generation=confirmed.generation)

    async def _submit(self, request: scheduler_pb2.SubmitActionsRequest, actions: list[common_pb2.PlayerAction]):
        """The submit's turn and its auto-advance chain, streamed."""
        # message:received / message:preprocessed once the turn is accepted (its lease taken): not for a
        # retried submit answered with the first turn, nor for one refused (busy session, ended session).
        accepted = _on_turn_started(lambda: self.events.player_message(request.session_id, actions, request.idempotency_key))
        # A submit steered into the running turn follows that turn (admission.py); a retry of one, again. An
        # interaction's answer (SubmitInteraction) is no message to admit: it waits for its own turn.
        steered: list[Steered | None] = [self._admission.steered_before(request.session_id, request.idempotency_key)]
        answers = any(action.HasField("interaction") for action in actions)
        when_busy = (self._admission.when_busy(request.session_id, actions, request.idempotency_key)
                     if not steered[0] and not answers and await self._admission.asks() else None)

        async def work(emit) -> None:
            # Cancel stops this submit's turn and its auto-advance chain, at any point (stop is checked
            # when a turn takes its lease, and between turns).
            stopped = AdvanceStop()
            chains = self._advance_chains.setdefault(request.session_id, set())
            chains.add(stopped)
            try:
                try:
                    turn = await self._run_turn(TurnRequest(request.session_id, actions, request.idempotency_key, stop=stopped,
                                                            when_busy=when_busy), accepted(emit))
                except Steered as joined:
                    steered[0] = joined
                    return
                await _completed(emit, turn)
                # Auto-advance: a story that yields `continue` asks for the next turn, up to the session's bound.
                advances = 0
                while (requests_advance(turn) and not stopped.is_set()
                       and advances < await self._max_auto_advance(request.session_id) and not stopped.is_set()):
                    advances += 1
                    key = f"{request.idempotency_key}:advance:{advances}" if request.idempotency_key else ""
                    advance = common_pb2.PlayerAction(seat_id="main", kind="advance", source="system")
                    turn = await self._run_turn(TurnRequest(request.session_id, [advance], key, origin="continuation", stop=stopped), emit)
                    await _completed(emit, turn)
            finally:
                chains.discard(stopped)
                if not chains:
                    self._advance_chains.pop(request.session_id, None)

        if not steered[0]:
            async for event in self._stream(work, session_id=request.session_id):
                yield event
        joined = steered[0]
        if joined is not None:
            async for event in self._followed(request.session_id, joined.turn_id):
                if event.WhichOneof("event") == "turn_started":
                    event.turn_started.steered_by = joined.plugin_id
                yield event

    @rpc
    async def RunManual(self, request: scheduler_pb2.RunManualRequest, context):
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.runtime_id, "runtime_id", "a runtime with schedule.trigger.type: manual")
        _check_idempotency_key(request.idempotency_key)
        turn_request = TurnRequest(
            request.session_id, [], request.idempotency_key, origin="background" if request.background else "manual",
            manual_runtime_id=request.runtime_id, activation=from_struct(request.payload),
        )

        async def work(emit) -> None:
            turn = await self._run_turn(turn_request, emit)
            await _completed(emit, turn)

        async for event in self._stream(work, session_id=request.session_id, background=request.background):
            yield event

    async def _run_turn(self, turn_request: TurnRequest, emit) -> store_pb2.Turn:
        return await self._runner.run_observed(turn_request, emit)

    async def _stream(self, work, *, session_id: str, background: bool = False):
        """Run `work(emit)` as its own task and stream what it emits. The task outlives a client that
        goes away, so a turn always commits whole; `background` ends the stream after turn_started.
        Story text emitted at once goes as one message (turn/event_coalescing.py)."""
        events: Channel[turn_events_pb2.TurnEvent] = Channel()
        # Set once the client went away: every story completed from then on is reported undelivered.
        gone = ""

        def undelivered(event) -> None:
            if event.WhichOneof("event") == "turn_completed":
                self.events.message_sent(event.turn_completed, False, gone)

        # WatchTurn reads every turn of this stream again, also once its client is gone (turn_watch.py).
        publish, finished = self.watch.tap(session_id)

        async def put(event) -> None:
            publish(event)
            if gone:
                undelivered(event)
            elif events.put(event) and is_story_text(event):
                # The stream was idle: it sends this text now, not once the turn next waits (after the
                # last model message that may be a while: output checks, hooks, the commit).
                await asyncio.sleep(0)

        async def run() -> None:
            try:
                await work(put)
            finally:
                finished()
                events.close()

        task = asyncio.create_task(run())
        self.turns_in_flight.add(task)
        task.add_done_callback(self.turns_in_flight.discard)
        task.add_done_callback(_log_failure)
        delivering = None
        coalescer = Coalescer(events, join_story_text, how_held)
        try:
            async with contextlib.aclosing(coalescer.items()) as coalesced:
                async for event in coalesced:
                    delivering = event
                    yield convert(event, scheduler_pb2.TurnEvent)
                    delivering = None
                    if event.WhichOneof("event") == "turn_completed":
                        self.events.message_sent(event.turn_completed, True)
                    if background and event.WhichOneof("event") == "turn_started":
                        return
        except BaseException:
            # The client went away (while waiting or while being sent an event); the turn goes on.
            gone = "the client went away before the story was delivered"
            for unsent in [delivering, *coalescer.unsent(), *events.drain()]:
                if unsent is not None:
                    undelivered(unsent)
            raise
        # Raises the turn's error, if any, as this RPC's status.
        await task

    async def _max_auto_advance(self, session_id: str) -> int:
        session = (await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=session_id))).session
        framework = from_struct(session.plugin_settings["framework"]) if "framework" in session.plugin_settings else {}
        value = framework.get("maxAutoAdvance", self._settings.scheduler_max_auto_advance)
        return value if isinstance(value, int) and value >= 0 else self._settings.scheduler_max_auto_advance

    @rpc
    async def ListMessages(self, request: scheduler_pb2.ListMessagesRequest, context) -> scheduler_pb2.ListMessagesResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        if request.limit < 0:
            raise invalid_argument("limit", "must be 0 (a page from the first) or positive (the newest)")
        reply = await self._peers.store.ListMessages(store_pb2.ListMessagesRequest(
            session_id=request.session_id, limit=request.limit, page_size=request.page_size, page_token=request.page_token))
        return respond(scheduler_pb2.ListMessagesResponse, messages=reply.messages, next_page_token=reply.next_page_token)

    @rpc
    async def GetTurn(self, request: scheduler_pb2.GetTurnRequest, context) -> scheduler_pb2.GetTurnResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.turn_id, "turn_id", "a turn id from the turn stream or ListTurns")
        reply = await self._peers.store.GetTurn(
            store_pb2.GetTurnRequest(session_id=request.session_id, turn_id=request.turn_id)
        )
        return respond(scheduler_pb2.GetTurnResponse, turn=conceal_turn(reply.turn))

    @rpc
    async def ListTurns(self, request: scheduler_pb2.ListTurnsRequest, context) -> scheduler_pb2.ListTurnsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        reply = await self._peers.store.ListTurns(store_pb2.ListTurnsRequest(
            session_id=request.session_id, page_size=request.page_size, page_token=request.page_token, newest_first=request.newest_first))
        return respond(scheduler_pb2.ListTurnsResponse, turns=[conceal_turn(turn) for turn in reply.turns], next_page_token=reply.next_page_token)

    @rpc
    async def WatchTurn(self, request: scheduler_pb2.WatchTurnRequest, context):
        require(request.session_id, "session_id", "the id CreateSession returned")
        async for event in self._followed(request.session_id, request.turn_id):
            yield event

    async def _followed(self, session_id: str, turn_id: str):
        """The turn's events (the session's latest turn without `turn_id`): live while it runs here, else its record replayed."""
        watched = self.watch.running_or_kept(session_id, turn_id)
        if watched is not None and watched.session_id == session_id:
            async for event in watched.follow():
                yield convert(event, scheduler_pb2.TurnEvent)
            return
        turn = await self._followed_elsewhere(session_id, turn_id)
        for event in replay(conceal_turn(turn)):
            yield convert(event, scheduler_pb2.TurnEvent)

    async def _followed_elsewhere(self, session_id: str, turn_id: str) -> store_pb2.Turn:
        """The turn once recorded: one running on another replica is waited for (its record polled)."""
        store = self._peers.store
        running = (await store.GetRunningTurn(store_pb2.GetRunningTurnRequest(session_id=session_id))).turn_id
        if not turn_id and not running:
            latest = await store.ListTurns(store_pb2.ListTurnsRequest(session_id=session_id, page_size=1, newest_first=True))
            if not latest.turns:
                raise not_found(f"session {session_id} has no turn yet; submit one", "covel.scheduler.v1.Turn", "", reason="TURN_NOT_FOUND")
            return latest.turns[0]
        wanted = turn_id or running
        while True:
            recorded = await self._recorded(session_id, wanted)
            if recorded is not None:
                return recorded
            if (await store.GetRunningTurn(store_pb2.GetRunningTurnRequest(session_id=session_id))).turn_id != wanted:
                # Not running (any more): recorded just now, or never (its scheduler stopped mid-turn).
                recorded = await self._recorded(session_id, wanted)
                if recorded is None:
                    raise not_found(f"turn {wanted} of session {session_id} is neither recorded nor running", "covel.scheduler.v1.Turn", wanted,
                                    reason="TURN_NOT_FOUND")
                return recorded
            await asyncio.sleep(WATCH_POLL_S)

    async def _recorded(self, session_id: str, turn_id: str) -> store_pb2.Turn | None:
        try:
            return (await self._peers.store.GetTurn(store_pb2.GetTurnRequest(session_id=session_id, turn_id=turn_id))).turn
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.NOT_FOUND:
                raise
            return None

    @rpc
    @pages("plugins")
    async def ListPausedPlugins(self, request: scheduler_pb2.ListPausedPluginsRequest, context) -> scheduler_pb2.ListPausedPluginsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        # The store keeps the fault breaker every hooks replica reports to (services/store/plugin_faults.py).
        reply = await self._peers.store.ListPausedPlugins(store_pb2.ListPausedPluginsRequest(session_id=request.session_id))
        return respond(scheduler_pb2.ListPausedPluginsResponse, plugins=reply.plugins)

    @rpc
    async def ResetPluginFaults(self, request: scheduler_pb2.ResetPluginFaultsRequest, context) -> scheduler_pb2.ResetPluginFaultsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.plugin_id, "plugin_id", "a plugin ListPausedPlugins names")
        reply = await self._peers.store.ResetPluginFaults(
            store_pb2.ResetPluginFaultsRequest(session_id=request.session_id, plugin_id=request.plugin_id))
        return scheduler_pb2.ResetPluginFaultsResponse(was_paused=reply.was_paused)

    @rpc
    async def SetPluginApprovals(self, request: scheduler_pb2.SetPluginApprovalsRequest, context) -> scheduler_pb2.SetPluginApprovalsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        if not request.approve and not request.revoke:
            raise invalid_argument("approve", "name at least one plugin to approve or revoke")
        reply = await self._peers.store.UpdateSessionApprovals(
            store_pb2.UpdateSessionApprovalsRequest(
                session_id=request.session_id, approve=list(request.approve), revoke=list(request.revoke)
            ),
        )
        await self.events.session_patch(reply.session, {"approve": list(request.approve), "revoke": list(request.revoke)})
        return respond(scheduler_pb2.SetPluginApprovalsResponse, session=reply.session)

    @rpc
    async def SetSessionPlugins(self, request: scheduler_pb2.SetSessionPluginsRequest, context) -> scheduler_pb2.SetSessionPluginsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        session_plugins.check_changes(request)
        session = (await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        requested, excluded = session_plugins.changed_requests(session, request)
        resolved = await self._peers.registry.ResolveSessionPlugins(registry_pb2.ResolveSessionPluginsRequest(
            requested=requested, excluded=excluded, approved=list(session.approved_plugins), approvals_known=True,
            required_contracts=await session_plugins.required_contracts(self._peers.registry, session)))
        _refuse_rejected_requests(request.enable, resolved, field="enable")
        updated = await session_plugins.store_plugins(self._peers.store, session.id, requested, excluded, resolved)
        await self.events.session_patch(updated, {"enable": list(request.enable), "disable": list(request.disable)})
        return respond(
            scheduler_pb2.SetSessionPluginsResponse,
            session=updated,
            rejected=[r for r in resolved.rejected if r.plugin_id not in resolved.session_plugins],
            unavailable=resolved.unavailable, unmet_requirements=resolved.unmet)

    @rpc
    @pages("entries")
    async def ListLorebook(self, request: scheduler_pb2.ListLorebookRequest, context) -> scheduler_pb2.ListLorebookResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        world = await self._peers.store.GetWorld(store_pb2.GetWorldRequest(session_id=request.session_id))
        return respond(scheduler_pb2.ListLorebookResponse, entries=world.lorebook)

    @rpc
    async def PutLorebookEntry(self, request: scheduler_pb2.PutLorebookEntryRequest, context) -> scheduler_pb2.PutLorebookEntryResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.id, "id", "the entry's id, e.g. old-lighthouse-keeper")
        entry = store_pb2.LorebookEntry(owner=PLAYER_OWNER, id=request.id, title=request.title, keys=list(request.keys),
                                        content=request.content, constant=request.constant, disabled=request.disabled)
        check_lorebook_entry(entry)
        reply = await self._peers.store.PutLorebookEntry(store_pb2.PutLorebookEntryRequest(session_id=request.session_id, entry=entry))
        return respond(scheduler_pb2.PutLorebookEntryResponse, entry=reply.entry)

    @rpc
    async def DeleteLorebookEntry(self, request: scheduler_pb2.DeleteLorebookEntryRequest, context) -> scheduler_pb2.DeleteLorebookEntryResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.id, "id", "the id of one of the player's own entries")
        reply = await self._peers.store.DeleteLorebookEntry(
            store_pb2.DeleteLorebookEntryRequest(session_id=request.session_id, owner=PLAYER_OWNER, id=request.id))
        return scheduler_pb2.DeleteLorebookEntryResponse(deleted=reply.deleted)

    @rpc
    @pages("settlements")
    async def ListSettlements(self, request: scheduler_pb2.ListSettlementsRequest, context) -> scheduler_pb2.ListSettlementsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        reply = await self._peers.store.ListSettlements(
            store_pb2.ListSettlementsRequest(session_id=request.session_id, include_closed=request.include_closed))
        return respond(scheduler_pb2.ListSettlementsResponse, settlements=reply.settlements)

    @rpc
    async def ResolveSettlement(self, request: scheduler_pb2.ResolveSettlementRequest, context) -> scheduler_pb2.ResolveSettlementResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.source_turn_id, "source_turn_id", "the receipt's source turn, as ListSettlements shows it")
        require(request.runtime_id, "runtime_id", "the receipt's maintainer runtime, as ListSettlements shows it")
        resolution = request_text(request, "resolution")
        check_resolution(resolution)
        _check_idempotency_key(request.idempotency_key)
        if resolution != RETRY:
            closed = await self._peers.store.ResolveSettlement(store_pb2.ResolveSettlementRequest(
                session_id=request.session_id, source_turn_id=request.source_turn_id, runtime_id=request.runtime_id,
                resolution=resolution))
            return respond(scheduler_pb2.ResolveSettlementResponse, settlement=closed.settlement)
        receipt = await self._receipt(request.session_id, request.source_turn_id, request.runtime_id)
        check_open(receipt)
        turn = await self._runner.retry_settlement(request.session_id, receipt, request.idempotency_key)
        after = await self._receipt(request.session_id, request.source_turn_id, request.runtime_id)
        return respond(scheduler_pb2.ResolveSettlementResponse, settlement=after, turn=conceal_turn(turn))

    async def _receipt(self, session_id: str, source_turn_id: str, runtime_id: str) -> store_pb2.DimensionSettlement:
        reply = await self._peers.store.ListSettlements(store_pb2.ListSettlementsRequest(session_id=session_id, include_closed=True))
        return find_receipt(reply.settlements, source_turn_id, runtime_id)

    @rpc
    @pages("packs")
    async def ListPacks(self, request: scheduler_pb2.ListPacksRequest, context) -> scheduler_pb2.ListPacksResponse:
        reply = await self._peers.registry.ListPacks(registry_pb2.ListPacksRequest(locale=request.locale))
        return respond(scheduler_pb2.ListPacksResponse, packs=reply.packs)

    @rpc
    async def GetPluginPlan(self, request: scheduler_pb2.GetPluginPlanRequest, context) -> scheduler_pb2.GetPluginPlanResponse:
        require(request.world_id, "world_id", "the id of a world ListWorlds lists")
        reply = await self._peers.registry.GetPluginPlan(registry_pb2.GetPluginPlanRequest(
            world_id=request.world_id, pack_id=request.pack_id, locale=request.locale, approved=list(request.approved_plugins)))
        return respond(scheduler_pb2.GetPluginPlanResponse, plan=reply.plan)

    @rpc
    async def GetSessionPlugins(self, request: scheduler_pb2.GetSessionPluginsRequest, context) -> scheduler_pb2.GetSessionPluginsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        session = (await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        confirmed = await self._plugins.resolve_confirmed(session)
        return respond(
            scheduler_pb2.GetSessionPluginsResponse,
            active_plugins=list(session.active_plugins), runnable=list(confirmed.runnable),
            unavailable=confirmed.unavailable,
        )

    @rpc
    @pages("kinds")
    async def ListActionKinds(self, request: scheduler_pb2.ListActionKindsRequest, context) -> scheduler_pb2.ListActionKindsResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        session = (await self._peers.store.GetSession(store_pb2.GetSessionRequest(session_id=request.session_id))).session
        catalogue = session_catalogue(await self._running_packages(request.session_id, session), session.locale)
        return respond(scheduler_pb2.ListActionKindsResponse, kinds=[kind_to_proto(rule) for rule in catalogue.values()],
                                                     seats=session.seats or [IMPLICIT_SEAT])

    @rpc
    async def SwitchCharacter(self, request: scheduler_pb2.SwitchCharacterRequest, context) -> scheduler_pb2.SwitchCharacterResponse:
        require(request.session_id, "session_id", "the id CreateSession returned")
        require(request.character_id, "character_id", "one of the seat's characters (ListActionKinds lists the seats)")
        reply = await self._peers.store.SetSeatCharacter(store_pb2.SetSeatCharacterRequest(
            session_id=request.session_id, seat_id=request.seat_id or "main", character_id=request.character_id))
        return respond(scheduler_pb2.SwitchCharacterResponse, session=reply.session)

    @rpc
    @pages("worlds")
    async def ListWorlds(self, request: scheduler_pb2.ListWorldsRequest, context) -> scheduler_pb2.ListWorldsResponse:
        reply = await self._peers.registry.ListWorlds(registry_pb2.ListWorldsRequest(locale=request.locale))
        return respond(scheduler_pb2.ListWorldsResponse, worlds=reply.worlds)

    @rpc
    async def GetWorld(self, request: scheduler_pb2.GetWorldRequest, context) -> scheduler_pb2.GetWorldResponse:
        require(request.world_id, "world_id", "the id of a world ListWorlds lists")
        return respond(scheduler_pb2.GetWorldResponse, world=await fetch_world(self._peers.registry, request.world_id, request.locale))

    @rpc
    async def Cancel(self, request: scheduler_pb2.CancelRequest, context) -> scheduler_pb2.CancelResponse:
        require(request.session_id, "session_id", "the session whose turn to cancel")
        reason = f"cancelled: {request.reason}" if request.reason else "cancelled by request"
        # Cancel also stops the session's auto-advance: no continuation turn starts after it.
        chains = self._advance_chains.get(request.session_id, set()) if not request.turn_id else set()
        for stopped in chains:
            stopped.set(reason)
        if not self._runner.cancel(request.session_id, request.turn_id, reason) and not chains:
            # Not running here: the store hands the cancel to the replica holding the turn's lease.
            await self._signal_turn(store_pb2.SignalTurnRequest(
                session_id=request.session_id, turn_id=request.turn_id, kind="cancel", reason=reason,
                wait_ms=0 if request.turn_id else CHAIN_GAP_WAIT_MS))
        await self.events.command_stop(request.session_id)
        return scheduler_pb2.CancelResponse()


    @rpc
    async def Interject(self, request: scheduler_pb2.InterjectRequest, context) -> scheduler_pb2.InterjectResponse:
        require(request.session_id, "session_id", "the session whose running turn should hear it")
        text = request.text.strip()
        if not text or len(text) > MAX_INTERJECTION:
            raise invalid_argument("text", f"say 1-{MAX_INTERJECTION} characters")
        turn_id = self._runner.interject(request.session_id, text)
        if not turn_id:
            # Not running here: the store hands it to the replica holding the turn's lease.
            signalled = await self._signal_turn(
                store_pb2.SignalTurnRequest(session_id=request.session_id, kind="interject", text=text, wait_ms=CHAIN_GAP_WAIT_MS),
                instead="submit it as the next action instead")
            turn_id = signalled.signal.turn_id
        return scheduler_pb2.InterjectResponse(turn_id=turn_id)

    async def _signal_turn(self, signal: store_pb2.SignalTurnRequest, instead: str = "") -> store_pb2.SignalTurnResponse:
        """Leave a cancel or interjection for the session's running turn on whichever replica runs it."""
        try:
            return await self._peers.store.SignalTurn(signal)
        except grpc.aio.AioRpcError as error:
            if error.code() == grpc.StatusCode.FAILED_PRECONDITION:
                raise failed_precondition(
                    f"no turn of session {signal.session_id} is running" + (f" with id {signal.turn_id}" if signal.turn_id else "")
                    + (f"; {instead}" if instead else "")
                ) from error
            raise


def _on_turn_started(announce):
    """Wrap a turn's emit so `announce()` runs once, when the turn reports turn_started."""
    def wrap(emit):
        announced = False

        async def emitting(event: turn_events_pb2.TurnEvent) -> None:
            nonlocal announced
            if not announced and event.WhichOneof("event") == "turn_started":
                announced = True
                announce()
            await emit(event)

        return emitting

    return wrap


def _refuse_rejected_requests(requested, resolved: registry_pb2.ResolveSessionPluginsResponse, *,
                              field: str = "requested_plugins") -> None:
    """A requested plugin rejected for anything but a missing dependency (those stay, unavailable):
    a conflict, not installed, failed to load, fails the create naming it (spec: plugin_rejected)."""
    kept = set(resolved.session_plugins)
    why = {r.plugin_id: r for r in resolved.rejected if r.plugin_id not in kept}
    for index, plugin_id in enumerate(requested):
        if plugin_id in why:
            rejection = why[plugin_id]
            remedy = "exclude the plugin it conflicts with or drop" if "conflict" in rejection.code else "drop"
            raise invalid_argument(
                f"{field}[{index}]",
                f"plugin_rejected: plugin {plugin_id!r} cannot join this session ({rejection.code}): {rejection.reason};"
                f" {remedy} it from {field}",
            )


async def _completed(emit, turn: store_pb2.Turn) -> None:
    """The turn's record to the client; a retryable failure then ends the stream UNAVAILABLE with RetryInfo,
    so a client tells it from a failure another try would meet again (docs/retries.md)."""
    await emit(turn_events_pb2.TurnEvent(turn_completed=conceal_turn(turn)))
    if turn.retryable:
        raise unavailable(f"turn {turn.id} failed for a passing reason ({turn.abort_reason}); send it again with the same "
                          "idempotency_key and it runs again", reason="TURN_FAILED_RETRYABLE", turn_id=turn.id)


def _check_idempotency_key(key: str) -> None:
    if key and not IDEMPOTENCY_KEY.match(key):
        raise invalid_argument("idempotency_key", "use 1-128 characters of letters, digits and . _ : -")


def _log_hook_failures(trace) -> None:
    """Session events have no turn to carry their trace: failed handlers go to the log."""
    for entry in trace:
        if entry.status not in ("ok", "abort"):
            log.warning("hook.failed", hook_event=entry.event, plugin_id=entry.handler_plugin_id, message=entry.message)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("turn.failed", error=repr(task.exception()))


# How long a starting scheduler waits for its peers to be connected before it announces itself
# ready (`covel up` and the tests start all five at once); it serves anyway after that.
PEERS_START_WAIT_S = 10.0
# How often readiness looks at the peer channels (their state: no RPC).
PEERS_READINESS_S = 5.0


async def start(settings: SchedulerSettings) -> RunningServer:
    # Before the peer channels open, so they carry the trace context.
    configure_tracing("scheduler", settings)
    configure_instruction_locale(settings.instruction_locale)
    peers = Peers.connect(settings)
    scheduler = compose(peers, settings)
    service = scheduler.service

    def add(server: grpc.aio.Server) -> list[str]:
        scheduler_pb2_grpc.add_SchedulerServicer_to_server(service, server)
        return [scheduler_pb2.DESCRIPTOR.services_by_name["Scheduler"].full_name]

    running = await start_server(
        settings.scheduler_addr, add, settings=settings, service="scheduler",
        interceptors=client_api_interceptors(settings, authorize=SessionAccess(peers.store).check),
    )

    # SIGTERM (RunningServer.stop, one budget: COVEL_SCHEDULER_DRAIN_S, passed by __main__): health
    # NOT_SERVING; gateway:shutdown (and pre-restart on SIGHUP) hooks; then together, sharing the
    # time left: in-flight RPCs, turns in flight (they outlive a client that went away) and the
    # detached jobs running; last, the channels close.
    async def drain_turns(left_s: float) -> None:
        if service.turns_in_flight:
            _, unfinished = await asyncio.wait(set(service.turns_in_flight), timeout=left_s)
            if unfinished:
                log.warning("scheduler.drain_incomplete", turns_in_flight=len(unfinished), drain_s=settings.scheduler_drain_s)

    # gateway:startup once serving (not delaying the bind).
    scheduler.events.startup(settings)
    following = asyncio.create_task(scheduler.plugins.follow_catalogue())

    async def stop_following() -> None:
        following.cancel()

    running.on_stopped.append(stop_following)
    restart.listen()
    running.on_shutdown.append(scheduler.events.shutting_down)
    # -- detached jobs: this replica's workers claim from the store's queue (detached/worker.py)
    # Its own channel to the store: polling before the store is up must not put the turns' channel in reconnect backoff.
    queue_channel = open_channel(settings.store_addr, security=settings, own_connection=True)
    detached = DetachedWorker(store_pb2_grpc.TransactionalStoreStub(queue_channel), scheduler.runner, settings)
    detached.start()
    # Finished within the time left, or released back to the queue for another replica.
    running.on_drain.append(detached.stop)
    running.on_stopped.append(queue_channel.close)
    # -- end detached jobs
    running.on_drain.append(drain_turns)
    running.on_stopped.append(peers.close)
    if unreachable := await peers.connected(PEERS_START_WAIT_S):
        log.warning("scheduler.peers_unreachable", peers=unreachable, waited_s=PEERS_START_WAIT_S)

    async def peers_reachable() -> bool:
        return not peers.failing()

    # Readiness follows the peers a turn needs: one failing to connect takes the pod out of its Service.
    running.watch_readiness(peers_reachable, PEERS_READINESS_S, "peers")
    return running
