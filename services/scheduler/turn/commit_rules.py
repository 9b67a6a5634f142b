"""What a turn commits: which proposals the PreStateCommit hooks are asked about and what a veto
takes down, the turn's narrative, the units' read dependencies, the setup progress and phase, and
the story speakers resolved to the session's characters. Pure: the commit's I/O is commit.py's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from covel.common.v1 import common_pb2
from covel.store.v1 import store_pb2
from services.scheduler.execution.outcome import OutcomeStatus
from services.scheduler.kinds import ProposalType, SessionPhase, Stage
from services.scheduler.turn.selection import setup_progress
from services.scheduler.turn.speakers import resolve_speakers
from services.scheduler.turn.state import TurnState
from shared.structs import from_struct, to_struct


def commit_unit(proposal: store_pb2.Proposal) -> str:
    """The commit unit a proposal belongs to: the top-level runtime with its nested calls."""
    return proposal.unit_runtime_id or proposal.runtime_id or proposal.plugin_id


def whole_turn_units(results: Iterable[store_pb2.RuntimeResult]) -> set[str]:
    """Story and setup units: a veto of one of their writes takes the whole execution down (spec: 提交单元)."""
    return {result.runtime_id for result in results if result.story or result.setup}


def asks_hooks(unit: str, vetoed_units: set[str], whole_turn: set[str]) -> bool:
    """Whether PreStateCommit hooks are asked about a proposal: not when its unit (or the whole turn) will not commit."""
    return unit not in vetoed_units and not (whole_turn & vetoed_units)


def veto(proposal: store_pb2.Proposal, trace: Iterable[common_pb2.HookTraceEntry], reason: str) -> store_pb2.ProposalOutcome:
    """The REJECTED outcome a PreStateCommit abort gives a proposal; the store applies it like a write it refused."""
    by = next((entry.handler_plugin_id for entry in trace if entry.status == "abort"), "")
    return store_pb2.ProposalOutcome(
        proposal_id=proposal.id, status=store_pb2.PROPOSAL_STATUS_REJECTED, code="hook-aborted",
        reason=f"PreStateCommit hook{' of ' + by if by else ''} aborted it: {reason}",
    )


def turn_narrative(kept: Iterable[store_pb2.Proposal], vetoed_units: set[str]) -> str:
    return "\n\n".join(
        str(from_struct(proposal.payload).get("text", "")) for proposal in kept
        if proposal.type == ProposalType.NARRATIVE_APPEND and commit_unit(proposal) not in vetoed_units
    )


def unit_dependencies(run: TurnState) -> list[store_pb2.UnitDependencies]:
    """A unit discarded at commit takes down what needed it or read its data (store: read dependencies)."""
    dependencies = []
    for runtime_id in run.outcomes:
        needs, read_from = sorted(run.needs.get(runtime_id, ())), sorted(run.read_from.get(runtime_id, ()))
        if needs or read_from:
            dependencies.append(store_pb2.UnitDependencies(unit_runtime_id=runtime_id, needs=needs, read_from=read_from))
    return dependencies


def setup_commit(results: Iterable[store_pb2.RuntimeResult], run: TurnState, session: store_pb2.Session) -> dict:
    """setup_progress of the setup runtimes that ran, and phase "playing" once none is left to do."""
    progress: dict[str, dict] = {}
    for result in results:
        if not result.setup:
            continue
        outcome = run.outcomes.get(result.runtime_id)
        version = run.shared.packages[result.plugin_id].version
        previous = from_struct(session.setup_runtimes[result.runtime_id]) if result.runtime_id in session.setup_runtimes else None
        ran = outcome is not None and result.runtime_id not in run.rewritten
        pending = ran and outcome is not None and outcome.completion == "pending"
        completed = ran and outcome is not None and result.status == OutcomeStatus.SUCCESS and not pending
        waived = ran and outcome is not None and outcome.guard_skipped
        recorded = setup_progress(previous, version, result.status, result.reason, completed=completed, waived=waived, pending=pending)
        if recorded is not None:
            progress[result.runtime_id] = recorded
    fields: dict = {"setup_progress": {rid: to_struct(value) for rid, value in progress.items()}} if progress else {}
    if session.phase == SessionPhase.SETUP:
        setup_ids = [rid for rid, manifest in run.shared.manifests.items() if manifest.schedule.stage == Stage.SETUP]
        merged = {rid: from_struct(value) for rid, value in session.setup_runtimes.items()} | progress
        if all((merged.get(rid) or {}).get("state") in ("done", "blocked") for rid in setup_ids):
            fields["phase"] = SessionPhase.PLAYING
            fields["first_player_turn"] = any(action.text and not action.HasField("interaction") and action.kind != "advance"
                                              for action in run.actions)
    return fields


def setup_still_pending(results: Iterable[store_pb2.RuntimeResult], run: TurnState) -> bool:
    """A session in its setup phase whose setup runtimes, with this turn's results, are not all done (or blocked)."""
    session = run.shared.session
    return session is not None and session.phase == SessionPhase.SETUP and "phase" not in setup_commit(results, run, session)


def keep_earlier_outcomes(committed: store_pb2.Turn, turn: store_pb2.Turn) -> None:
    """Outcomes decided before the store (hook vetoes) stay in the committed record."""
    known = {outcome.proposal_id for outcome in committed.proposal_outcomes}
    for outcome in turn.proposal_outcomes:
        if outcome.proposal_id not in known:
            committed.proposal_outcomes.append(outcome)


def landed(committed: store_pb2.Turn) -> set[str]:
    """The proposals the store committed."""
    return {outcome.proposal_id for outcome in committed.proposal_outcomes if outcome.status == store_pb2.PROPOSAL_STATUS_COMMITTED}


def resolve_story_speakers(stories: Iterable[store_pb2.Proposal], results: Iterable[store_pb2.RuntimeResult],
                           characters: list[dict[str, Any]]) -> None:
    """Story speakers and cues.present become the session's characters where a name matches exactly,
    in the story proposals and in their runtimes' result output."""
    results = list(results)
    for proposal in stories:
        payload = from_struct(proposal.payload)
        present = (payload.get("cues") or {}).get("present") or []
        resolution = resolve_speakers(payload.get("segments") or [], present, characters)
        payload["segments"] = resolution.segments
        payload["presentCharacterIds"] = resolution.present_character_ids
        proposal.payload.CopyFrom(to_struct(payload))
        for result in results:
            if result.runtime_id == proposal.runtime_id:
                output = from_struct(result.output)
                output["segments"] = resolution.segments
                output["unresolvedSpeakers"] = resolution.unresolved
                result.output.CopyFrom(to_struct(output))
