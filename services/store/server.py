"""The TransactionalStore gRPC service: validates requests, runs the work in database threads."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

import grpc

from covel.store.v1 import store_pb2, store_pb2_grpc
from services.store import (
    admin_plugin_data,
    detached_jobs,
    hook_state,
    interactions,
    job_commits,
    leases,
    memory_vectors,
    plugin_faults,
    seat_grants,
    session_opening,
    session_pages,
    sessions,
    settlements,
    story_line,
    turn_signals,
    validation,
    world,
    world_data_sync,
)
from services.store.database import Database, create_store_engine
from services.store.hook_state_writes import HookStateWrites
from services.store.job_claims import QUEUE, claim_waiting
from services.store.lease_wakeups import LeaseWakeups
from services.store.revisions import entries_revision
from services.store.session_world import check_session_world, create_session_in_world
from services.store.settings import StoreSettings
from services.store.turn_commit import commit_turn
from services.store.turn_reads import read_for_turn
from shared.call_streams import ServedStream, StreamMethods
from shared.errors import aborted, invalid_argument, require, rpc
from shared.grpc_client import deadline_of
from shared.grpc_server import RunningServer, start_server
from shared.logs import get_logger
from shared.lorebook import check_entry as check_lorebook_entry
from shared.security.service_identity import caller_identity
from shared.telemetry import metrics
from shared.telemetry.tracing import traced

SERVICE = "covel.store.v1.TransactionalStore"
log = get_logger(component="store")
_closing: set[asyncio.Task[None]] = set()


class TransactionalStoreServicer(store_pb2_grpc.TransactionalStoreServicer):
    def __init__(self, database: Database, settings: StoreSettings) -> None:
        self._db = database
        self._default_ttl_ms = settings.store_default_lease_ttl_ms
        self._retries = detached_jobs.RetryPolicy(settings.store_detached_max_attempts, settings.store_detached_retry_base_ms,
                                                  settings.store_detached_retry_max_ms)
        self._queue_limits = leases.QueueLimits(settings.store_detached_max_per_session, settings.store_detached_max_total)
        # Turns waiting for a session's lease are woken when this store lets the session go: players' turns whenever
        # it may be free; detached jobs and settlements (QUEUE_EXEMPT_ORIGINS) not after a player's turn, whose
        # player may act at once and goes first (they find the session free at their next poll).
        self._player_waits = LeaseWakeups()
        self._job_waits = LeaseWakeups()
        self._state_writes = HookStateWrites(self._db)
        # Idle workers waiting in ClaimDetachedJob are woken when a job may be claimable (job_claims.py).
        self._queued = LeaseWakeups()
        # A lease holder waiting for its turn's signals is woken by SignalTurn.
        self._signals = LeaseWakeups()

    @rpc
    async def CreateSession(self, request: store_pb2.CreateSessionRequest, context: grpc.aio.ServicerContext) -> store_pb2.CreateSessionResponse:
        session = validation.new_session(request)
        initial_world = request.world if request.HasField("world") else None
        if initial_world is not None:
            check_session_world(initial_world)
        created = await self._db.write(create_session_in_world, session, initial_world)
        log.info("session.created", session_id=created.id)
        return store_pb2.CreateSessionResponse(session=created)

    @rpc
    async def PutLorebookEntry(self, request: store_pb2.PutLorebookEntryRequest, context: grpc.aio.ServicerContext) -> store_pb2.PutLorebookEntryResponse:
        validation.session_id(request.session_id)
        check_lorebook_entry(request.entry, "entry")
        return store_pb2.PutLorebookEntryResponse(entry=await self._db.write(sessions.put_lorebook_entry, request))

    @rpc
    async def DeleteLorebookEntry(self, request: store_pb2.DeleteLorebookEntryRequest, context: grpc.aio.ServicerContext) -> store_pb2.DeleteLorebookEntryResponse:
        validation.session_id(request.session_id)
        require(request.owner, "owner", "world, player or plugin:<pluginId>")
        require(request.id, "id", "the entry's id")
        return store_pb2.DeleteLorebookEntryResponse(deleted=await self._db.write(sessions.delete_lorebook_entry, request))

    @rpc
    async def UpdateSessionPlugins(self, request: store_pb2.UpdateSessionPluginsRequest, context: grpc.aio.ServicerContext) -> store_pb2.UpdateSessionPluginsResponse:
        validation.session_plugins(request)
        return store_pb2.UpdateSessionPluginsResponse(session=await self._db.write(sessions.update_session_plugins, request))

    @rpc
    async def SetSeatCharacter(self, request: store_pb2.SetSeatCharacterRequest, context: grpc.aio.ServicerContext) -> store_pb2.SetSeatCharacterResponse:
        validation.session_id(request.session_id)
        require(request.seat_id, "seat_id", "the seat whose character changes, e.g. main")
        require(request.character_id, "character_id", "one of the session's characters")
        return store_pb2.SetSeatCharacterResponse(session=await self._db.write(sessions.set_seat_character, request))

    @rpc
    async def GetSession(self, request: store_pb2.GetSessionRequest, context: grpc.aio.ServicerContext) -> store_pb2.GetSessionResponse:
        validation.session_id(request.session_id)
        return store_pb2.GetSessionResponse(session=await self._db.read(sessions.get_session, request.session_id, request.owner,
                                                                        request.or_guest))

    @rpc
    async def GrantSeat(self, request: store_pb2.GrantSeatRequest, context: grpc.aio.ServicerContext) -> store_pb2.GrantSeatResponse:
        validation.session_id(request.session_id)
        require(request.seat_id, "seat_id", "the seat the grant opens")
        require(request.secret_digest, "secret_digest", "the SHA-256 (hex) of the grant's secret")
        return store_pb2.GrantSeatResponse(session=await self._db.write(seat_grants.grant_seat, request))

    @rpc
    async def RedeemSeatGrant(self, request: store_pb2.RedeemSeatGrantRequest, context: grpc.aio.ServicerContext) -> store_pb2.RedeemSeatGrantResponse:
        validation.session_id(request.session_id)
        require(request.secret_digest, "secret_digest", "the SHA-256 (hex) of the grant's secret")
        require(request.principal, "principal", "who takes the seat")
        return await self._db.write(seat_grants.redeem_seat_grant, request)

    @rpc
    async def RevokeSeat(self, request: store_pb2.RevokeSeatRequest, context: grpc.aio.ServicerContext) -> store_pb2.RevokeSeatResponse:
        validation.session_id(request.session_id)
        require(request.seat_id, "seat_id", "the seat whose grant and guest end")
        return store_pb2.RevokeSeatResponse(session=await self._db.write(seat_grants.revoke_seat, request))

    @rpc
    async def ListSessions(self, request: store_pb2.ListSessionsRequest, context: grpc.aio.ServicerContext) -> store_pb2.ListSessionsResponse:
        return await self._db.read(session_pages.list_sessions, request)

    @rpc
    async def EndSession(self, request: store_pb2.EndSessionRequest, context: grpc.aio.ServicerContext) -> store_pb2.EndSessionResponse:
        validation.session_id(request.session_id)
        reason = request.reason or "ended"
        if reason not in ("ended", "deleted"):
            raise invalid_argument("reason", f"is {request.reason!r}; use ended or deleted")
        session, changed = await self._db.write(sessions.end_session, request.session_id, reason)
        self._player_waits.wake(request.session_id)
        self._job_waits.wake(request.session_id)
        return store_pb2.EndSessionResponse(session=session, changed=changed)

    @rpc
    async def RenameSession(self, request: store_pb2.RenameSessionRequest, context: grpc.aio.ServicerContext) -> store_pb2.RenameSessionResponse:
        validation.session_id(request.session_id)
        title = validation.session_title(request.title)
        session, changed = await self._db.write(sessions.rename_session, request.session_id, title)
        return store_pb2.RenameSessionResponse(session=session, changed=changed)

    @rpc
    async def SetOpening(self, request: store_pb2.SetOpeningRequest, context: grpc.aio.ServicerContext) -> store_pb2.SetOpeningResponse:
        validation.session_id(request.session_id)
        if not request.text.strip() or len(request.text) > session_opening.OPENING_MAX:
            raise invalid_argument("text", f"must be 1 to {session_opening.OPENING_MAX} characters: the opening's text")
        message, changed = await self._db.write(session_opening.set_opening, request.session_id, request.text, request.opening_id)
        return store_pb2.SetOpeningResponse(message=message, changed=changed)

    @rpc
    async def AcquireTurnLease(self, request: store_pb2.AcquireTurnLeaseRequest, context: grpc.aio.ServicerContext) -> store_pb2.AcquireTurnLeaseResponse:
        validation.acquire(request)
        if request.without_lease:
            return await self._db.read(leases.snapshot, request)
        ttl_ms = validation.ttl_ms(request.ttl_ms, self._default_ttl_ms)
        waits = self._job_waits if request.origin in leases.QUEUE_EXEMPT_ORIGINS else self._player_waits
        reply = await leases.acquire(self._db, request, ttl_ms, context.time_remaining(), self._queue_limits, waits)
        if reply.HasField("lease"):
            log.debug("lease.acquired", session_id=request.session_id, lease_id=reply.lease.lease_id, holder=request.holder)
            if request.HasField("reads"):
                # Read apart from the write that took the lease: the one SQLite writer is not held for reads,
                # and under the lease nothing else writes what they read.
                reply.MergeFrom(await self._db.read(read_for_turn, request.session_id, request.reads))
        return reply

    @rpc
    async def RenewTurnLease(self, request: store_pb2.RenewTurnLeaseRequest, context: grpc.aio.ServicerContext) -> store_pb2.RenewTurnLeaseResponse:
        validation.session_id(request.session_id)
        require(request.lease_id, "lease_id", "the lease AcquireTurnLease returned")
        ttl_ms = validation.ttl_ms(request.ttl_ms, self._default_ttl_ms)
        lease = await self._db.write(leases.renew, request.session_id, request.lease_id, ttl_ms)
        return store_pb2.RenewTurnLeaseResponse(lease=lease)

    @rpc
    async def ReleaseTurnLease(self, request: store_pb2.ReleaseTurnLeaseRequest, context: grpc.aio.ServicerContext) -> store_pb2.ReleaseTurnLeaseResponse:
        validation.session_id(request.session_id)
        require(request.lease_id, "lease_id", "the lease AcquireTurnLease returned")
        await self._db.write(leases.release, request.session_id, request.lease_id)
        self._player_waits.wake(request.session_id)
        self._signals.wake(request.session_id)  # the holder's wait for signals ends with its lease
        return store_pb2.ReleaseTurnLeaseResponse()

    @rpc
    async def SignalTurn(self, request: store_pb2.SignalTurnRequest, context: grpc.aio.ServicerContext) -> store_pb2.SignalTurnResponse:
        validation.signal_turn(request)
        reply = await turn_signals.signal_waiting(self._db, request)
        self._signals.wake(request.session_id)
        log.info("turn.signalled", session_id=request.session_id, turn_id=reply.signal.turn_id, kind=request.kind, holder=reply.holder)
        return reply

    @rpc
    async def TakeTurnSignals(self, request: store_pb2.TakeTurnSignalsRequest, context: grpc.aio.ServicerContext) -> store_pb2.TakeTurnSignalsResponse:
        validation.take_signals(request)
        # Asked while every turn runs; it may wait for a signal (SignalTurn wakes it).
        signals = await turn_signals.take_waiting(self._db, self._signals, request, context.time_remaining())
        return store_pb2.TakeTurnSignalsResponse(signals=signals)

    @traced("covel.store.commit", lambda self, request, context: {"covel.session_id": request.session_id, "covel.turn_id": request.turn.id})
    @rpc
    async def CommitTurn(self, request: store_pb2.CommitTurnRequest, context: grpc.aio.ServicerContext) -> store_pb2.CommitTurnResponse:
        validation.commit(request)
        if request.job.take_lease:  # a detached job's commit: it takes the lease, waiting as AcquireTurnLease would
            commit = functools.partial(commit_turn, queue_total=self._queue_limits.total, lease_ttl_ms=self._default_ttl_ms)
            reply = await job_commits.commit_when_free(self._db, commit, request, context.time_remaining(), self._job_waits)
        else:
            reply = await self._db.write(commit_turn, request, self._queue_limits.total)
        if reply.HasField("completed_job"):  # as CompleteDetachedJob: room in the session's queue, the runtime's next job
            self._queued.wake(QUEUE)
            log.info("job.completed", job_id=reply.completed_job.id, status=reply.completed_job.status)
        self._player_waits.wake(request.session_id)
        self._signals.wake(request.session_id)
        if (request.turn.origin or "player") not in leases.PLAYER_ORIGINS:
            self._job_waits.wake(request.session_id)
        if reply.enqueued_jobs:
            self._queued.wake(QUEUE)
        record_commit(reply.turn)
        # session_id and turn_id come bound from the request (shared/telemetry/log_context.py).
        log.info(
            "turn.recorded",
            status=store_pb2.TurnStatus.Name(reply.turn.status),
            messages=len(reply.turn.messages),
        )
        return reply

    @rpc
    async def SetSessionHead(self, request: store_pb2.SetSessionHeadRequest, context: grpc.aio.ServicerContext) -> store_pb2.SetSessionHeadResponse:
        validation.session_id(request.session_id)
        require(request.turn_id, "turn_id", "a committed turn of the session (ListTurns)")
        validation.idempotency_key(request.request_id, "request_id")
        if request.move not in ("rewind", "version"):
            raise invalid_argument("move", f"is {request.move!r}; use \"rewind\" (a turn on the line) or \"version\" (a version of the last turn)")
        session = await self._db.write(story_line.move_head_reply, request)
        log.info("session.head_moved", session_id=request.session_id, turn_id=request.turn_id)
        return store_pb2.SetSessionHeadResponse(session=session)

    @rpc
    async def BranchSession(self, request: store_pb2.BranchSessionRequest, context: grpc.aio.ServicerContext) -> store_pb2.BranchSessionResponse:
        validation.session_id(request.session_id)
        require(request.turn_id, "turn_id", "a committed turn of the session's line (ListTurns)")
        validation.idempotency_key(request.request_id, "request_id")
        session = await self._db.write(story_line.branch_reply, request)
        log.info("session.branched", session_id=request.session_id, turn_id=request.turn_id, branch_id=session.id)
        return store_pb2.BranchSessionResponse(session=session)

    @rpc
    async def ListMessages(self, request: store_pb2.ListMessagesRequest, context: grpc.aio.ServicerContext) -> store_pb2.ListMessagesResponse:
        validation.session_id(request.session_id)
        if request.limit < 0:
            raise invalid_argument("limit", "must be 0 (a page from the first) or positive (the newest)")
        return await self._db.read(sessions.list_messages, request)

    @rpc
    async def GetTurn(self, request: store_pb2.GetTurnRequest, context: grpc.aio.ServicerContext) -> store_pb2.GetTurnResponse:
        validation.session_id(request.session_id)
        require(request.turn_id, "turn_id", "a turn id from CommitTurn or ListTurns")
        return store_pb2.GetTurnResponse(turn=await self._db.read(sessions.get_turn, request.session_id, request.turn_id))

    @rpc
    async def ListTurns(self, request: store_pb2.ListTurnsRequest, context: grpc.aio.ServicerContext) -> store_pb2.ListTurnsResponse:
        validation.session_id(request.session_id)
        return await self._db.read(sessions.list_turns, request)

    @rpc
    async def GetRunningTurn(self, request: store_pb2.GetRunningTurnRequest, context: grpc.aio.ServicerContext) -> store_pb2.GetRunningTurnResponse:
        validation.session_id(request.session_id)
        return await self._db.read(sessions.running_turn, request.session_id)

    @rpc
    async def ListPluginData(self, request: store_pb2.ListPluginDataRequest, context: grpc.aio.ServicerContext) -> store_pb2.ListPluginDataResponse:
        validation.session_id(request.session_id)
        entries = await self._db.read(sessions.list_plugin_data, request)
        return store_pb2.ListPluginDataResponse(entries=entries, revision=entries_revision(entries))

    @rpc
    async def SyncWorldData(self, request: store_pb2.SyncWorldDataRequest, context: grpc.aio.ServicerContext) -> store_pb2.SyncWorldDataResponse:
        validation.session_id(request.session_id)
        require(request.world_id, "world_id", "the session's world")
        reply = await self._db.write(world_data_sync.sync, request)
        log.info("world_data.synced", session_id=request.session_id, world_id=request.world_id, dry_run=request.dry_run,
                 changes=len(reply.changes), unchanged=reply.unchanged)
        return reply

    @rpc
    async def AdminPutPluginData(self, request: store_pb2.AdminPutPluginDataRequest, context: grpc.aio.ServicerContext) -> store_pb2.AdminPutPluginDataResponse:
        admin_plugin_data.check_request(request)
        entry = await self._db.write(admin_plugin_data.put, request)
        # The audit line: which operator overrode which record, and why (docs/operations.md).
        log.warning("plugin_data.admin_put", **admin_plugin_data.audit_fields(request, caller_identity(context)))
        return store_pb2.AdminPutPluginDataResponse(entry=entry)

    @rpc
    async def AdminDeletePluginData(self, request: store_pb2.AdminDeletePluginDataRequest, context: grpc.aio.ServicerContext) -> store_pb2.AdminDeletePluginDataResponse:
        admin_plugin_data.check_request(request)
        entry = await self._db.write(admin_plugin_data.delete, request)
        log.warning("plugin_data.admin_delete", **admin_plugin_data.audit_fields(request, caller_identity(context)))
        return store_pb2.AdminDeletePluginDataResponse(entry=entry)

    @rpc
    async def UpdateSessionApprovals(
        self, request: store_pb2.UpdateSessionApprovalsRequest, context: grpc.aio.ServicerContext
    ) -> store_pb2.UpdateSessionApprovalsResponse:
        validation.approvals(request)
        session = await self._db.write(sessions.update_approvals, request)
        log.info("session.approvals", session_id=session.id, approved=list(session.approved_plugins))
        return store_pb2.UpdateSessionApprovalsResponse(session=session)

    @rpc
    async def GetWorld(self, request: store_pb2.GetWorldRequest, context: grpc.aio.ServicerContext) -> store_pb2.GetWorldResponse:
        validation.session_id(request.session_id)
        return await self._db.read(world.get_world, request.session_id)

    @rpc
    async def ListExports(self, request: store_pb2.ListExportsRequest, context: grpc.aio.ServicerContext) -> store_pb2.ListExportsResponse:
        validation.session_id(request.session_id)
        return store_pb2.ListExportsResponse(exports=await self._db.read(world.list_exports, request))

    @rpc
    async def ClaimDetachedJob(self, request: store_pb2.ClaimDetachedJobRequest, context: grpc.aio.ServicerContext) -> store_pb2.ClaimDetachedJobResponse:
        validation.claim_job(request)
        ttl = validation.ttl_ms(request.lease_ttl_ms, detached_jobs.DEFAULT_LEASE_TTL_MS, "lease_ttl_ms")
        # Asked by every idle worker: it waits here (wait_ms) until a job is queued, each look a read (job_claims.py).
        job = await claim_waiting(self._db, self._queued, request, ttl, self._retries, context.time_remaining())
        if job is not None:
            log.info("job.claimed", job_id=job.id, runtime_id=job.runtime_id, holder=request.holder)
        return store_pb2.ClaimDetachedJobResponse(job=job)

    @rpc
    async def RenewDetachedJob(self, request: store_pb2.RenewDetachedJobRequest, context: grpc.aio.ServicerContext) -> store_pb2.RenewDetachedJobResponse:
        validation.job_lease(request.job_id, request.lease_id)
        ttl = validation.ttl_ms(request.lease_ttl_ms, detached_jobs.DEFAULT_LEASE_TTL_MS, "lease_ttl_ms")
        job, lost = await self._db.write(detached_jobs.renew, request.job_id, request.lease_id, ttl, self._retries)
        if lost:
            raise aborted(lost)
        return store_pb2.RenewDetachedJobResponse(job=job)

    @rpc
    async def CompleteDetachedJob(self, request: store_pb2.CompleteDetachedJobRequest, context: grpc.aio.ServicerContext) -> store_pb2.CompleteDetachedJobResponse:
        validation.complete_job(request)
        job, lost = await self._db.write(detached_jobs.complete, request, self._retries)
        if lost:
            raise aborted(lost)
        # Room in the session's detached queue for a turn that waits for it.
        self._player_waits.wake(job.session_id)
        self._queued.wake(QUEUE)  # the runtime's next job, or this one released or queued again
        log.info("job.completed", job_id=job.id, status=job.status)
        return store_pb2.CompleteDetachedJobResponse(job=job)

    @rpc
    async def ListDetachedJobs(self, request: store_pb2.ListDetachedJobsRequest, context: grpc.aio.ServicerContext) -> store_pb2.ListDetachedJobsResponse:
        validation.list_jobs(request)
        return await self._db.read(detached_jobs.list_jobs, request)

    @rpc
    async def RequeueDetachedJob(self, request: store_pb2.RequeueDetachedJobRequest, context: grpc.aio.ServicerContext) -> store_pb2.RequeueDetachedJobResponse:
        validation.job_id(request.job_id)
        job = await self._db.write(detached_jobs.requeue, request.job_id)
        self._queued.wake(QUEUE)
        log.info("job.requeued", job_id=job.id, runtime_id=job.runtime_id)
        return store_pb2.RequeueDetachedJobResponse(job=job)

    @rpc
    async def RecordPluginFaults(self, request: store_pb2.RecordPluginFaultsRequest, context: grpc.aio.ServicerContext) -> store_pb2.RecordPluginFaultsResponse:
        validation.plugin_faults(request)
        paused = await self._db.write(plugin_faults.record, request)
        for pause in paused:
            log.warning("plugin.paused", session_id=request.session_id, plugin_id=pause.plugin_id, reason=pause.reason)
        return store_pb2.RecordPluginFaultsResponse(paused=paused)

    @rpc
    async def AccessHookState(self, request: store_pb2.AccessHookStateRequest, context: grpc.aio.ServicerContext) -> store_pb2.AccessHookStateResponse:
        return await self._access_hook_state(request, caller_identity(context))

    @rpc
    async def HookStateCalls(self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext,
                             ) -> AsyncIterator[store_pb2.HookStateCallsResponse]:
        """AccessHookState calls on one stream, each answered by its id (shared/call_streams.py), as the stream's caller."""
        caller = caller_identity(context)
        methods = StreamMethods("HookStateCalls", {"access": lambda request, _: self._access_hook_state(request, caller)},
                                store_pb2.HookStateCallsResponse, lambda kind, request: deadline_of(SERVICE, "AccessHookState").seconds)
        async for answer in ServedStream(methods).serve(requests):
            yield answer

    async def _access_hook_state(self, request: store_pb2.AccessHookStateRequest, caller: str | None) -> store_pb2.AccessHookStateResponse:
        validation.session_id(request.session_id)
        hook_state.check(request)
        hook_state.check_caller(request, caller)
        if request.op == "get":
            return await self._db.read(hook_state.access, request)
        return await self._state_writes.write(request)  # with the writes that arrive meanwhile (hook_state_writes.py)

    @rpc
    async def ListPausedPlugins(self, request: store_pb2.ListPausedPluginsRequest, context: grpc.aio.ServicerContext) -> store_pb2.ListPausedPluginsResponse:
        validation.session_id(request.session_id)
        session = await self._db.read(sessions.get_session, request.session_id)
        return store_pb2.ListPausedPluginsResponse(plugins=session.paused_plugins)

    @rpc
    async def ResetPluginFaults(self, request: store_pb2.ResetPluginFaultsRequest, context: grpc.aio.ServicerContext) -> store_pb2.ResetPluginFaultsResponse:
        validation.session_id(request.session_id)
        require(request.plugin_id, "plugin_id", "the paused plugin, as Session.paused_plugins names it")
        was_paused = await self._db.write(plugin_faults.reset, request.session_id, request.plugin_id)
        return store_pb2.ResetPluginFaultsResponse(was_paused=was_paused)

    @rpc
    async def ListSettlements(self, request: store_pb2.ListSettlementsRequest, context: grpc.aio.ServicerContext) -> store_pb2.ListSettlementsResponse:
        validation.session_id(request.session_id)
        return store_pb2.ListSettlementsResponse(settlements=await self._db.read(settlements.list_settlements, request))

    @rpc
    async def ResolveSettlement(self, request: store_pb2.ResolveSettlementRequest, context: grpc.aio.ServicerContext) -> store_pb2.ResolveSettlementResponse:
        validation.resolve_settlement(request)
        settlement = await self._db.write(settlements.resolve, request)
        log.info("settlement.resolved", session_id=request.session_id, source_turn_id=request.source_turn_id,
                 runtime_id=request.runtime_id, resolution=request.resolution)
        return store_pb2.ResolveSettlementResponse(settlement=settlement)

    @rpc
    async def PutMemoryVectors(self, request: store_pb2.PutMemoryVectorsRequest, context: grpc.aio.ServicerContext) -> store_pb2.PutMemoryVectorsResponse:
        validation.session_id(request.session_id)
        memory_vectors.check_put(request)
        return store_pb2.PutMemoryVectorsResponse(written=await self._db.write(memory_vectors.put, request))

    @rpc
    async def SearchMemoryVectors(self, request: store_pb2.SearchMemoryVectorsRequest, context: grpc.aio.ServicerContext) -> store_pb2.SearchMemoryVectorsResponse:
        validation.session_id(request.session_id)
        memory_vectors.check_search(request)
        return await self._db.read(memory_vectors.search, request, self._db.vector_method)

    @rpc
    async def ListInteractions(self, request: store_pb2.ListInteractionsRequest, context: grpc.aio.ServicerContext) -> store_pb2.ListInteractionsResponse:
        validation.session_id(request.session_id)
        return store_pb2.ListInteractionsResponse(interactions=await self._db.read(interactions.list_interactions, request))


