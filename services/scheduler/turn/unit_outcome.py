"""One runtime's outcome as the kernel settles it: whether it runs at all, what a PostRuntime hook's
replaced result changes, whether its output meets its contract, and which writes it keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.scheduler.catalogue import Package, Runtime
from services.scheduler.execution.outcome import OutcomeStatus, RuntimeOutcome, is_story_runtime
from services.scheduler.execution.output_contracts import SchemaUnavailable, check_output, output_schemas
from services.scheduler.execution.story_output import EmptyStory, normalize_story
from services.scheduler.kinds import ProposalType, RuntimeType
from services.scheduler.turn.runtime_result import apply_replaced_result
from shared.manifest import CompiledManifest


def reads_operations(manifest: CompiledManifest) -> bool:
    """Whether an input binds operations@1: the runtime then reads the staged operations of the units before it."""
    return "operations@1" in manifest.io.kernel_inputs()


def may_guard(pre_aborted: bool, input_gate: str, manifest: CompiledManifest) -> bool:
    """A guard runs only for a runtime that would run otherwise."""
    return not pre_aborted and not input_gate and bool(manifest.guard)


def gate_outcome(pre_aborted: bool, pre_reason: str, input_gate: str) -> RuntimeOutcome | None:
    """The skip when a PreRuntime hook aborted the runtime or a required input failed; None when it runs."""
    if pre_aborted:
        return RuntimeOutcome(OutcomeStatus.SKIPPED, pre_reason)
    if input_gate:
        return RuntimeOutcome(OutcomeStatus.SKIPPED, input_gate)
    return None


def post_runtime_result(runtime: Runtime, outcome: RuntimeOutcome, turn_id: str) -> dict[str, Any]:
    """The result PostRuntime hooks are shown (and may replace)."""
    result: dict[str, Any] = {
        "pluginId": runtime.plugin_id,
        "runtimeId": runtime.runtime_id,
        "runId": outcome.run_id,
        "turnId": turn_id,
        "status": outcome.status,
        "reason": outcome.reason,
        "output": outcome.output,
        "pendingProposals": [{"type": ProposalType.NARRATIVE_APPEND}] if outcome.story is not None else [],
    }
    if outcome.has_value:
        result["canonicalValue"] = outcome.canonical_value
    if outcome.shown:
        result["effects"] = outcome.shown
    if outcome.completion:
        result["completion"] = outcome.completion
    return result


def apply_post_runtime(runtime: Runtime, outcome: RuntimeOutcome, original: dict[str, Any], replaced: Any) -> RuntimeOutcome:
    """A hook's replaced result on the outcome; the kernel keeps identity and writes (runtime_result.py)."""
    if replaced == original:
        return outcome
    result = apply_replaced_result(original, replaced)
    if runtime.type == RuntimeType.FUNCTION:
        outcome.has_value = "canonicalValue" in result
        outcome.canonical_value = result.get("canonicalValue")
        if isinstance(result.get("output"), dict):
            outcome.output = result["output"]
    outcome.status = str(result.get("status") or outcome.status)
    outcome.reason = str(result.get("reason") or "")
    if result.get("writesDiscarded"):
        outcome.story, outcome.shown, outcome.completion = None, {}, None
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


def check_unit_output(runtime: Runtime, manifest: CompiledManifest, package: Package, outcome: RuntimeOutcome) -> RuntimeOutcome:
    """The published contract at the output boundary, for a successful or guard-skipped non-story
    runtime: a failing result commits nothing."""
    if not ((outcome.status == OutcomeStatus.SUCCESS or outcome.guard_skipped) and not is_story_runtime(runtime)):
        return outcome
    try:
        schemas = output_schemas(manifest, package.contracts, Path(package.root_dir))
    except SchemaUnavailable as error:
        return RuntimeOutcome(OutcomeStatus.FAILED, f"output-schema-invalid: {error}", run_id=outcome.run_id, trace=outcome.trace)
    if not schemas:
        return outcome
    if runtime.type == RuntimeType.FUNCTION and not outcome.has_value:
        return RuntimeOutcome(
            "failed", "output-schema-invalid: no business value for the output contract (a PostRuntime hook replaced "
            "output without canonicalValue, or the handler returned nothing)", run_id=outcome.run_id, trace=outcome.trace,
        )
    value = outcome.canonical_value if runtime.type == RuntimeType.FUNCTION else outcome.output
    problem = check_output(value, schemas)
    if problem:
        return RuntimeOutcome(OutcomeStatus.FAILED, problem, run_id=outcome.run_id, trace=outcome.trace)
    return outcome


def without_discarded_writes(outcome: RuntimeOutcome) -> RuntimeOutcome:
    """Only a success (or a guard's skip) keeps its writes."""
    if outcome.status != OutcomeStatus.SUCCESS and not outcome.guard_skipped:
        outcome.writes = []
    return outcome
