"""The end of a turn: PreStateCommit hooks vet its proposals, story speakers are resolved, the
store commits it in one transaction, PostStateCommit hooks hear what landed. What commits is
commit_rules.py's; this is its I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from google.protobuf import timestamp_pb2

from covel.scheduler.internal.v1 import turn_events_pb2
from covel.store.v1 import store_pb2, store_pb2_grpc
from services.scheduler.catalogue import Package
from services.scheduler.execution.dataset_policies import dataset_policies
from services.scheduler.execution.player_effects import shown_events
from services.scheduler.execution.runtime_scope import Emit
from services.scheduler.hooks.bus import ExecutionScope, HookBus
from services.scheduler.hooks.payloads import PostStateCommit, PreStateCommit
from services.scheduler.hooks.replies import PreStateCommitReply
from services.scheduler.kinds import ProposalType, SessionPhase
from services.scheduler.turn.commit_rules import (
    asks_hooks,
    commit_unit,
    keep_earlier_outcomes,
    landed,
    resolve_story_speakers,
    setup_commit,
    unit_dependencies,
    veto,
    whole_turn_units,
)
from services.scheduler.turn.lease_hold import LeaseHold
from services.scheduler.turn.settlements import duties
from services.scheduler.turn.state import TurnState
from services.scheduler.turn.stream import TurnStream
from services.scheduler.world_records import character_records
from shared.structs import to_struct


def now() -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.GetCurrentTime()
    return stamp


@dataclass
class Vetted:
    """The proposals that go to the store (vetoed ones too, with their REJECTED outcome on the turn)."""

    kept: list[store_pb2.Proposal] = field(default_factory=list)
    vetoed_units: set[str] = field(default_factory=set)


class TurnCommit:
    def __init__(self, store: store_pb2_grpc.TransactionalStoreStub, hooks: HookBus) -> None:
        self._store = store
        self._hooks = hooks

    async def vet(self, proposals: list[store_pb2.Proposal], scope: ExecutionScope, stream: TurnStream) -> Vetted:
        """PreStateCommit for each proposal: a rejected write takes its whole commit unit (the top-level
        runtime with its nested calls) down; in a story or setup unit, the whole execution (spec: 提交单元).
        The store applies the rule: a vetoed proposal goes to it with its REJECTED outcome."""
        vetted = Vetted()
        whole_turn = whole_turn_units(stream.turn.runtime_results)
        for proposal in proposals:
            unit = commit_unit(proposal)
            vetted.kept.append(proposal)
            if not asks_hooks(unit, vetted.vetoed_units, whole_turn):
                continue
            verdict = await self._hooks.dispatch(PreStateCommit(proposal), scope, plugin_id=proposal.plugin_id, runtime_id=proposal.runtime_id)
            await stream.record(verdict.trace)
            if verdict.aborted:
                stream.turn.proposal_outcomes.append(veto(proposal, verdict.trace, verdict.reason))
                vetted.vetoed_units.add(unit)
                continue
            payload = PreStateCommitReply.of(verdict).payload
            if payload is not None:
                proposal.payload.CopyFrom(to_struct(payload))
        return vetted

    @staticmethod
    def resolve_speakers(world: store_pb2.GetWorldResponse | None, proposals: list[store_pb2.Proposal], turn: store_pb2.Turn) -> None:
        """Story speakers and cues.present become the session's characters (the committed world, read with
        the lease: nothing else writes it while the turn holds it) where a name matches exactly."""
        stories = [p for p in proposals if p.type == ProposalType.NARRATIVE_APPEND]
        if not stories:
            return
        characters = character_records(world)
        if characters:
            resolve_story_speakers(stories, turn.runtime_results, characters)

    async def commit(self, turn: store_pb2.Turn, hold: LeaseHold, proposals: list[store_pb2.Proposal], emit: Emit,
                     run: TurnState | None = None, read_checks: store_pb2.ReadChecks | None = None,
                     job: store_pb2.JobCommit | None = None) -> store_pb2.CommitTurnResponse:
        """One store transaction under `hold`'s lease (lease_hold.py); without `run` (a turn that ended early) only the
        turn record commits. With `read_checks` (a detached job that ran without the lease), ABORTED READ_CONFLICT when
        what it read changed; with `job`, the detached job it ran ends with it when it commits (completed_job)."""
        turn.finished_at.CopyFrom(now())
        extras: dict = {}
        if run is not None:
            session = run.shared.session if run.shared.session is not None else store_pb2.Session(id=turn.session_id, phase=SessionPhase.PLAYING)
            extras = {"dependencies": unit_dependencies(run), "detached_jobs": run.detached_jobs,
                      "datasets": dataset_policies(run.shared.packages, proposals), "dimension_owners": dimension_owners(run.shared.packages),
                      "settlements": duties(run), **setup_commit(turn.runtime_results, run, session)}
            turn.trace.extend(to_struct(entry) for entry in run.operation_entries())

        async def send(lease: store_pb2.TurnLease | None, sent_job: store_pb2.JobCommit | None) -> store_pb2.CommitTurnResponse:
            request = store_pb2.CommitTurnRequest(session_id=turn.session_id, lease_id=lease.lease_id if lease is not None else "", turn=turn,
                                                  proposals=proposals, release_lease=lease is not None, read_checks=read_checks,
                                                  job=sent_job, **extras)
            return await self._store.CommitTurn(request, timeout=hold.commit_timeout_s(sent_job))

        reply = await hold.commit(send, job)
        committed = reply.turn
        keep_earlier_outcomes(committed, turn)
        for outcome in committed.proposal_outcomes:
            await emit(turn_events_pb2.TurnEvent(proposal=outcome))
        for event in shown_events(committed):
            await emit(event)
        return reply

    async def after(self, committed: store_pb2.Turn, kept: list[store_pb2.Proposal], scope: ExecutionScope) -> None:
        """PostStateCommit for each proposal that landed, in one call; their trace joins the committed record (not the stream);
        watchers only hear them after the turn answered (hooks/held_events.py)."""
        committed_ids = landed(committed)
        records = [(PostStateCommit(proposal), proposal.plugin_id, proposal.runtime_id) for proposal in kept if proposal.id in committed_ids]
        if records:
            committed.hook_trace.extend(await self._hooks.committed(records, scope))


DIMENSIONS_CONTRACT = "world.dimensions@1"


def dimension_owners(packages: Mapping[str, Package]) -> list[str]:
    """The plugins trusted to write the world's dimensions: the operator's own (builtin) ones that provide
    world.dimensions@1. A community plugin never is, whatever it declares."""
    return sorted(plugin_id for plugin_id, package in packages.items() if package.definition is not None
                  and package.definition.source == "builtin"
                  and any(provided.contract == DIMENSIONS_CONTRACT for provided in package.definition.provides))