class SchemaNotMigrated(RuntimeError):
    """COVEL_STORE_MIGRATE=check and the database is not at this store's schema."""


async def open_database(settings: StoreSettings) -> Database:
    """Connect and migrate to the newest schema (an empty database gets every table)."""
    engine = create_store_engine(
        settings.database_url(),
        schema=settings.store_database_schema,
        pool_size=settings.store_pool_size,
        lock_timeout_ms=settings.store_lock_timeout_ms,
    )
    database = Database(engine, settings.store_pool_size, settings.store_database_schema)
    if settings.store_migrate == "on-start":
        await database.migrate()
    else:
        current, head = await database.revisions()
        if current != head:
            await database.close()
            raise SchemaNotMigrated(f"the database is at schema revision {current or '(none)'}, this store needs {head}: "
                                    "migrate it first (`covel-service store-migrate`, the store's init container), "
                                    "or set COVEL_STORE_MIGRATE=on-start")
    cut = await database.write(leases.cut_after_restart, settings.store_restart_lease_grace_ms)
    log.info("database.ready", backend=database.dialect, url=engine.url.render_as_string(hide_password=True), leases_cut=cut)
    return database


async def start(settings: StoreSettings) -> RunningServer:
    database = await open_database(settings)
    servicer = TransactionalStoreServicer(database, settings)

    def add(server: grpc.aio.Server) -> list[str]:
        store_pb2_grpc.add_TransactionalStoreServicer_to_server(servicer, server)
        return [store_pb2.DESCRIPTOR.services_by_name["TransactionalStore"].full_name]

    try:
        running = await start_server(settings.store_addr, add, settings=settings, service="store")
    except BaseException:
        await database.close()
        raise

    async def database_answers() -> bool:
        await database.ping()
        return True

    # Readiness follows the database: unreachable, the pod leaves its Service (liveness stays SERVING).
    running.watch_readiness(database_answers, settings.store_readiness_interval_s, "database")

    async def close_when_stopped() -> None:
        # on_shutdown runs before in-flight RPCs finish: close the database only after.
        async def close() -> None:
            await running.server.wait_for_termination()
            await database.close()

        task = asyncio.create_task(close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    running.on_shutdown.append(close_when_stopped)
    return running



def record_commit(turn: store_pb2.Turn) -> None:
    """covel_store_commits_total by turn status, covel_store_proposals_total by proposal outcome."""
    if not metrics.enabled():
        return
    metrics.record_commit(
        store_pb2.TurnStatus.Name(turn.status).removeprefix("TURN_STATUS_").lower(),
        [store_pb2.ProposalStatus.Name(outcome.status).removeprefix("PROPOSAL_STATUS_").lower() for outcome in turn.proposal_outcomes],
    )

async def wait_closed() -> None:
    """Wait until every stopped store's database is closed (after RunningServer.stop)."""
    await asyncio.gather(*_closing)

