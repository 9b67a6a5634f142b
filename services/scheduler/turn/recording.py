"""What a finished runtime adds to its turn: its result row, the value downstream inputs bind, the
contracts it satisfied and the proposals it commits with. Pure state updates, no RPC."""

from __future__ import annotations

from covel.store.v1 import store_pb2
from services.scheduler.catalogue import Runtime
from services.scheduler.execution.outcome import OutcomeStatus, RuntimeOutcome, is_story_runtime
from services.scheduler.execution.player_effects import add_shown
from services.scheduler.kinds import ProposalType, RuntimeType, Stage
from services.scheduler.turn.state import TurnState
from shared.ids import new_id
from shared.logs import get_logger
from shared.manifest import CompiledManifest
from shared.structs import to_struct

log = get_logger(component="turn_runner")


def output_contracts(manifest: CompiledManifest) -> tuple[str, ...]:
    contract = manifest.io.output.contract
    return (contract,) if contract else ()


def proposal(runtime: Runtime, kind: str, payload: dict) -> store_pb2.Proposal:
    return store_pb2.Proposal(
        id=new_id(), type=kind, plugin_id=runtime.plugin_id, runtime_id=runtime.runtime_id,
        unit_runtime_id=runtime.runtime_id, payload=to_struct(payload),
    )


def runtime_result(runtime: Runtime, outcome: RuntimeOutcome, manifest: CompiledManifest) -> store_pb2.RuntimeResult:
    result = store_pb2.RuntimeResult(
        runtime_id=runtime.runtime_id, plugin_id=runtime.plugin_id, status=outcome.status, reason=outcome.reason,
        output=to_struct(outcome.output), run_id=outcome.run_id, story=is_story_runtime(runtime), setup=runtime.stage == Stage.SETUP,
        concealed=manifest.io.concealed, retryable=outcome.status == OutcomeStatus.FAILED and outcome.retryable,
    )
    if outcome.usage.get("calls"):
        result.usage.CopyFrom(store_pb2.TokenUsage(
            prompt_tokens=outcome.usage.get("promptTokens", 0), completion_tokens=outcome.usage.get("completionTokens", 0),
            calls=outcome.usage["calls"], context_tokens=outcome.usage.get("contextTokens", 0),
            context_window=outcome.usage.get("contextWindow", 0)))
    if outcome.status == OutcomeStatus.SUCCESS:
        # A failed or skipped runtime's effects are stripped (spec: 失败或跳过的 handler 结果会剥离领域 effects).
        add_shown(result, outcome.shown)
        result.completion = outcome.completion or ""
    elif outcome.status == OutcomeStatus.SUSPENDED and outcome.suspension is not None:
        # Its question is shown; answering it resumes the run from what is saved here (agent/suspension.py).
        add_shown(result, outcome.shown, resumes=True)
        result.suspension.CopyFrom(to_struct(outcome.suspension))
    return result


def unit_proposals(runtime: Runtime, outcome: RuntimeOutcome, manifest: CompiledManifest) -> list[store_pb2.Proposal]:
    """What a successful (or guard-skipped) unit commits: its story, its writes, its write services'
    staged changes, its recordAs export and the events it emitted, in that order."""
    proposals = []
    if outcome.story is not None:
        proposals.append(proposal(runtime, ProposalType.NARRATIVE_APPEND, {"text": outcome.story.narrative_output, **outcome.story.to_output()}))
    proposals.extend(proposal(runtime, write["type"], write["payload"]) for write in outcome.writes)
    for write in outcome.foreign_writes:
        # A write service's staged change: the service's plugin owns it, it commits with this unit.
        staged = proposal(runtime, write["type"], write["payload"])
        staged.plugin_id = write["pluginId"]
        if write.get("service"):
            # Its source is the provider's service, not the caller (spec: 写服务的操作); its unit stays the caller's.
            staged.runtime_id = f"service:{write['service']}"
        proposals.append(staged)
    # recordAs: the business value, frozen as an export at commit (a function without a value records none).
    record_as = manifest.io.output.record_as
    if record_as and (runtime.type != RuntimeType.FUNCTION or outcome.has_value):
        value = outcome.canonical_value if runtime.type == RuntimeType.FUNCTION else outcome.output
        proposals.append(proposal(runtime, ProposalType.EXPORT_RECORD, {"recordAs": record_as, "value": value}))
    proposals.extend(proposal(runtime, ProposalType.EVENT_EMIT, {"name": event["topic"], "payload": event.get("payload")})
                     for event in outcome.events)
    return proposals


def record_outcome(runtime: Runtime, outcome: RuntimeOutcome, run: TurnState, turn: store_pb2.Turn, manifest: CompiledManifest) -> None:
    """Note a finished (or skipped) runtime on the turn's shared state and its record."""
    file_outcome(runtime, outcome, run, turn, manifest, note_outcome(runtime, outcome, run, manifest))


def note_outcome(runtime: Runtime, outcome: RuntimeOutcome, run: TurnState, manifest: CompiledManifest) -> list[store_pb2.Proposal]:
    """What runtimes starting after this one read at once: its status, the value its consumers bind and the contracts
    it satisfied. Returns what it commits with (none for a failed or skipped unit), for file_outcome."""
    run.outcomes[runtime.runtime_id] = outcome
    run.statuses[runtime.runtime_id] = outcome.status
    if outcome.status != OutcomeStatus.SUCCESS and not outcome.guard_skipped:
        return []
    if runtime.type != RuntimeType.FUNCTION or outcome.has_value:
        # Downstream inputs bind the business value: a function's canonicalValue, projected.
        run.outputs[runtime.runtime_id] = outcome.output
    for contract in output_contracts(manifest):
        run.providers.setdefault(contract, []).append(runtime.runtime_id)
        if outcome.status == OutcomeStatus.SUCCESS:
            run.satisfied.add(contract)
    return unit_proposals(runtime, outcome, manifest)


def file_outcome(runtime: Runtime, outcome: RuntimeOutcome, run: TurnState, turn: store_pb2.Turn, manifest: CompiledManifest,
                 proposals: list[store_pb2.Proposal]) -> None:
    """A noted outcome onto the turn's record, in the commit's order: its result row, its proposals, the
    units it read from and the events it emitted."""
    turn.runtime_results.append(runtime_result(runtime, outcome, manifest))
    if outcome.status == OutcomeStatus.FAILED and manifest.io.concealed:
        # A concealed runtime's real failure goes to the server log only.
        log.warning("concealed.failed", runtime_id=runtime.runtime_id, session_id=turn.session_id, reason=outcome.reason)
    if outcome.status != OutcomeStatus.SUCCESS and not outcome.guard_skipped:
        return
    run.shared.proposals.extend(proposals)
    # Upstream units it read buffered plugin data or staged operations (operations@1) of.
    run.read_from[runtime.runtime_id] = set(outcome.read_from) | run.operation_reads.get(runtime.runtime_id, set())
    run.emitted.extend({**event, "source": runtime.runtime_id} for event in outcome.events)
